#!/usr/bin/env bash
# `make test`, phase by phase, with the time each phase took (printed at the end, also when a phase fails).
#
# The static checks (lint, sanity, unit, collection-checks, docs: no containers) run first, and meanwhile
# `make prefetch` makes in the background what the container tests need and what is slow to make on a new
# machine: the node image (debootstrap + podman build) and the reference wheelhouse with its Horovod build
# (tools/reference_wheelhouse.sh). Both are cached outside the clone, keyed by their recipe and versions, so on a
# machine that has them the prefetch takes seconds. The container tests (cluster-tests, gpu-stack-test) start once
# it has finished; a prefetch that failed stops the run here with the end of its log (.cache/prefetch.log).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
prefetch_log=.cache/prefetch.log
start=$(date +%s)
times=()

report() {
  local rc=$?
  if [ -n "${prefetch_pid:-}" ]; then kill -- "-$prefetch_pid" 2>/dev/null || true; fi
  echo "make test: time per phase (s)"
  printf '  %s\n' "${times[@]}"
  printf '  %-26s %5d\n' total "$(($(date +%s) - start))"
  [ "$rc" -eq 0 ] || echo "make test: FAILED (exit $rc)"
}
trap report EXIT

phase() {
  local t
  t=$(date +%s)
  make --no-print-directory "$1"
  times+=("$(printf '%-26s %5d' "$1" "$(($(date +%s) - t))")")
}

# Its own process group (setsid), so that a failed run stops the image build or the download with it.
# shellcheck disable=SC2016  # expanded by the inner bash
setsid bash -c 'set -e; t=$(date +%s); make --no-print-directory prefetch; echo "prefetch took $(($(date +%s) - t)) s"' \
  >"$prefetch_log" 2>&1 &
prefetch_pid=$!

for p in lint sanity unit collection-checks docs; do phase "$p"; done

t=$(date +%s)
if ! wait "$prefetch_pid"; then
  prefetch_pid=
  echo "make test: make prefetch failed (the node image or the reference wheelhouse); the end of $prefetch_log:" >&2
  tail -n 60 "$prefetch_log" >&2
  exit 1
fi
prefetch_pid=
times+=("$(printf '%-26s %5d' "prefetch (waited for)" "$(($(date +%s) - t))")")
echo "make test: $(tail -n 1 "$prefetch_log") (in the background, during the static checks)"

for p in cluster-tests gpu-stack-test; do phase "$p"; done
