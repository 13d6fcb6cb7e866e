#!/usr/bin/env bash
# The controller's CPU per task and host, by kind of task, without and with ddp.cluster.plugin_preload.
#
#   benchmarks/task_cost.sh [INVENTORY]            (default: inventory/local, the cluster of make cluster)
#   TASKS=40 ROUNDS=2 benchmarks/task_cost.sh .cache/inv-ddp-cv     (converge.sh's PREFIX=ddp-cv cluster)
#
# On the nodes of a running local cluster (the group ddp_nodes of INVENTORY), with the repository's ansible.cfg, runs
# plays of TASKS tasks of one kind each:
#   skip     a module task whose `when` is false (the worker evaluates it, nothing reaches the node)
#   set_fact one variable set (runs on the controller only)
#   ping     ansible.builtin.ping: a module run that does nothing on the node (payload, ssh, Python's start there)
#   stat     ansible.builtin.stat of one file: the read-only probe the roles make most
# and an empty play, the fixed cost (ansible-playbook's start, parsing, the facts every play here gathers).
# Each play runs in a cgroup of its own, as converge.sh counts the controller (its workers, ssh and ControlPersist
# masters included; cgroup v1 cpuacct or v2 cpu.stat, as root), once with callbacks_enabled = ansible.builtin.timer
# and once with ddp.cluster.plugin_preload added. Rounds alternate the two. Prints per kind and round the controller's
# CPU-milliseconds per task and host: (CPU of the play - CPU of the empty play) / (TASKS x nodes), and the ratio with
# the callback to without it. Timings are from one sitting on one machine: compare them as ratios.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-.venv}/bin"
INVENTORY="${1:-inventory/local}"
TASKS="${TASKS:-40}"
ROUNDS="${ROUNDS:-2}"
# shellcheck source=benchmarks/lib/args.sh
. "$ROOT/benchmarks/lib/args.sh"
positive_ints task_cost.sh TASKS ROUNDS
[ -x "$BIN/ansible-playbook" ] || { echo "task_cost.sh: no $BIN/ansible-playbook (make venv)" >&2; exit 2; }
[ -e "$INVENTORY" ] || { echo "task_cost.sh: no inventory $INVENTORY" >&2; exit 2; }
nodes=$("$BIN/ansible" -i "$INVENTORY" ddp_nodes --list-hosts 2>/dev/null | tail -n +2 | grep -c . || true)
[ "$nodes" -gt 0 ] || { echo "task_cost.sh: $INVENTORY has no host in ddp_nodes (is the cluster running?)" >&2; exit 2; }

# shellcheck source=benchmarks/lib/cgroup_cpu.sh
. "$ROOT/benchmarks/lib/cgroup_cpu.sh"
if [ -w /sys/fs/cgroup/cpuacct ] && [ -e /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
  parent=/sys/fs/cgroup/cpuacct counter=cpuacct.usage
elif [ -w /sys/fs/cgroup ] && [ -e /sys/fs/cgroup/cgroup.controllers ]; then
  parent=/sys/fs/cgroup counter=cpu.stat
else
  echo "task_cost.sh: needs a cgroup of its own for the controller (root, cgroup v1 cpuacct or v2)" >&2
  exit 2
fi

work=$(mktemp -d)
cgroup=""
cleanup() {
  local pid
  if [ -n "$cgroup" ] && [ -d "$cgroup" ]; then  # a ControlPersist master goes back to the root cgroup first
    while read -r pid; do echo "$pid" >"$parent/cgroup.procs" 2>/dev/null || true; done <"$cgroup/cgroup.procs"
    rmdir "$cgroup" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

KINDS=(empty skip set_fact ping stat)
task_text() {  # kind index -> one task
  case "$1" in
    skip) printf '    - name: skip %s\n      ansible.builtin.ping:\n      when: false\n' "$2" ;;
    set_fact) printf '    - name: set_fact %s\n      ansible.builtin.set_fact:\n        task_cost_%s: 1\n' "$2" "$2" ;;
    ping) printf '    - name: ping %s\n      ansible.builtin.ping:\n' "$2" ;;
    stat) printf '    - name: stat %s\n      ansible.builtin.stat:\n        path: /etc/hostname\n' "$2" ;;
  esac
}
for kind in "${KINDS[@]}"; do
  {
    printf -- '- name: %s\n  hosts: ddp_nodes\n  gather_facts: true\n  tasks:\n' "$kind"
    if [ "$kind" = empty ]; then
      printf '    - name: nothing\n      ansible.builtin.meta: noop\n'
    else
      for i in $(seq "$TASKS"); do task_text "$kind" "$i"; done
    fi
  } >"$work/$kind.yml"
done

play_cpu() {  # kind callbacks -> the controller's CPU-nanoseconds of the play; fails unless every node is ok
  local ns
  cgroup="$parent/ddp-task-cost-$$"
  mkdir "$cgroup"
  # shellcheck disable=SC2016  # expanded by the inner bash
  if ! ANSIBLE_CALLBACKS_ENABLED="$2" bash -c 'echo "$$" >"$0/cgroup.procs"; exec "${@}"' "$cgroup" \
      "$BIN/ansible-playbook" -i "$INVENTORY" "$work/$1.yml" >"$work/$1.log" 2>&1; then
    echo "task_cost.sh: the $1 play failed:" >&2
    tail -20 "$work/$1.log" >&2
    exit 1
  fi
  ns=$(counter_ns "$cgroup/$counter")
  cleanup_cgroup
  echo "$ns"
}
cleanup_cgroup() {
  local pid
  while read -r pid; do echo "$pid" >"$parent/cgroup.procs" 2>/dev/null || true; done <"$cgroup/cgroup.procs"
  rmdir "$cgroup"
  cgroup=""
}

echo "controller CPU-ms per task and host, $TASKS tasks x $nodes nodes per play ($INVENTORY)"
printf '%-6s %-9s %12s %12s %8s\n' round kind without with ratio
for round in $(seq "$ROUNDS"); do
  declare -A cpu=()
  for kind in "${KINDS[@]}"; do
    cpu[$kind,without]=$(play_cpu "$kind" ansible.builtin.timer)
    cpu[$kind,with]=$(play_cpu "$kind" ansible.builtin.timer,ddp.cluster.plugin_preload)
  done
  for kind in "${KINDS[@]:1}"; do
    awk -v r="$round" -v k="$kind" -v n=$((TASKS * nodes)) \
        -v a="${cpu[$kind,without]}" -v a0="${cpu[empty,without]}" -v b="${cpu[$kind,with]}" -v b0="${cpu[empty,with]}" \
        'BEGIN { x = (a - a0) / n / 1e6; y = (b - b0) / n / 1e6
                 printf "%-6s %-9s %12.1f %12.1f %8.2f\n", r, k, x, y, (x > 0 ? y / x : 0) }'
  done
  unset cpu
done
