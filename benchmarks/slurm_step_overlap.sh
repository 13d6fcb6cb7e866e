#!/usr/bin/env bash
# Whether the steps ddp-torchrun.sbatch starts on every node are refused at first because of the step before them.
#
#   benchmarks/slurm_step_overlap.sh [LABEL]          (LABEL default: local, the cluster of make cluster)
#   ROUNDS=3 TRIALS=4 benchmarks/slurm_step_overlap.sh ddp-cv
#
# Needs a converged local cluster with Slurm (site.yml ran): the nodes are the running containers with the podman
# label ddp.cluster=LABEL, in name order; the first one is Slurm's controller and submits the jobs, as the cluster
# user (USER_NAME, default ddp), over every node. Each round runs two jobs of benchmarks/lib/step_overlap_job.sh,
# alternated: "plain" (the first step over every node as ddp-torchrun.sbatch's shared-storage check ran it before,
# a plain srun) and "overlap" (that step with --overlap --mem=1M, as it runs now). Slurm frees a step's resources
# on a node once that node has reported the step's end; a step asked for before then is refused and srun retries it
# later (after a wait of its own, which reached two minutes in a 12-node benchmark run). Prints each trial's line
# (steps refused of the nodes, milliseconds until every node's step ran) and, per variant, the refusals in all.
set -euo pipefail

LABEL="${1:-local}"
ROUNDS="${ROUNDS:-2}"
TRIALS="${TRIALS:-4}"
USER_NAME="${USER_NAME:-ddp}"
# shellcheck source=benchmarks/lib/args.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/args.sh"
positive_ints slurm_step_overlap.sh ROUNDS TRIALS
[[ "$USER_NAME" =~ ^[a-z_][a-z0-9_-]*$ ]] || { echo "slurm_step_overlap.sh: USER_NAME is a user name, got '$USER_NAME'" >&2; exit 2; }

mapfile -t nodes < <(podman ps --filter "label=ddp.cluster=$LABEL" --format '{{.Names}}' | sort -V)
[ "${#nodes[@]}" -ge 2 ] ||
  { echo "slurm_step_overlap.sh: needs 2 or more running nodes labelled ddp.cluster=$LABEL, found ${#nodes[@]}" >&2; exit 2; }
head=${nodes[0]}
job="$(dirname "$0")/lib/step_overlap_job.sh"
# The job file goes into a folder the cluster user makes in the head's /tmp, written as that user (root follows no
# path there).
dir=$(podman exec -u "$USER_NAME" "$head" mktemp -d)
trap 'podman exec -u "$USER_NAME" "$head" rm -rf "$dir"' EXIT
podman exec -i -u "$USER_NAME" "$head" sh -c 'cat > "$1" && chmod 700 "$1"' sh "$dir/job.sh" < "$job"

declare -A total=()
for round in $(seq 1 "$ROUNDS"); do
  for variant in plain overlap; do
    options=()
    [ "$variant" = plain ] || options=(--overlap --mem=1M)
    out="$dir/$variant-$round.out"
    podman exec -u "$USER_NAME" -w "$dir" "$head" \
      sbatch --wait --quiet --nodes="${#nodes[@]}" --ntasks-per-node=1 --output="$out" "$dir/job.sh" "$TRIALS" \
      "${options[@]}" ||
      { echo "slurm_step_overlap.sh: the $variant job failed; its output:" >&2
        podman exec -u "$USER_NAME" "$head" cat "$out" >&2 || true; exit 1; }
    lines=$(podman exec -u "$USER_NAME" "$head" grep '^trial ' "$out")
    while read -r line; do echo "round $round, $variant: $line"; done <<< "$lines"
    refused=$(awk '{ sum += $4 } END { print sum + 0 }' <<< "$lines")
    total[$variant]=$(( ${total[$variant]:-0} + refused ))
  done
done
steps=$(( ROUNDS * TRIALS * ${#nodes[@]} ))
echo "per-node steps refused at first, of $steps each: plain ${total[plain]}, overlap ${total[overlap]}"
