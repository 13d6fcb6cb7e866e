# shellcheck shell=bash
# Checks of the benchmarks' settings, for the scripts beside this folder. Sourced, not run.

# positive_ints PROG NAME...: each variable NAME holds a whole number of at least 1, or PROG says which does not
# and the script exits with status 2.
positive_ints() {
  local prog=$1 name
  shift
  for name in "$@"; do
    [[ "${!name}" =~ ^[1-9][0-9]*$ ]] || { echo "$prog: $name is a positive integer, got '${!name}'" >&2; exit 2; }
  done
}
