#!/usr/bin/env bash
# The Slurm job of benchmarks/slurm_step_overlap.sh (submitted with sbatch -N N --ntasks-per-node=1):
#
#   step_overlap_job.sh TRIALS [SRUN OPTION...]
#
# Each trial starts one step over every node of the allocation with the SRUN OPTIONs given (none: a plain step, as
# ddp-torchrun.sbatch's shared-storage check was; "--overlap --mem=1M": as it is now), then at once one step per
# node, as ddp-torchrun.sbatch starts its training steps. Per trial it prints one line:
#   trial T: refused R of N, all started in MS ms
# R counts the per-node steps whose creation Slurm refused at first ("step creation temporarily disabled ...
# Requested nodes are busy", which srun prints once per step before it retries); MS is the time from the first
# step's end until every per-node step has run.
set -euo pipefail
trials=$1
shift
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
n=${#nodes[@]}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for trial in $(seq 1 "$trials"); do
  srun "$@" --nodes="$n" --ntasks="$n" --ntasks-per-node=1 --kill-on-bad-exit=0 true
  start=$(date +%s%N)
  for node in "${nodes[@]}"; do
    srun --nodes=1 --ntasks=1 --nodelist="$node" --no-kill --kill-on-bad-exit=0 true 2> "$work/$node.err" &
  done
  wait
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  refused=$(cat "$work"/*.err | grep -c 'step creation temporarily disabled' || true)
  echo "trial $trial: refused $refused of $n, all started in $took ms"
done
