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
# part of a background stream stops the run once the foreground is done. The background's logs (.cache/bg-*.log)
# are printed once it is done.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
background_times=.cache/background.times
start=$(date +%s)
times=()
background_pid=
background_targets=()
cluster_made=

report() {
  local rc=$?
  if [ -n "$background_pid" ]; then
    # A phase failed while a background stream ran: stop it, and remove the gpu_stack node should it have started.
    kill -- "-$background_pid" 2>/dev/null || true
    wait "$background_pid" 2>/dev/null || true
    if [ -e .cache/bg-gpu-stack-test.log ]; then
      MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s gpu_stack \
        >>.cache/bg-gpu-stack-test.log 2>&1 || true
    fi
  fi
  # The Molecule nodes, until the last cluster-tests has destroyed them (also when a phase failed before).
  if [ -n "$cluster_made" ]; then
    MOLECULE_PROJECT_DIRECTORY=$PWD "${VENV:-.venv}/bin/molecule" destroy -s local >>.cache/cluster-destroy.log 2>&1 || true
  fi
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

# Starts the make targets MODE TARGET... one after the other in the background, in a process group of their own
# (setsid: a failed run stops the image build, the download or the scenario with them). MODE stop: a failed target
# ends the stream (those after it need it); MODE all: every target runs. Each target's output goes to
# .cache/bg-TARGET.log, ending with "make TARGET: FAILED" when it failed; its time to $background_times.
background() {
  local mode=$1
  shift
  background_targets=("$@")
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid bash -c '
    mode=$1 times=$2 rc=0
    shift 2
    for p in "$@"; do
      t=$(date +%s)
      make --no-print-directory "$p" >".cache/bg-$p.log" 2>&1 || { rc=1; echo "make $p: FAILED" >>".cache/bg-$p.log"; }
      printf "%-30s %5d\n" "$p (background)" "$(($(date +%s) - t))" >>"$times"
      if [ "$rc" -ne 0 ] && [ "$mode" = stop ]; then break; fi
    done
    exit "$rc"' background "$mode" "$background_times" "$@" &
  background_pid=$!
}

# Waits for the background stream and prints its targets' logs (the last 200 lines of a longer one: a new machine's
# image build and Horovod build); stops make test when a target failed, naming it.
wait_background() {
  local t rc=0 p log
  t=$(date +%s)
  wait "$background_pid" || rc=$?
  background_pid=
  times+=("$(printf '%-30s %5d' "background (waited for)" "$(($(date +%s) - t))")")
  while IFS= read -r line; do times+=("$line"); done <"$background_times"
  : >"$background_times"
  for p in "${background_targets[@]}"; do
    log=.cache/bg-$p.log
    [ -s "$log" ] || continue
    if [ "$(wc -l <"$log")" -gt 400 ]; then
      echo "make test: make $p (in the background), the last 200 lines of $log:"
      tail -n 200 "$log"
    else
      echo "make test: make $p (in the background), $log:"
      cat "$log"
    fi
  done
  if [ "$rc" -ne 0 ]; then
    for p in "${background_targets[@]}"; do
      log=.cache/bg-$p.log
      if [ -s "$log" ] && [ "$(tail -n 1 "$log")" = "make $p: FAILED" ]; then
        echo "make test: make $p failed in the background (its log is above, whole in $log)" >&2
      fi
    done
    exit 1
  fi
}

rm -f .cache/bg-*.log .cache/cluster-destroy.log
: >"$background_times"
cluster_made=1
background stop prefetch cluster-up cluster-check
for p in lint sanity unit; do phase "$p"; done
wait_background

export MOLECULE_CONVERGED=1 MOLECULE_CHECKED=1
# A failed part still lets the next run (as one pytest session would have) and fails make test at the end.
alone_rc=0
phase cluster-tests-alone || alone_rc=$?

background all gpu-stack-test collection-checks docs controller-tests ansible-versions
late_rc=0
phase cluster-tests-late || late_rc=$?
cluster_made=
wait_background
failed=0
for part in alone:$alone_rc late:$late_rc; do
  if [ "${part#*:}" -ne 0 ]; then
    echo "make test: make cluster-tests-${part%%:*} failed (its output is above)" >&2
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then exit 1; fi
