#!/usr/bin/env bash
# What ddp.cluster.preload saves: the same skipped tasks timed three ways, on the controller only.
#
#   benchmarks/filter_preload.sh [HOSTS] [TASKS]        (default: 12 hosts, 20 tasks)
#
# HOSTS inventory hosts on the local connection (no node needed), each play TASKS tasks that are all skipped:
#   plain      when: a plain Jinja comparison
#   filter     when: uses ddp.cluster.paths_todo, as the roles' write tasks do (first play as it was)
#   preload    the same tasks, the play's hosts templated through ddp.cluster.preload (playbooks/validate.yml)
#   test, test+preload       when: uses a Jinja test (is version), without and with preload
#   cg, cg+preload           when: uses community.general.dict_kv, without and with preload
#   matrix, matrix+preload   when: uses ddp.cluster.compat_resolve (the compatibility matrix), without and with it
# Ansible forks a worker per task and host; a worker that templates the collection's first filter loads the
# collection's filter plugins and ansible-core's routing table itself unless the main process already has; the
# first Jinja test, every ansible-core test plugin; the first community.general filter, all of that collection's
# filters; the first resolve against the matrix, the parsed matrix.
# Prints seconds per variant and each pair's ratio. Needs `make venv`. One sitting; compare ratios, not machines.
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
TEST_WHEN="'2.1' is version('3.0', '>')"
CG_WHEN="('x' | community.general.dict_kv('a')) == {}"
MATRIX_WHEN="({} | ddp.cluster.compat_resolve).stack is not defined"
PRELOADED="{{ 'all' | ddp.cluster.preload }}"
write_play "all" "'/etc/other' in ['/etc/ddp']" "$WORK/plain.yml"
write_play "all" "$FILTER_WHEN" "$WORK/filter.yml"
write_play "$PRELOADED" "$FILTER_WHEN" "$WORK/preload.yml"
write_play "all" "$TEST_WHEN" "$WORK/test.yml"
write_play "$PRELOADED" "$TEST_WHEN" "$WORK/test+preload.yml"
write_play "all" "$CG_WHEN" "$WORK/cg.yml"
write_play "$PRELOADED" "$CG_WHEN" "$WORK/cg+preload.yml"
write_play "all" "$MATRIX_WHEN" "$WORK/matrix.yml"
write_play "$PRELOADED" "$MATRIX_WHEN" "$WORK/matrix+preload.yml"

VARIANTS=(plain filter preload test test+preload cg cg+preload matrix matrix+preload)
declare -A SECS
for variant in "${VARIANTS[@]}"; do
  start=$(date +%s.%N)
  (cd "$ROOT" && ANSIBLE_FORKS="$HOSTS" "$BIN/ansible-playbook" -i "$WORK/hosts.yml" \
      "$WORK/$variant.yml" >"$WORK/$variant.log" 2>&1) || { cat "$WORK/$variant.log" >&2; exit 1; }
  grep -qE "skipped=$TASKS " "$WORK/$variant.log" || { echo "filter_preload.sh: $variant did not skip every task" >&2
                                                         cat "$WORK/$variant.log" >&2; exit 1; }
  SECS[$variant]=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
done
echo "$HOSTS hosts x $TASKS skipped tasks (local connection), seconds:"
for variant in "${VARIANTS[@]}"; do printf '  %-15s %6s\n' "$variant" "${SECS[$variant]}"; done
awk -v f="${SECS[filter]}" -v p="${SECS[preload]}" 'BEGIN { printf "filter / preload = %.1f\n", f / p }'
for kind in test cg matrix; do
  awk -v k="$kind" -v f="${SECS[$kind]}" -v p="${SECS[$kind+preload]}" 'BEGIN { printf "%s / %s+preload = %.1f\n", k, k, f / p }'
done
