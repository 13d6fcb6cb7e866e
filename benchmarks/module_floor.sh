#!/usr/bin/env bash
# The nodes' CPU of one module run: the least any task that runs a module costs each node, whatever it does.
#
#   benchmarks/module_floor.sh NODE [VENV ...]       (VENV default: .venv; each one's ansible-playbook is used)
#   ROUNDS=3 RUNS=20 benchmarks/module_floor.sh ddp-node2 .venv ~/.cache/ddp-cluster/ansible-core-2.16.19-...
#
# NODE is a node container of a running local cluster (make cluster, or converge.sh's PREFIX cluster). Per VENV and
# round: RUNS runs of ansible.builtin.ping on NODE, over SSH with pipelining and ControlPersist as ansible.cfg sets
# them (a static inventory of NODE alone, so that a venv without this collection's dependencies works too), with
# the node's CPU read from its cgroup (cpuacct.usage on cgroup v1, cpu.stat on v2) before and after. The rounds
# alternate the venvs, so that the machine's load falls on each alike. Prints per VENV its ansible-core version
# and the CPU-milliseconds per module run of each round. ping does nothing on the node: what it costs is
# ansible-core's own part of every module run (Python's start, unpacking the AnsiballZ payload, importing
# ansible.module_utils.basic from it), plus sshd's share. Compare the venvs as ratios within one run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ "$#" -ge 1 ] || { echo "usage: benchmarks/module_floor.sh NODE [VENV ...]" >&2; exit 2; }
node=$1
shift
[ "$#" -gt 0 ] || set -- .venv
ROUNDS="${ROUNDS:-2}"
RUNS="${RUNS:-20}"
# shellcheck source=benchmarks/lib/args.sh
. "$ROOT/benchmarks/lib/args.sh"
positive_ints module_floor.sh ROUNDS RUNS
for venv in "$@"; do
  [ -x "$venv/bin/ansible-playbook" ] || { echo "module_floor.sh: no $venv/bin/ansible-playbook" >&2; exit 2; }
done

podman container exists "$node" ||
  { echo "module_floor.sh: no container $node (make cluster starts the local cluster)" >&2; exit 2; }
network=$(podman inspect --format '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' "$node" | awk '{ print $1 }')
ssh_config="$ROOT/.cache/local_cluster/ssh/$network/config"
[ -r "$ssh_config" ] || { echo "module_floor.sh: no $ssh_config (roles/local_cluster writes it)" >&2; exit 2; }
# shellcheck source=benchmarks/lib/cgroup_cpu.sh
. "$ROOT/benchmarks/lib/cgroup_cpu.sh"
counter=$(container_counter "$node") ||
  { echo "module_floor.sh: cannot read $node's CPU counter under /sys/fs/cgroup (needs root)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[node]\n%s ansible_user=root ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args="-F %s"\n' \
  "$node" "$ssh_config" >"$work/inventory"
printf '[defaults]\nhost_key_checking = True\n[ssh_connection]\npipelining = True\n' >"$work/ansible.cfg"
cat >"$work/ping.yml" <<EOF
- name: ansible.builtin.ping, $RUNS times
  hosts: node
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
      loop: "{{ range($RUNS) | list }}"
EOF

declare -A MS VERSION
for venv in "$@"; do
  VERSION[$venv]=$("$venv/bin/python" -c 'import ansible.release; print(ansible.release.__version__)')
  # one run first, not counted: it opens the ControlPersist connection
  ANSIBLE_CONFIG="$work/ansible.cfg" "$venv/bin/ansible-playbook" -i "$work/inventory" "$work/ping.yml" >"$work/warm.log" 2>&1 || { cat "$work/warm.log" >&2; exit 1; }
done
for _ in $(seq "$ROUNDS"); do
  for venv in "$@"; do
    before=$(counter_ns "$counter")
    ANSIBLE_CONFIG="$work/ansible.cfg" "$venv/bin/ansible-playbook" -i "$work/inventory" "$work/ping.yml" \
      >"$work/run.log" 2>&1 || { cat "$work/run.log" >&2; exit 1; }
    after=$(counter_ns "$counter")
    MS[$venv]="${MS[$venv]:-}$(awk -v a="$before" -v b="$after" -v n="$RUNS" 'BEGIN { printf " %.0f", (b - a) / n / 1e6 }')"
  done
done
printf '%-16s %s\n' ansible-core "node CPU-ms per module run (one figure per round)   venv"
for venv in "$@"; do
  printf '%-16s %-52s %s\n' "${VERSION[$venv]}" "${MS[$venv]# }" "$venv"
done
