#!/usr/bin/env bash
# Converge cost against the node count, on the local podman cluster.
#
#   benchmarks/converge.sh [N ...]          (default: 3)
#   INVENTORY=inventory/local-podman benchmarks/converge.sh 3     the same nodes over podman exec, not SSH
#   MITOGEN=0.3.54 benchmarks/converge.sh 3       also a no-change run under mitogen's strategy (mitogen_linear)
#   PREFIX=ddp-cv benchmarks/converge.sh 3        a cluster of its own: nodes ddp-cv1..N, network and label ddp-cv
#   FORKS=50 CONTROLLER_CORES=16 benchmarks/converge.sh 3     the controller the extrapolation is made for
#   CALLBACKS=ddp.cluster.plugin_preload REUSE=1 PREFIX=ddp-cv benchmarks/converge.sh 3    other callbacks than
#                                                 ansible.cfg's (A/B of one of them, alternated with the default)
#   REUSE=1 PREFIX=ddp-cv benchmarks/converge.sh 3     no rebuild, no cold run: the no-change run alone, on the N
#                                                 nodes already converged (A/B runs of one change, alternated)
#
# For each N: rebuild the local cluster with N nodes (not timed), run site.yml cold (benchmark included),
# then run it again without the benchmark (--skip-tags benchmark: it measures, so it writes new results
# every time; the health checks still run) and require changed=0 and failed=0 on every node. Prints, per N: cold
# seconds, no-change seconds, their ratio, the node-to-node checks (health's port probe and the
# SSH check) and the slowest tasks of the no-change run; then a table with, for the no-change run, the CPU
# seconds the nodes used and the controller used, in all and per node, and no-change(last N) /
# no-change(first N) in wall time and in controller CPU; then the controller's time of a no-change run on 100
# and 1000 nodes, extrapolated from the last N's controller CPU-seconds per node (see extrapolate below).
# Timings come from one sitting on one machine: compare them as ratios, not across machines.
# The controller's CPU is that of ansible-playbook and everything it starts (workers, ssh and its ControlPersist
# masters), counted in a cgroup of its own (cpuacct on cgroup v1, cpu.stat on v2; needs root); where no cgroup
# can be made, it is this machine's busy time less the nodes' (then run nothing else meanwhile).
# With MITOGEN=<version>, a third run follows: the same no-change run under mitogen_linear (mitogen from PyPI,
# installed once into ~/.cache/ddp-cluster/mitogen-<version>, outside the venv), also required to end with
# changed=0 and failed=0, printed beside the plain one. Not adopted by the collection: see the README.
# PREFIX (default: the local cluster of make cluster, ddp-node1..N on network ddp-local, label local): the nodes,
# network and label of the cluster that is rebuilt, and an inventory for it written to .cache/inv-<PREFIX>/ (a
# copy of INVENTORY that selects that label and uses that cluster's ssh_config); the cluster is left running.
# Logs: artifacts/converge/[<PREFIX>-]N<n>-{cold,nochange,mitogen}.log, and the no-change run's CPU per task on the
# nodes in N<n>-nochange.node_cpu.json (benchmarks/callback_plugins/node_cpu.py). Needs `make venv` (the make target does it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-.venv}/bin"
INVENTORY="${INVENTORY:-inventory/local}"   # inventory/local: SSH (the default); inventory/local-podman: podman exec
OUT="$ROOT/artifacts/converge"
mkdir -p "$OUT"
[ "$#" -gt 0 ] || set -- 3
for n in "$@"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "converge.sh: node counts are positive integers, got '$n'" >&2; exit 2; }
done
FORKS="${FORKS:-$(awk -F' *= *' '$1 == "forks" { print $2 }' ansible.cfg)}"
CONTROLLER_CORES="${CONTROLLER_CORES:-$FORKS}"
# shellcheck source=benchmarks/lib/args.sh
. "$ROOT/benchmarks/lib/args.sh"
positive_ints converge.sh FORKS CONTROLLER_CORES

PREFIX="${PREFIX:-}"
CLUSTER_ARGS=()
LABEL=local
LOG="$OUT/"
if [ -n "$PREFIX" ]; then
  [[ "$PREFIX" =~ ^[a-z][a-z0-9-]*$ ]] || { echo "converge.sh: PREFIX is a name like ddp-cv, got '$PREFIX'" >&2; exit 2; }
  CLUSTER_ARGS=(-e "local_cluster_name_prefix=$PREFIX" -e "local_cluster_network=$PREFIX" -e "local_cluster_label=$PREFIX")
  LABEL="$PREFIX"
  LOG="$OUT/$PREFIX-"
  # INVENTORY's copy, two folders deep like inventory/local (its group_vars find the clone from there), with
  # this cluster's label and ssh_config (roles/local_cluster writes it under .cache/local_cluster/ssh/<network>/).
  inv=".cache/inv-$PREFIX"
  rm -rf "$inv"
  mkdir -p "$inv"
  cp -r "$INVENTORY"/. "$inv"/
  grep -rlE 'ddp\.cluster: local$|ssh/ddp-local/' "$inv" | xargs -r sed -i -E \
    -e "s/(ddp\.cluster:) local\$/\1 $PREFIX/" -e "s#ssh/ddp-local/#ssh/$PREFIX/#"
  grep -rq "ddp.cluster: $PREFIX" "$inv" || { echo "converge.sh: no label selector found in $INVENTORY" >&2; exit 2; }
  INVENTORY="$inv"
fi

MITOGEN="${MITOGEN:-}"
MITOGEN_STRATEGY=""
if [ -n "$MITOGEN" ]; then
  [[ "$MITOGEN" =~ ^[0-9]+(\.[0-9]+)*$ ]] || { echo "converge.sh: MITOGEN is a mitogen version (e.g. 0.3.54), got '$MITOGEN'" >&2; exit 2; }
  mitogen_dir="${XDG_CACHE_HOME:-$HOME/.cache}/ddp-cluster/mitogen-$MITOGEN"
  if [ ! -d "$mitogen_dir/ansible_mitogen" ]; then
    rm -rf "$mitogen_dir.tmp"
    "$BIN/python" -m pip install -q --no-deps --target "$mitogen_dir.tmp" "mitogen==$MITOGEN"
    mv "$mitogen_dir.tmp" "$mitogen_dir"
  fi
  MITOGEN_STRATEGY="$mitogen_dir/ansible_mitogen/plugins/strategy"
fi

# CALLBACKS: the callbacks of both runs besides timer and profile_tasks (default: those ansible.cfg enables, read from
# its callbacks_enabled line); A/B runs of one of them: REUSE=1 CALLBACKS=ddp.cluster.plugin_preload
# benchmarks/converge.sh 3, alternated with the default.
cfg_callbacks=$(sed -n 's/^callbacks_enabled *= *//p' ansible.cfg | tr -d ' ' | tr ',' '\n' | { grep -vx 'ansible.builtin.timer' || true; } | paste -sd, -)
CALLBACKS="${CALLBACKS-$cfg_callbacks}"
[[ "$CALLBACKS" =~ ^[A-Za-z0-9_.,]*$ ]] || { echo "converge.sh: CALLBACKS is callback names separated by commas, got '$CALLBACKS'" >&2; exit 2; }
export ANSIBLE_CALLBACKS_ENABLED=ansible.builtin.timer,ansible.posix.profile_tasks${CALLBACKS:+,$CALLBACKS}
export PROFILE_TASKS_TASK_OUTPUT_LIMIT=all PROFILE_TASKS_SORT_ORDER=descending
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1

# seconds of one task in a profile_tasks summary ("Name ---- 12.34s"), summed over same-named tasks
task_s() {
  awk -v name="$2" 'index($0, name " -") == 1 { gsub(/s$/, "", $NF); s += $NF } END { printf "%.1f", s + 0 }' "$1"
}

# The controller's own cgroup: ansible-playbook is started in it, so its workers, ssh and the ssh ControlPersist
# masters (which leave ansible's process tree) are counted, and nothing else that runs on this machine.
# Its counter is read as the nodes' are (benchmarks/lib/cgroup_cpu.sh).
# shellcheck source=benchmarks/lib/cgroup_cpu.sh
. "$ROOT/benchmarks/lib/cgroup_cpu.sh"
CTL_CGROUP=""
CTL_COUNTER=""
if [ -w /sys/fs/cgroup/cpuacct ] && [ -e /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
  CTL_CGROUP=/sys/fs/cgroup/cpuacct/ddp-converge-$$
  CTL_COUNTER=$CTL_CGROUP/cpuacct.usage
elif [ -w /sys/fs/cgroup ] && [ -e /sys/fs/cgroup/cgroup.controllers ]; then
  CTL_CGROUP=/sys/fs/cgroup/ddp-converge-$$
  CTL_COUNTER=$CTL_CGROUP/cpu.stat
fi
if [ -n "$CTL_CGROUP" ] && ! mkdir "$CTL_CGROUP" 2>/dev/null; then
  CTL_CGROUP=""
fi
remove_ctl_cgroup() {  # what still runs there (a ControlPersist master) goes back to the root cgroup first
  local pid
  [ -n "$CTL_CGROUP" ] && [ -d "$CTL_CGROUP" ] || return 0
  while read -r pid; do echo "$pid" >"$(dirname "$CTL_CGROUP")/cgroup.procs" 2>/dev/null || true; done \
    <"$CTL_CGROUP/cgroup.procs"
  rmdir "$CTL_CGROUP" 2>/dev/null || true
}
trap remove_ctl_cgroup EXIT

run_site() {  # log [ansible-playbook args] -> prints seconds, fails unless every node ends with failed=0 unreachable=0
  # Also writes <log>.main_cpu: the CPU seconds of ansible-playbook's main process alone (the strategy: it
  # queues every task for every host and reads every result, one core at most), read once a second from
  # /proc/<pid>/stat (its own utime + stime, not its workers'), the last reading before it ended.
  local log="$1" start end pid rc=0 tck main=0 stat
  shift
  tck=$(getconf CLK_TCK)
  start=$(date +%s.%N)
  # shellcheck disable=SC2016  # expanded by the inner bash
  bash -c '[ -z "$0" ] || echo "$$" >"$0/cgroup.procs"; exec "${@}"' "$CTL_CGROUP" \
    "$BIN/ansible-playbook" -i "$INVENTORY" site.yml "$@" >"$log" 2>&1 &
  pid=$!
  while stat=$(cat "/proc/$pid/stat" 2>/dev/null); do
    main=$(printf '%s\n' "${stat##*) }" | awk -v tck="$tck" '{ printf "%.1f", ($12 + $13) / tck }')
    sleep 1
  done
  wait "$pid" || rc=$?
  end=$(date +%s.%N)
  echo "$main" >"$log.main_cpu"
  if [ "$rc" -ne 0 ]; then
    echo "converge.sh: site.yml failed, see $log" >&2
    tail -40 "$log" >&2
    return 1
  fi
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }'
}

node_cgroups() {  # host=counter file,... of the cluster's nodes (benchmarks/callback_plugins/node_cpu.py reads it)
  local name counter spec=""
  for name in $(podman ps --filter "label=ddp.cluster=$LABEL" --format '{{.Names}}'); do
    counter=$(container_counter "$name") && spec="$spec${spec:+,}$name=$counter"
  done
  echo "$spec"
}

# CPU seconds so far, as "controller nodes": the controller's cgroup (above) and the cluster's nodes' (their
# cgroups). Both read cpuacct.usage on cgroup v1, cpu.stat usage_usec on v2. Every node shares this machine's
# cores, so a run's node CPU adds up here where real nodes would spend it in parallel. Without a cgroup of its
# own, the controller's is the host's busy time (/proc/stat: user, nice, system, irq, softirq) less the nodes'.
cpu_now() {
  local tck nodes ctl pairs
  tck=$(getconf CLK_TCK)
  IFS=, read -ra pairs <<<"$(node_cgroups)"
  nodes=$(counter_ns "${pairs[@]#*=}")
  if [ -n "$CTL_CGROUP" ]; then
    ctl=$(counter_ns "$CTL_COUNTER")
    awk -v c="$ctl" -v nodes="$nodes" 'BEGIN { printf "%.1f %.1f", c / 1e9, nodes / 1e9 }'
  else
    awk -v tck="$tck" -v nodes="$nodes" \
      '/^cpu / { printf "%.1f %.1f", ($2 + $3 + $4 + $7 + $8) / tck - nodes / 1e9, nodes / 1e9 }' /proc/stat
  fi
}

# every node of the run's PLAY RECAP ends changed=0 failed=0 (at least n nodes), or it says which did not
require_no_change() {  # log n
  local recap hosts
  recap=$(sed -n '/^PLAY RECAP/,/^$/p' "$1" | grep -E '^[A-Za-z0-9_.-]+ +:' || true)
  hosts=$(printf '%s\n' "$recap" | grep -c 'ok=' || true)
  if [ "$hosts" -lt "$2" ] || printf '%s\n' "$recap" | grep -vqE 'changed=0 .*failed=0'; then
    echo "converge.sh: the no-change run ($1) changed something or failed on a node:" >&2
    printf '%s\n' "$recap" >&2
    exit 1
  fi
}

declare -A COLD NOCHANGE MITO NODES_CPU CTL_CPU MAIN_CPU
REUSE="${REUSE:-}"
for n in "$@"; do
  if [ -n "$REUSE" ]; then
    running=$(podman ps --filter "label=ddp.cluster=$LABEL" --format '{{.ID}}' | wc -l)
    [ "$running" -eq "$n" ] || { echo "converge.sh: REUSE needs the $n nodes running, found $running" >&2; exit 2; }
    COLD[$n]=""
  else
    echo "== N=$n: building the local cluster${PREFIX:+ $PREFIX}"
    "$BIN/ansible-playbook" playbooks/local_cluster.yml -e local_cluster_state=absent "${CLUSTER_ARGS[@]}" \
      >"${LOG}N$n-down.log" 2>&1
    "$BIN/ansible-playbook" playbooks/local_cluster.yml -e "local_cluster_nodes=$n" "${CLUSTER_ARGS[@]}" \
      >"${LOG}N$n-up.log" 2>&1
    echo "== N=$n: cold site.yml"
    COLD[$n]=$(run_site "${LOG}N$n-cold.log")
  fi
  echo "== N=$n: no-change site.yml (--skip-tags benchmark)"
  read -r ctl0 nodes0 <<<"$(cpu_now)"
  NOCHANGE[$n]=$(DDP_NODE_CPU_CGROUPS="$(node_cgroups)" DDP_NODE_CPU_OUT="${LOG}N$n-nochange.node_cpu.json" \
                 DDP_CTL_CPU_COUNTER="${CTL_CGROUP:+$CTL_COUNTER}" \
                 ANSIBLE_CALLBACK_PLUGINS="$ROOT/benchmarks/callback_plugins" \
                 ANSIBLE_CALLBACKS_ENABLED="$ANSIBLE_CALLBACKS_ENABLED,node_cpu" \
                 run_site "${LOG}N$n-nochange.log" --skip-tags benchmark)
  read -r ctl1 nodes1 <<<"$(cpu_now)"
  NODES_CPU[$n]=$(awk -v a="$nodes0" -v b="$nodes1" 'BEGIN { printf "%.1f", b - a }')
  CTL_CPU[$n]=$(awk -v a="$ctl0" -v b="$ctl1" 'BEGIN { printf "%.1f", b - a }')
  MAIN_CPU[$n]=$(cat "${LOG}N$n-nochange.log.main_cpu")
  require_no_change "${LOG}N$n-nochange.log" "$n"
  if [ -n "$MITOGEN_STRATEGY" ]; then
    echo "== N=$n: no-change site.yml under mitogen $MITOGEN (mitogen_linear)"
    MITO[$n]=$(ANSIBLE_STRATEGY_PLUGINS="$MITOGEN_STRATEGY" ANSIBLE_STRATEGY=mitogen_linear \
               run_site "${LOG}N$n-mitogen.log" --skip-tags benchmark)
    require_no_change "${LOG}N$n-mitogen.log" "$n"
  fi
  for kind in cold nochange; do
    log="${LOG}N$n-$kind.log"
    [ "$kind" = nochange ] || [ -z "$REUSE" ] || continue
    printf '   %-9s port probe %5ss (start %ss + collect %ss), SSH check %ss\n' "$kind" \
      "$(awk -v a="$(task_s "$log" "ddp.cluster.ddp_health : Start the rank-to-rank port probe on every node at once")" \
             -v b="$(task_s "$log" "ddp.cluster.ddp_health : Collect every node's port probe")" 'BEGIN { printf "%.1f", a + b }')" \
      "$(task_s "$log" "ddp.cluster.ddp_health : Start the rank-to-rank port probe on every node at once")" \
      "$(task_s "$log" "ddp.cluster.ddp_health : Collect every node's port probe")" \
      "$(awk -v a="$(task_s "$log" "ddp.cluster.ssh_trust : Check SSH from this node to every other node (or to one other, where nothing changed)")" \
             -v b="$(task_s "$log" "ddp.cluster.ssh_trust : Check SSH from this node to every other node, where a login of the ring failed")" \
             'BEGIN { printf "%.1f", a + b }')"
  done
  echo "   slowest tasks of the no-change run:"
  sed -n '/^=====/,$p' "${LOG}N$n-nochange.log" | grep -E ' -+ [0-9.]+s$' | awk 'NR <= 8 { print "     " $0 }'
  echo "   the no-change run's tasks that cost the nodes most CPU (CPU-s over all nodes, runs; node_cpu callback):"
  "$BIN/python" - "${LOG}N$n-nochange.node_cpu.json" "$n" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
for t in d["tasks"][:10]:
    print("     %6.1f CPU-s (%4.2f per node) %3d run(s)  %s" % (t["cpu_s"], t["cpu_s"] / n, t["runs"], t["task"]))
top = sum(t["cpu_s"] for t in d["tasks"][:10])
print("     the 10 above: %.1f of %.1f CPU-s; %d tasks in all" % (top, d["total_s"], len(d["tasks"])))
if d.get("ctl_total_s"):
    print("   the controller's CPU per role or play (CPU-s, per node, task runs; the controller's cgroup per task):")
    roles = {}
    for t in d["tasks"]:
        role = t["task"].split(" : ", 1)[0] if " : " in t["task"] else "(play tasks)"
        cpu, runs = roles.get(role, (0.0, 0))
        roles[role] = (cpu + t["ctl_cpu_s"], runs + t["runs"])
    for role, (cpu, runs) in sorted(roles.items(), key=lambda kv: -kv[1][0])[:12]:
        print("     %6.1f CPU-s (%4.2f per node) %4d run(s)  %s" % (cpu, cpu / n, runs, role))
    print("     all tasks: %.1f CPU-s (start-up and parsing the playbooks come before the first task)"
          % d["ctl_total_s"])
PY
done

echo
echo "inventory: $INVENTORY"
if [ -n "$CTL_CGROUP" ]; then
  ctl_what="ansible-playbook with its workers and ssh, in a cgroup of their own"
else
  ctl_what="this machine's busy time less the nodes': run nothing else meanwhile"
fi
echo "no-change CPU seconds: nodes_cpu (the nodes' cgroups), ctl_cpu (the controller: $ctl_what),"
echo "  main_cpu (ansible-playbook's main process alone, part of ctl_cpu); /node: divided by the node count"
printf '%6s %8s %12s %7s %10s %10s %10s %10s %13s' nodes cold_s nochange_s ratio nodes_cpu nodes/node ctl_cpu \
  ctl/node main/node
[ -z "$MITOGEN_STRATEGY" ] || printf ' %10s %14s' mitogen_s mitogen/plain
printf '\n'
for n in "$@"; do
  awk -v n="$n" -v c="${COLD[$n]}" -v z="${NOCHANGE[$n]}" -v m="${MITO[$n]:-}" -v nc="${NODES_CPU[$n]}" \
      -v cc="${CTL_CPU[$n]}" -v mc="${MAIN_CPU[$n]}" 'BEGIN {
    if (c == "") printf "%6d %8s %12d %7s", n, "-", z, "-"
    else printf "%6d %8d %12d %7.2f", n, c, z, z / c
    printf " %10.1f %10.2f %10.1f %10.2f %13.2f", nc, nc / n, cc, cc / n, mc / n
    if (m != "") printf " %10d %14.2f", m, m / z
    printf "\n" }'
done
first="$1"; last="${!#}"
if [ "$first" != "$last" ]; then
  awk -v a="${NOCHANGE[$first]}" -v b="${NOCHANGE[$last]}" -v f="$first" -v l="$last" \
    'BEGIN { printf "no-change(%d) / no-change(%d) = %.2f\n", l, f, b / a }'
  awk -v a="${CTL_CPU[$first]}" -v b="${CTL_CPU[$last]}" -v f="$first" -v l="$last" \
    'BEGIN { printf "controller CPU, no-change(%d) / no-change(%d) = %.2f\n", l, f, b / a }'
fi

# extrapolate: the controller's time of a no-change run on M nodes, from the last N's controller CPU-seconds per
# node c (all of it: main process, workers, ssh) and main process CPU-seconds per node m. The workers and ssh of
# up to FORKS hosts run at once, on at most CONTROLLER_CORES cores, while the main process is one process on one
# core that handles every host's every task. The controller needs at least
#   T(M) = max(M * c / min(FORKS, CONTROLLER_CORES), M * m)
# seconds: CPU-bound, a lower bound (each task also waits for its slowest node, and the network adds latency).
awk -v n="$last" -v c="${CTL_CPU[$last]}" -v m="${MAIN_CPU[$last]}" -v f="$FORKS" -v k="$CONTROLLER_CORES" 'BEGIN {
  c /= n; m /= n; p = (f < k) ? f : k
  printf "controller, no-change run extrapolated from N=%d (%.2f CPU-s per node, %.2f of them in the main process)\n", n, c, m
  printf "  at %d forks on %d cores, T(M) = max(M * %.2f / %d, M * %.2f):", f, k, c, p, m
  split("100 1000", ms, " ")
  for (i = 1; i <= 2; i++) {
    M = ms[i]; t = M * c / p; s = M * m
    printf " %d nodes %.0f s (%s-bound)%s", M, (t > s ? t : s), (t > s ? "fork" : "main-process"), (i == 1 ? "," : "\n")
  }
}'
# What stays behind: the last cluster, left for a look at its nodes (ssh -F .cache/local_cluster/ssh/ddp-local/config
# ddp-node1, or .../ssh/<PREFIX>/config <PREFIX>1) or another run.
last_n="${!#}"
if [ -n "$PREFIX" ]; then
  echo "converge.sh: left running: the cluster $PREFIX of $last_n node(s) (containers ${PREFIX}1..$PREFIX$last_n," \
       "network $PREFIX); $BIN/ansible-playbook playbooks/local_cluster.yml -e local_cluster_state=absent" \
       "${CLUSTER_ARGS[*]} removes it"
else
  echo "converge.sh: left running: the local cluster of $last_n node(s) (containers ddp-node1..ddp-node$last_n," \
       "network ddp-local); make cluster-down removes it"
fi
