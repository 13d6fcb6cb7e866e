# shellcheck shell=bash
# The CPU a cgroup has used, for the benchmarks that count what the nodes (podman containers, each in a cgroup of its
# own) and the controller spend: converge.sh, module_floor.sh, allreduce_launch.sh. Sourced, not run.
#
# A cgroup's counter is a file: cpuacct.usage (nanoseconds) under the cpuacct hierarchy on cgroup v1, cpu.stat
# (its usage_usec line, microseconds) on v2, as the kernel documents them (Documentation/admin-guide/cgroup-v1/
# cpuacct.rst, cgroup-v2.rst). Reading another container's cgroup needs root.

# cgroup_counter PATH: PATH is a cgroup below the hierarchy's root, as podman's {{.State.CgroupPath}} gives it;
# prints its counter file, or fails (status 1, nothing printed) when neither is readable.
cgroup_counter() {
  if [ -r "/sys/fs/cgroup/cpuacct$1/cpuacct.usage" ]; then
    echo "/sys/fs/cgroup/cpuacct$1/cpuacct.usage"
  elif [ -r "/sys/fs/cgroup$1/cpu.stat" ]; then
    echo "/sys/fs/cgroup$1/cpu.stat"
  else
    return 1
  fi
}

# container_counter NAME: the counter file of container NAME's cgroup; fails when there is no such container or
# its counter cannot be read.
container_counter() {
  local cg
  cg=$(podman inspect --format '{{.State.CgroupPath}}' "$1" 2>/dev/null) || return 1
  cgroup_counter "$cg"
}

# counter_ns FILE...: the CPU nanoseconds the counter files hold, summed (0 for none).
counter_ns() {
  local c total=0
  for c in "$@"; do
    case "$c" in
      */cpu.stat) total=$((total + $(awk '$1 == "usage_usec" { print $2 * 1000 }' "$c"))) ;;
      *) total=$((total + $(cat "$c"))) ;;
    esac
  done
  echo "$total"
}
