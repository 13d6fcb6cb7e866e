#!/usr/bin/env bash
# `make test`, phase by phase, with the time each phase took (printed at the end, also when a phase fails).
#
# Three parts; in each, two streams side by side, each mostly keeping one of the two cores busy:
# 1. The foreground runs the static checks that fail most often (lint, sanity, unit). Meanwhile, in the background:
#    `make prefetch` makes what the container tests need and what is slow to make on a new machine (the node image:
#    debootstrap + podman build; the reference wheelhouse with its Horovod build, tools/reference_wheelhouse.sh),
#    cached outside the clone, keyed by their recipe and versions (seconds when cached); then `make cluster-up` (the
#    local Molecule scenario's destroy, syntax, create and converge) and `make cluster-check` (its idempotence, side
#    effect and verify), the longer of the two streams.
# 2. The cluster tests except LATE_TESTS (Makefile) run alone: their timed checks (throughput floors, timeouts) get
#    the machine to themselves.
# 3. LATE_TESTS (the node-loss tests, which mostly wait on Slurm's timers; the day-2 tests, which mostly wait on one
#    ansible-playbook; the machine about 60 % idle during them), with the checks that need no Molecule node beside
#    them in the background, one after the other: `make gpu-stack-test` (the gpu_stack Molecule scenario: a node of
#    its own and its package server, on a network of its own), collection-checks, docs, controller-tests (the
#    integration tests that need no node: the real ansible-playbook against absent nodes, the collection tarball) and
#    ansible-versions (sanity and the unit tests on the oldest ansible-core the collection claims and the newest).
#    Each of these runs even when one before it failed; their output is printed once they are done. Then the
#    Molecule nodes are destroyed.
# A failed phase of the foreground stops the run (its background stopped, the Molecule nodes destroyed); a failed
# part of a background stream stops the run once the foreground is done. The background's logs are printed (.cache/:
# prefetch.log its end; cluster-up.log, and the late checks' logs, whole).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
prefetch_log=.cache/prefetch.log
gpu_log=.cache/late-gpu-stack-test.log
cluster_log=.cache/cluster-up.log
background_times=.cache/background.times
start=$(date +%s)
times=()
background_pid=
cluster_made=

destroy_cluster() {
  MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s local >>"$cluster_log" 2>&1 || true
}

report() {
  local rc=$?
  if [ -n "$background_pid" ]; then
    # A phase failed while a background stream ran: stop it, and remove the gpu_stack node should it have started.
    kill -- "-$background_pid" 2>/dev/null || true
    wait "$background_pid" 2>/dev/null || true
    if [ -s "$gpu_log" ]; then
      MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s gpu_stack >>"$gpu_log" 2>&1 || true
    fi
  fi
  # The Molecule nodes, until the last cluster-tests has destroyed them (also when a phase failed before).
  if [ -n "$cluster_made" ]; then destroy_cluster; fi
  echo "make test: time per phase (s)"
  printf '  %s\n' "${times[@]}"
  printf '  %-30s %5d\n' total "$(($(date +%s) - start))"
  [ "$rc" -eq 0 ] || echo "make test: FAILED (exit $rc)"
}
trap report EXIT

phase() {
  local t rc=0
  t=$(date +%s)
  make --no-print-directory "$1" || rc=$?
  times+=("$(printf '%-30s %5d' "$1" "$(($(date +%s) - t))")")
  return "$rc"
}

# Waits for the background stream; prints the logs named in "$@" (what it wrote), and stops make test when it failed.
wait_background() {
  local t rc=0 log
  t=$(date +%s)
  wait "$background_pid" || rc=$?
  background_pid=
  times+=("$(printf '%-30s %5d' "background (waited for)" "$(($(date +%s) - t))")")
  while IFS= read -r line; do times+=("$line"); done <"$background_times"
  : >"$background_times"
  for log in "$@"; do
    if [ -s "$log" ]; then
      echo "make test: the background's log $log:"
      cat "$log"
    fi
  done
  if [ "$rc" -ne 0 ]; then
    echo "make test: a phase in the background failed (its log is above; .cache/background.times lists those that ended)" >&2
    if [ ! -s "$cluster_log" ] && [ -s "$prefetch_log" ]; then
      echo "make test: make prefetch failed (the node image or the reference wheelhouse); the end of $prefetch_log:" >&2
      tail -n 60 "$prefetch_log" >&2
    fi
    exit 1
  fi
}

: >"$prefetch_log"
rm -f .cache/late-*.log
: >"$cluster_log"
: >"$background_times"
cluster_made=1
# Its own process group (setsid), so that a failed run stops the image build, the download or the scenario with it.
# shellcheck disable=SC2016  # expanded by the inner bash
setsid bash -c '
  set -e
  t=$(date +%s); make --no-print-directory prefetch >"$1" 2>&1
  printf "%-30s %5d\n" "prefetch (background)" "$(($(date +%s) - t))" >>"$2"
  t=$(date +%s); make --no-print-directory cluster-up >"$3" 2>&1
  printf "%-30s %5d\n" "cluster-up (background)" "$(($(date +%s) - t))" >>"$2"
  t=$(date +%s); make --no-print-directory cluster-check >>"$3" 2>&1
  printf "%-30s %5d\n" "cluster-check (background)" "$(($(date +%s) - t))" >>"$2"' \
  background "$prefetch_log" "$background_times" "$cluster_log" &
background_pid=$!

for p in lint sanity unit; do phase "$p"; done
wait_background "$cluster_log"

export MOLECULE_CONVERGED=1 MOLECULE_CHECKED=1
# A failed part still lets the next run (as one pytest session would have) and fails make test at the end.
alone_rc=0
phase cluster-tests-alone || alone_rc=$?

# shellcheck disable=SC2016  # expanded by the inner bash
setsid bash -c '
  rc=0
  for p in gpu-stack-test collection-checks docs controller-tests ansible-versions; do
    t=$(date +%s); make --no-print-directory "$p" >".cache/late-$p.log" 2>&1 || { rc=1; echo "$p: FAILED" >>".cache/late-$p.log"; }
    printf "%-30s %5d\n" "$p (background)" "$(($(date +%s) - t))" >>"$1"
  done
  exit "$rc"' \
  background "$background_times" &
background_pid=$!
late_rc=0
phase cluster-tests-late || late_rc=$?
cluster_made=
wait_background .cache/late-{gpu-stack-test,collection-checks,docs,controller-tests,ansible-versions}.log
failed=0
for part in alone:$alone_rc late:$late_rc; do
  if [ "${part#*:}" -ne 0 ]; then
    echo "make test: make cluster-tests-${part%%:*} failed (its output is above)" >&2
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then exit 1; fi
