#!/usr/bin/env bash
# `make test`, phase by phase, with the time each phase took (printed at the end, also when a phase fails).
#
# The static checks (lint, sanity, unit, collection-checks, docs) and `make controller-tests` (the integration tests
# that need no node: the real ansible-playbook against absent nodes, the collection tarball) run first, in the
# foreground. Meanwhile, in the background: `make prefetch` makes what the container tests need and what is slow to
# make on a new machine (the node image: debootstrap + podman build; the reference wheelhouse with its Horovod build,
# tools/reference_wheelhouse.sh), cached outside the clone, keyed by their recipe and versions (seconds when cached);
# then `make gpu-stack-test`, the gpu_stack Molecule scenario (one node and its package server, nothing the static
# checks use), then `make cluster-up` (the local Molecule scenario's destroy, syntax, create and converge). The
# foreground and the background each mostly keep one of the two cores busy, so side by side they take about the
# time of the longer; controller-tests is in the foreground because that balances the two (measured: foreground
# about 390 s without it, background about 590 s with it).
# cluster-tests (MOLECULE_CONVERGED=1: idempotence, side effect, verify, then the cluster tests) starts once both
# are done: its timed checks (throughput floors, timeouts) run alone.
# A background part that failed stops the run here (.cache/prefetch.log: its end is printed; the logs of
# gpu-stack-test and cluster-up, .cache/gpu-stack.log and .cache/cluster-up.log, are printed whole).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
prefetch_log=.cache/prefetch.log
gpu_log=.cache/gpu-stack.log
cluster_log=.cache/cluster-up.log
background_times=.cache/background.times
start=$(date +%s)
times=()

report() {
  local rc=$?
  if [ -n "${background_pid:-}" ]; then
    # A phase failed while the background ran: stop it, and remove the gpu_stack node should it have started.
    kill -- "-$background_pid" 2>/dev/null || true
    wait "$background_pid" 2>/dev/null || true
    MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s gpu_stack >>"$gpu_log" 2>&1 || true
    if [ -s "$cluster_log" ]; then
      MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s local >>"$cluster_log" 2>&1 || true
    fi
  fi
  echo "make test: time per phase (s)"
  printf '  %s\n' "${times[@]}"
  printf '  %-30s %5d\n' total "$(($(date +%s) - start))"
  [ "$rc" -eq 0 ] || echo "make test: FAILED (exit $rc)"
}
trap report EXIT

phase() {
  local t
  t=$(date +%s)
  make --no-print-directory "$1"
  times+=("$(printf '%-30s %5d' "$1" "$(($(date +%s) - t))")")
}

: >"$prefetch_log"
: >"$gpu_log"
: >"$cluster_log"
: >"$background_times"
# Its own process group (setsid), so that a failed run stops the image build, the download or the scenario with it.
# shellcheck disable=SC2016  # expanded by the inner bash
setsid bash -c '
  set -e
  t=$(date +%s); make --no-print-directory prefetch >"$1" 2>&1
  printf "%-30s %5d\n" "prefetch (background)" "$(($(date +%s) - t))" >>"$3"
  t=$(date +%s); make --no-print-directory gpu-stack-test >"$2" 2>&1
  printf "%-30s %5d\n" "gpu-stack-test (background)" "$(($(date +%s) - t))" >>"$3"
  t=$(date +%s); make --no-print-directory cluster-up >"$4" 2>&1
  printf "%-30s %5d\n" "cluster-up (background)" "$(($(date +%s) - t))" >>"$3"' \
  background "$prefetch_log" "$gpu_log" "$background_times" "$cluster_log" &
background_pid=$!

for p in lint sanity unit collection-checks docs controller-tests; do phase "$p"; done

t=$(date +%s)
background_rc=0
wait "$background_pid" || background_rc=$?
background_pid=
times+=("$(printf '%-30s %5d' "background (waited for)" "$(($(date +%s) - t))")")
while IFS= read -r line; do times+=("$line"); done <"$background_times"
for part in gpu-stack-test:"$gpu_log" cluster-up:"$cluster_log"; do
  if [ -s "${part#*:}" ]; then
    echo "make test: make ${part%%:*} (in the background, during the static checks):"
    cat "${part#*:}"
  fi
done
if [ "$background_rc" -ne 0 ]; then
  if [ -s "$cluster_log" ]; then
    echo "make test: make cluster-up failed (its output is above, also in $cluster_log)" >&2
    MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s local >>"$cluster_log" 2>&1 || true
  elif [ -s "$gpu_log" ]; then
    echo "make test: make gpu-stack-test failed (its log is above, also in $gpu_log)" >&2
  else
    echo "make test: make prefetch failed (the node image or the reference wheelhouse); the end of $prefetch_log:" >&2
    tail -n 60 "$prefetch_log" >&2
  fi
  exit 1
fi

export MOLECULE_CONVERGED=1
phase cluster-tests
