#!/usr/bin/env bash
# What ddp.cluster.preload saves: the same skipped tasks timed three ways, on the controller only.
#
#   benchmarks/filter_preload.sh [HOSTS] [TASKS]        (default: 12 hosts, 20 tasks)
#
# HOSTS inventory hosts on the local connection (no node needed), each play TASKS tasks that are all skipped:
#   plain      when: a plain Jinja comparison
#   filter     when: uses ddp.cluster.paths_todo, as the roles' write tasks do (first play as it was)
#   preload    the same tasks, the play's hosts templated through ddp.cluster.preload (playbooks/validate.yml)
# Ansible forks a worker per task and host; a worker that templates the collection's first filter loads the
# collection's filter plugins and ansible-core's routing table itself unless the main process already has.
# Prints seconds per variant and filter/preload. Needs `make venv`. One sitting; compare ratios, not machines.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${VENV:-$ROOT/.venv}/bin"
HOSTS="${1:-12}"
TASKS="${2:-20}"
for v in "$HOSTS" "$TASKS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "filter_preload.sh: HOSTS and TASKS are positive integers, got '$v'" >&2; exit 2; }
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

{
  echo "all:"
  echo "  hosts:"
  for i in $(seq 1 "$HOSTS"); do echo "    h$i:"; done
  echo "  vars:"
  echo "    ansible_connection: local"
  echo "    ansible_python_interpreter: $BIN/python"
} >"$WORK/hosts.yml"

# playbook VARIANT: the play's hosts, then TASKS skipped debug tasks with that variant's when
write_play() {
  local hosts="$1" when="$2" out="$3" i
  {
    echo "---"
    echo "- name: $TASKS skipped tasks"
    echo "  hosts: \"$hosts\""
    echo "  gather_facts: false"
    echo "  tasks:"
    for i in $(seq 1 "$TASKS"); do
      echo "    - name: Task $i"
      echo "      ansible.builtin.debug:"
      echo "        msg: not shown"
      echo "      when: \"$when\""
    done
  } >"$out"
}
FILTER_WHEN="'/etc/other' in [] | ddp.cluster.paths_todo([{'path': '/etc/ddp', 'state': 'directory'}])"
write_play "all" "'/etc/other' in ['/etc/ddp']" "$WORK/plain.yml"
write_play "all" "$FILTER_WHEN" "$WORK/filter.yml"
write_play "{{ 'all' | ddp.cluster.preload }}" "$FILTER_WHEN" "$WORK/preload.yml"

declare -A SECS
for variant in plain filter preload; do
  start=$(date +%s.%N)
  (cd "$ROOT" && ANSIBLE_FORKS="$HOSTS" "$BIN/ansible-playbook" -i "$WORK/hosts.yml" \
      "$WORK/$variant.yml" >"$WORK/$variant.log" 2>&1) || { cat "$WORK/$variant.log" >&2; exit 1; }
  grep -qE "skipped=$TASKS " "$WORK/$variant.log" || { echo "filter_preload.sh: $variant did not skip every task" >&2
                                                         cat "$WORK/$variant.log" >&2; exit 1; }
  SECS[$variant]=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
done
echo "$HOSTS hosts x $TASKS skipped tasks (local connection), seconds:"
printf '  %-8s %6s\n' plain "${SECS[plain]}" filter "${SECS[filter]}" preload "${SECS[preload]}"
awk -v f="${SECS[filter]}" -v p="${SECS[preload]}" 'BEGIN { printf "filter / preload = %.1f\n", f / p }'
