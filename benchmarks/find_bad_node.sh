#!/usr/bin/env bash
# Time to find one bad node among N, on the local podman cluster.
#
#   benchmarks/find_bad_node.sh [N ...]          (default: 3 6)
#   make find-bad-node NODES="3 6"
#
# For each N: rebuild the local cluster with N nodes and converge it (site.yml --skip-tags benchmark; not timed),
# take the all-node busbw of a healthy health run, then break the last node twice and time
# `health.yml --tags allreduce,pairwise` (the all-node all-reduce, and the pairs it triggers) from start to end:
#   slow  its cluster interface capped with `tc qdisc ... tbf rate $RATE` (default 100mbit); the all-node floor is
#         FLOOR_SHARE (default 0.5) of the healthy run's busbw, so the all-reduce falls below it
#   cut   blackhole routes on it to every other node: every packet between it and its peers is dropped, no reply
#         (a bad VLAN, route or cable; the all-node run's timeout is 60 s, a pair's 30 s to join and 60 s to finish).
#         A firewall that drops only what comes in does not fail a collective every time: one side of each pair
#         of ranks opens the TCP connection, so such a node still talks to the peers it connects to itself
#         (seen here: a 3-node Gloo all-reduce passed with the last node's peers in firewalld's drop zone).
# Each run must fail naming the last node, and only it (PAIRWISE_NODE), and leave no torchrun on any node.
# Prints per N and fault: seconds, rounds, the node named. Timings come from one sitting on one machine:
# compare them as ratios, not across machines. Logs: artifacts/find_bad_node/N<n>-<fault>.log.
# REUSE=1 keeps a running local cluster of exactly N nodes (converged by an earlier run) instead of rebuilding it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-.venv}/bin"
INVENTORY="${INVENTORY:-inventory/local}"
RATE="${RATE:-100mbit}"
FLOOR_SHARE="${FLOOR_SHARE:-0.5}"
PAIR_RATIO="${PAIR_RATIO:-0.25}"   # pairs of one healthy fabric differ by up to 2x on a shared 2-core machine
OUT="$ROOT/artifacts/find_bad_node"
mkdir -p "$OUT"
[ "$#" -gt 0 ] || set -- 3 6
for n in "$@"; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]] || [ "$n" -lt 3 ]; then
    echo "find_bad_node.sh: node counts are integers >= 3 (two nodes cannot be told apart), got '$n'" >&2
    exit 2
  fi
done
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1

nodes() { podman ps --filter label=ddp.cluster=local --format '{{.Names}}' | sort -V; }
address() { podman exec "$1" hostname -I | awk '{ print $1 }'; }
leftovers() {  # torchrun or all-reduce processes on any node
  local node
  for node in $(nodes); do
    podman exec "$node" ps -eo args | grep -E 'torchrun|ddp_nccl_allreduce' | grep -v grep | sed "s/^/$node: /" || true
  done
}

health() {  # log [ansible-playbook args] -> prints seconds; the run's status is not judged here
  local log="$1" start end
  shift
  start=$(date +%s.%N)
  "$BIN/ansible-playbook" -i "$INVENTORY" playbooks/health.yml --tags allreduce,pairwise \
    -e "ddp_health_pair_min_ratio=$PAIR_RATIO" "$@" >"$log" 2>&1 || true
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }'
}

judge() {  # log bad-node -> prints the node(s) named; fails unless exactly the bad node is named
  local log="$1" bad="$2" named
  named=$(grep -oE '\[PAIRWISE_NODE\] \(error\) node [A-Za-z0-9_.-]+' "$log" | awk '{ print $NF }' | sort -u | paste -sd, -)
  if [ "$named" != "$bad" ]; then
    echo "find_bad_node.sh: expected PAIRWISE_NODE for $bad only, got '${named:-nothing}'; see $log" >&2
    grep -E '^\s*pair |\[PAIRWISE' "$log" >&2 || tail -40 "$log" >&2
    return 1
  fi
  if [ -n "$(leftovers)" ]; then
    echo "find_bad_node.sh: processes left after the run:" >&2
    leftovers >&2
    return 1
  fi
  echo "$named"
}

declare -a ROWS
for n in "$@"; do
  if [ "${REUSE:-0}" = 1 ] && [ "$(nodes | wc -l)" -eq "$n" ]; then
    echo "== N=$n: reusing the running local cluster (REUSE=1)"
  else
    echo "== N=$n: building and converging the local cluster (not timed)"
    "$BIN/ansible-playbook" playbooks/local_cluster.yml -e local_cluster_state=absent >"$OUT/N$n-down.log" 2>&1
    "$BIN/ansible-playbook" playbooks/local_cluster.yml -e "local_cluster_nodes=$n" >"$OUT/N$n-up.log" 2>&1
    "$BIN/ansible-playbook" -i "$INVENTORY" site.yml --skip-tags benchmark >"$OUT/N$n-site.log" 2>&1 \
      || { echo "find_bad_node.sh: site.yml failed, see $OUT/N$n-site.log" >&2; tail -30 "$OUT/N$n-site.log" >&2; exit 1; }
  fi
  mapfile -t all < <(nodes)
  bad="${all[-1]}"

  healthy_s=$(health "$OUT/N$n-healthy.log" -e ddp_health_pairwise=never)
  busbw=$(grep -oE 'average busbw [0-9.]+ GB/s' "$OUT/N$n-healthy.log" | awk '{ print $3 }' | tail -1)
  [ -n "$busbw" ] || { echo "find_bad_node.sh: the healthy run gave no busbw, see $OUT/N$n-healthy.log" >&2; exit 1; }
  floor=$(awk -v b="$busbw" -v s="$FLOOR_SHARE" 'BEGIN { printf "%.4f", b * s }')
  echo "   healthy all-reduce: ${healthy_s}s, busbw $busbw GB/s; floor $floor GB/s"

  echo "== N=$n: $bad capped at $RATE (tc tbf)"
  ifname=$(podman exec "$bad" ip -o -4 route show default | awk '{ print $5 }')
  podman exec "$bad" tc qdisc replace dev "$ifname" root tbf rate "$RATE" burst 256kb latency 400ms
  slow_s=$(health "$OUT/N$n-slow.log" -e "ddp_health_min_busbw_gbps=$floor") || true
  podman exec "$bad" tc qdisc del dev "$ifname" root || true
  slow_named=$(judge "$OUT/N$n-slow.log" "$bad")

  echo "== N=$n: $bad cut off from every other node (blackhole routes)"
  peers=()
  for peer in "${all[@]}"; do
    [ "$peer" = "$bad" ] || peers+=("$(address "$peer")")
  done
  for addr in "${peers[@]}"; do podman exec "$bad" ip route add blackhole "$addr/32"; done
  cut_s=$(health "$OUT/N$n-cut.log" -e ddp_health_nccl_timeout=60 -e ddp_health_join_timeout=30) || true
  for addr in "${peers[@]}"; do podman exec "$bad" ip route del blackhole "$addr/32" || true; done
  cut_named=$(judge "$OUT/N$n-cut.log" "$bad")

  rounds=$(( n % 2 ? 3 : 2 ))
  ROWS+=("$(printf '%6s %7s %9s %7s %7s  %s' "$n" "$rounds" "$healthy_s" "$slow_s" "$cut_s" "$slow_named/$cut_named")")
done

echo
echo "inventory: $INVENTORY; tbf rate $RATE; floor $FLOOR_SHARE x healthy busbw"
printf '%6s %7s %9s %7s %7s  %s\n' nodes rounds healthy_s slow_s cut_s named
printf '%s\n' "${ROWS[@]}"
# What stays behind: the last cluster (its tc and route faults removed), for REUSE=1 or a look at its nodes.
last_n="${!#}"
echo "find_bad_node.sh: left running: the local cluster of $last_n node(s) (containers ddp-node1..ddp-node$last_n," \
     "network ddp-local); make cluster-down removes it"
