#!/usr/bin/env bash
# The nodes' CPU of the health all-reduce under torchrun, against the same all-reduce with one process per node
# started without torchrun's agent (what the agent costs each node).
#
#   benchmarks/allreduce_launch.sh [LABEL]        (LABEL default: local, the cluster of make cluster)
#   ROUNDS=3 benchmarks/allreduce_launch.sh ddp-cv     the cluster of PREFIX=ddp-cv benchmarks/converge.sh
#
# Needs a converged local cluster (site.yml ran): the nodes are the running containers with the podman label
# ddp.cluster=LABEL, in name order; the first one is the rendezvous host. On every node at once, as the cluster
# user (USER_NAME, default ddp), in the training environment (ENV_PATH, default /opt/ddp/venv), the health stage's
# all-reduce script (<ENV_PATH>/share/ddp-cluster/ddp_nccl_allreduce.py, Gloo, the module's default sizes 1, 4
# and 16 MiB, 20 timed and 5 warm-up calls each) runs:
#   torchrun: <ENV_PATH>/bin/torchrun --nnodes N --nproc-per-node 1 --rdzv-backend c10d, as ddp.cluster.nccl_health
#             starts it (the agent imports torch, then starts the worker, which imports it again);
#   direct:   <ENV_PATH>/bin/python with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (env:// rendezvous).
# Both use the rendezvous port (PORT, default 29400, ddp_rdzv_port), which the firewall role opens between the
# nodes. The rounds alternate the two. Per round and launch: the nodes' CPU (their cgroups: cpuacct.usage on cgroup
# v1, cpu.stat on v2) per node, and the exit status (every node must end with 0).
set -euo pipefail

LABEL="${1:-local}"
ROUNDS="${ROUNDS:-2}"
PORT="${PORT:-29400}"
USER_NAME="${USER_NAME:-ddp}"
ENV_PATH="${ENV_PATH:-/opt/ddp/venv}"
# shellcheck source=benchmarks/lib/args.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/args.sh"
positive_ints allreduce_launch.sh ROUNDS
[[ "$PORT" =~ ^[1-9][0-9]*$ ]] || { echo "allreduce_launch.sh: PORT is a port number, got '$PORT'" >&2; exit 2; }

mapfile -t nodes < <(podman ps --filter "label=ddp.cluster=$LABEL" --format '{{.Names}}' | sort)
[ "${#nodes[@]}" -ge 2 ] ||
  { echo "allreduce_launch.sh: needs 2 or more running nodes labelled ddp.cluster=$LABEL, found ${#nodes[@]}" >&2; exit 2; }
head_addr=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "${nodes[0]}" |
            awk '{ print $1 }')
script="$ENV_PATH/share/ddp-cluster/ddp_nccl_allreduce.py"
# --output: a file of the cluster user's own in the node's /tmp (the script runs as that user, never as root)
args=(--sizes "1048576,4194304,16777216" --iters 20 --warmup 5 --backend gloo --timeout 120
      --output "/tmp/ddp-allreduce-launch-$$.json")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# shellcheck source=benchmarks/lib/cgroup_cpu.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cgroup_cpu.sh"
counters=()
for n in "${nodes[@]}"; do
  counters+=("$(container_counter "$n")") ||
    { echo "allreduce_launch.sh: cannot read $n's CPU counter under /sys/fs/cgroup (needs root)" >&2; exit 2; }
done
nodes_ns() { counter_ns "${counters[@]}"; }

run() {  # launch round -> "CPU-ms per node" on stdout; fails unless every node's run exits 0
  local launch=$1 round=$2 rank=0 n pids=() rc=0 before after
  before=$(nodes_ns)
  for n in "${nodes[@]}"; do
    if [ "$launch" = torchrun ]; then
      podman exec -u "$USER_NAME" -w /tmp "$n" "$ENV_PATH/bin/torchrun" --nnodes "${#nodes[@]}" --nproc-per-node 1 \
        --rdzv-backend c10d --rdzv-endpoint "$head_addr:$PORT" --rdzv-id "allreduce-launch-$$-$round" \
        --max-restarts 0 "$script" "${args[@]}" >"$out/$n.log" 2>&1 &
    else
      podman exec -u "$USER_NAME" -w /tmp -e RANK="$rank" -e WORLD_SIZE="${#nodes[@]}" -e LOCAL_RANK=0 \
        -e LOCAL_WORLD_SIZE=1 -e MASTER_ADDR="$head_addr" -e MASTER_PORT="$PORT" "$n" \
        "$ENV_PATH/bin/python" "$script" "${args[@]}" >"$out/$n.log" 2>&1 &
    fi
    pids+=($!)
    rank=$((rank + 1))
  done
  for n in "${pids[@]}"; do wait "$n" || rc=1; done
  after=$(nodes_ns)
  if [ "$rc" -ne 0 ]; then
    for n in "${nodes[@]}"; do echo "== $n ($launch)" >&2; tail -n 15 "$out/$n.log" >&2; done
    return 1
  fi
  awk -v a="$before" -v b="$after" -v k="${#nodes[@]}" 'BEGIN { printf "%.0f", (b - a) / k / 1e6 }'
}

declare -A MS
for round in $(seq "$ROUNDS"); do
  for launch in torchrun direct; do
    MS[$launch]="${MS[$launch]:-} $(run "$launch" "$round")"
  done
done
echo "nodes: ${nodes[*]} (rendezvous $head_addr:$PORT)"
printf '%-9s %s\n' launch "node CPU-ms per node (one figure per round)"
for launch in torchrun direct; do printf '%-9s %s\n' "$launch" "${MS[$launch]# }"; done
for n in "${nodes[@]}"; do podman exec -u "$USER_NAME" "$n" rm -f "/tmp/ddp-allreduce-launch-$$.json"; done
