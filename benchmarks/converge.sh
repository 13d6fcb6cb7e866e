#!/usr/bin/env bash
# Converge cost against the node count, on the local podman cluster.
#
#   benchmarks/converge.sh [N ...]          (default: 3)
#   INVENTORY=inventory/local-podman benchmarks/converge.sh 3     the same nodes over podman exec, not SSH
#   MITOGEN=0.3.54 benchmarks/converge.sh 3       also a no-change run under mitogen's strategy (mitogen_linear)
#
# For each N: rebuild the local cluster with N nodes (not timed), run site.yml cold (benchmark included),
# then run it again without the benchmark (--skip-tags benchmark: it measures, so it writes new results
# every time; the health checks still run) and require changed=0 and failed=0 on every node. Prints, per N: cold
# seconds, no-change seconds, their ratio, the node-to-node checks (health's port probe and the
# SSH check) and the slowest tasks of the no-change run; then a table with, for the no-change run, the CPU
# seconds the nodes used and the rest of this machine used (the controller), and no-change(last N) /
# no-change(first N) in wall time and in controller CPU. Run nothing else meanwhile: it counts as controller.
# Timings come from one sitting on one machine: compare them as ratios, not across machines.
# With MITOGEN=<version>, a third run follows: the same no-change run under mitogen_linear (mitogen from PyPI,
# installed once into ~/.cache/ddp-cluster/mitogen-<version>, outside the venv), also required to end with
# changed=0 and failed=0, printed beside the plain one. Not adopted by the collection: see the README.
# Logs: artifacts/converge/N<n>-{cold,nochange,mitogen}.log. Needs `make venv` (the make target does it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-.venv}/bin"
INVENTORY="${INVENTORY:-inventory/local}"   # inventory/local: SSH (the default); inventory/local-podman: podman exec
OUT="$ROOT/artifacts/converge"
mkdir -p "$OUT"
[ "$#" -gt 0 ] || set -- 3
for n in "$@"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "converge.sh: node counts are positive integers, got '$n'" >&2; exit 2; }
done

MITOGEN="${MITOGEN:-}"
MITOGEN_STRATEGY=""
if [ -n "$MITOGEN" ]; then
  [[ "$MITOGEN" =~ ^[0-9]+(\.[0-9]+)*$ ]] || { echo "converge.sh: MITOGEN is a mitogen version (e.g. 0.3.54), got '$MITOGEN'" >&2; exit 2; }
  mitogen_dir="${XDG_CACHE_HOME:-$HOME/.cache}/ddp-cluster/mitogen-$MITOGEN"
  if [ ! -d "$mitogen_dir/ansible_mitogen" ]; then
    rm -rf "$mitogen_dir.tmp"
    "$BIN/python" -m pip install -q --no-deps --target "$mitogen_dir.tmp" "mitogen==$MITOGEN"
    mv "$mitogen_dir.tmp" "$mitogen_dir"
  fi
  MITOGEN_STRATEGY="$mitogen_dir/ansible_mitogen/plugins/strategy"
fi

export ANSIBLE_CALLBACKS_ENABLED=ansible.builtin.timer,ansible.posix.profile_tasks
export PROFILE_TASKS_TASK_OUTPUT_LIMIT=all PROFILE_TASKS_SORT_ORDER=descending
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1

# seconds of one task in a profile_tasks summary ("Name ---- 12.34s"), summed over same-named tasks
task_s() {
  awk -v name="$2" 'index($0, name " -") == 1 { gsub(/s$/, "", $NF); s += $NF } END { printf "%.1f", s + 0 }' "$1"
}

run_site() {  # log [ansible-playbook args] -> prints seconds, fails unless every node ends with failed=0 unreachable=0
  local log="$1" start end
  shift
  start=$(date +%s.%N)
  if ! "$BIN/ansible-playbook" -i "$INVENTORY" site.yml "$@" >"$log" 2>&1; then
    echo "converge.sh: site.yml failed, see $log" >&2
    tail -40 "$log" >&2
    return 1
  fi
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }'
}

# CPU seconds so far, as "host nodes": the host's busy time (/proc/stat: user, nice, system, irq, softirq) and
# the local cluster's nodes' (their cgroups: cpuacct.usage on cgroup v1, cpu.stat usage_usec on v2). Every node
# shares this machine's cores, so a run's node CPU adds up here where real nodes would spend it in parallel; the
# host's time less the nodes' is the controller's (ansible-playbook, its workers, ssh) and whatever else runs.
cpu_now() {
  local tck nodes=0 id path v
  tck=$(getconf CLK_TCK)
  for id in $(podman ps --filter "label=ddp.cluster=local" --format '{{.ID}}'); do
    path=$(podman inspect --format '{{.State.CgroupPath}}' "$id")
    if [ -r "/sys/fs/cgroup/cpuacct$path/cpuacct.usage" ]; then
      v=$(cat "/sys/fs/cgroup/cpuacct$path/cpuacct.usage")
    elif [ -r "/sys/fs/cgroup$path/cpu.stat" ]; then
      v=$(awk '$1 == "usage_usec" { print $2 * 1000 }' "/sys/fs/cgroup$path/cpu.stat")
    else
      v=0
    fi
    nodes=$((nodes + v))
  done
  awk -v tck="$tck" -v nodes="$nodes" '/^cpu / { printf "%.1f %.1f", ($2 + $3 + $4 + $7 + $8) / tck, nodes / 1e9 }' /proc/stat
}

# every node of the run's PLAY RECAP ends changed=0 failed=0 (at least n nodes), or it says which did not
require_no_change() {  # log n
  local recap hosts
  recap=$(sed -n '/^PLAY RECAP/,/^$/p' "$1" | grep -E '^[A-Za-z0-9_.-]+ +:' || true)
  hosts=$(printf '%s\n' "$recap" | grep -c 'ok=' || true)
  if [ "$hosts" -lt "$2" ] || printf '%s\n' "$recap" | grep -vqE 'changed=0 .*failed=0'; then
    echo "converge.sh: the no-change run ($1) changed something or failed on a node:" >&2
    printf '%s\n' "$recap" >&2
    exit 1
  fi
}

declare -A COLD NOCHANGE MITO NODES_CPU CTL_CPU
for n in "$@"; do
  echo "== N=$n: building the local cluster"
  "$BIN/ansible-playbook" playbooks/local_cluster.yml -e local_cluster_state=absent >"$OUT/N$n-down.log" 2>&1
  "$BIN/ansible-playbook" playbooks/local_cluster.yml -e "local_cluster_nodes=$n" >"$OUT/N$n-up.log" 2>&1
  echo "== N=$n: cold site.yml"
  COLD[$n]=$(run_site "$OUT/N$n-cold.log")
  echo "== N=$n: no-change site.yml (--skip-tags benchmark)"
  read -r host0 nodes0 <<<"$(cpu_now)"
  NOCHANGE[$n]=$(run_site "$OUT/N$n-nochange.log" --skip-tags benchmark)
  read -r host1 nodes1 <<<"$(cpu_now)"
  NODES_CPU[$n]=$(awk -v a="$nodes0" -v b="$nodes1" 'BEGIN { printf "%.0f", b - a }')
  CTL_CPU[$n]=$(awk -v a="$host0" -v b="$host1" -v c="${NODES_CPU[$n]}" 'BEGIN { printf "%.0f", b - a - c }')
  require_no_change "$OUT/N$n-nochange.log" "$n"
  if [ -n "$MITOGEN_STRATEGY" ]; then
    echo "== N=$n: no-change site.yml under mitogen $MITOGEN (mitogen_linear)"
    MITO[$n]=$(ANSIBLE_STRATEGY_PLUGINS="$MITOGEN_STRATEGY" ANSIBLE_STRATEGY=mitogen_linear \
               run_site "$OUT/N$n-mitogen.log" --skip-tags benchmark)
    require_no_change "$OUT/N$n-mitogen.log" "$n"
  fi
  for kind in cold nochange; do
    log="$OUT/N$n-$kind.log"
    printf '   %-9s port probe %5ss (start %ss + collect %ss), SSH check %ss\n' "$kind" \
      "$(awk -v a="$(task_s "$log" "Start the rank-to-rank port probe on every node at once")" \
             -v b="$(task_s "$log" "Collect every node's port probe")" 'BEGIN { printf "%.1f", a + b }')" \
      "$(task_s "$log" "Start the rank-to-rank port probe on every node at once")" \
      "$(task_s "$log" "Collect every node's port probe")" \
      "$(task_s "$log" "ddp.cluster.ssh_trust : Check SSH from this node to every other node")"
  done
  echo "   slowest tasks of the no-change run:"
  sed -n '/^=====/,$p' "$OUT/N$n-nochange.log" | grep -E ' -+ [0-9.]+s$' | awk 'NR <= 8 { print "     " $0 }'
done

echo
echo "inventory: $INVENTORY"
echo "no-change CPU seconds: nodes_cpu_s (the nodes' cgroups), ctl_cpu_s (the rest of this machine: the controller)"
printf '%6s %8s %12s %7s %12s %10s' nodes cold_s nochange_s ratio nodes_cpu_s ctl_cpu_s
[ -z "$MITOGEN_STRATEGY" ] || printf ' %10s %14s' mitogen_s mitogen/plain
printf '\n'
for n in "$@"; do
  awk -v n="$n" -v c="${COLD[$n]}" -v z="${NOCHANGE[$n]}" -v m="${MITO[$n]:-}" -v nc="${NODES_CPU[$n]}" \
      -v cc="${CTL_CPU[$n]}" 'BEGIN {
    printf "%6d %8d %12d %7.2f %12d %10d", n, c, z, z / c, nc, cc
    if (m != "") printf " %10d %14.2f", m, m / z
    printf "\n" }'
done
first="$1"; last="${!#}"
if [ "$first" != "$last" ]; then
  awk -v a="${NOCHANGE[$first]}" -v b="${NOCHANGE[$last]}" -v f="$first" -v l="$last" \
    'BEGIN { printf "no-change(%d) / no-change(%d) = %.2f\n", l, f, b / a }'
  awk -v a="${CTL_CPU[$first]}" -v b="${CTL_CPU[$last]}" -v f="$first" -v l="$last" \
    'BEGIN { printf "controller CPU, no-change(%d) / no-change(%d) = %.2f\n", l, f, b / a }'
fi
# What stays behind: the last cluster, left for a look at its nodes (ssh -F .cache/local_cluster/ssh/ddp-local/config
# ddp-node1) or another run.
last_n="${!#}"
echo "converge.sh: left running: the local cluster of $last_n node(s) (containers ddp-node1..ddp-node$last_n, network" \
     "ddp-local); make cluster-down removes it"
