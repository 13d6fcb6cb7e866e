#!/usr/bin/env bash
# Converge cost against the node count, on the local podman cluster.
#
#   benchmarks/converge.sh [N ...]          (default: 3)
#   INVENTORY=inventory/local-podman benchmarks/converge.sh 3     the same nodes over podman exec, not SSH
#
# For each N: rebuild the local cluster with N nodes (not timed), run site.yml cold (benchmark included),
# then run it again without the benchmark (--skip-tags benchmark: it measures, so it writes new results
# every time; the health checks still run) and require changed=0 and failed=0 on every node. Prints, per N: cold
# seconds, no-change seconds, their ratio, the node-to-node checks (health's port probe and the
# SSH check) and the slowest tasks of the no-change run; then no-change(last N) / no-change(first N).
# Timings come from one sitting on one machine: compare them as ratios, not across machines.
# Logs: artifacts/converge/N<n>-{cold,nochange}.log. Needs `make venv` (the make target does it).
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

declare -A COLD NOCHANGE
for n in "$@"; do
  echo "== N=$n: building the local cluster"
  "$BIN/ansible-playbook" playbooks/local_cluster.yml -e local_cluster_state=absent >"$OUT/N$n-down.log" 2>&1
  "$BIN/ansible-playbook" playbooks/local_cluster.yml -e "local_cluster_nodes=$n" >"$OUT/N$n-up.log" 2>&1
  echo "== N=$n: cold site.yml"
  COLD[$n]=$(run_site "$OUT/N$n-cold.log")
  echo "== N=$n: no-change site.yml (--skip-tags benchmark)"
  NOCHANGE[$n]=$(run_site "$OUT/N$n-nochange.log" --skip-tags benchmark)
  recap=$(sed -n '/^PLAY RECAP/,/^$/p' "$OUT/N$n-nochange.log" | grep -E '^[A-Za-z0-9_.-]+ +:' || true)
  hosts=$(printf '%s\n' "$recap" | grep -c 'ok=' || true)
  if [ "$hosts" -lt "$n" ] || printf '%s\n' "$recap" | grep -vqE 'changed=0 .*failed=0'; then
    echo "converge.sh: the no-change run changed something or failed on a node:" >&2
    printf '%s\n' "$recap" >&2
    exit 1
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
printf '%6s %8s %12s %7s\n' nodes cold_s nochange_s ratio
for n in "$@"; do
  awk -v n="$n" -v c="${COLD[$n]}" -v z="${NOCHANGE[$n]}" 'BEGIN { printf "%6d %8d %12d %7.2f\n", n, c, z, z / c }'
done
first="$1"; last="${!#}"
if [ "$first" != "$last" ]; then
  awk -v a="${NOCHANGE[$first]}" -v b="${NOCHANGE[$last]}" -v f="$first" -v l="$last" \
    'BEGIN { printf "no-change(%d) / no-change(%d) = %.2f\n", l, f, b / a }'
fi
