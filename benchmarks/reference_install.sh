#!/usr/bin/env bash
# Installing the reference stack (torch 2.1.0 + torchvision 0.16.0 + Horovod 0.28.1, about 2.6 GB of wheels) on the
# local podman cluster: through the controller's package index (pytorch_env_wheelhouse_transport http) against
# copying the wheelhouse to every node (copy).
#
#   benchmarks/reference_install.sh [N]          (default: 3 nodes)
#   INVENTORY=inventory/local-podman benchmarks/reference_install.sh 3     the nodes over podman exec, not SSH
#
# Builds the wheelhouse first if it is not cached (tools/reference_wheelhouse.sh: download and the Horovod build,
# not timed), rebuilds the local cluster with N nodes (not timed), then installs the stack into two environments
# (/opt/ddp/venv-ref-http, then /opt/ddp/venv-ref-copy; pytorch_env_primary false), one per transport, and prints
# the seconds of each playbook run and their ratio. The cluster is removed at the end. Timings come from one
# sitting on one machine: compare them as ratios. Logs: artifacts/reference_install/<transport>.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-.venv}/bin"
INVENTORY="${INVENTORY:-inventory/local}"
[ "$#" -le 1 ] || { echo "reference_install.sh: one node count at a time, got '$*'" >&2; exit 2; }
N="${1:-3}"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "reference_install.sh: the node count is a positive integer, got '$N'" >&2; exit 2; }
OUT="$ROOT/artifacts/reference_install"
mkdir -p "$OUT"
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1

WHEELHOUSE="$(PYTHON="$BIN/python" tools/reference_wheelhouse.sh | tail -1)"
# Nothing stays behind: the cluster is removed at the end, whatever happened, and the script says so.
trap 'if "$BIN/ansible-playbook" playbooks/local_cluster.yml -e local_cluster_state=absent >"$OUT/cluster-down.log" 2>&1
      then echo "reference_install.sh: the local cluster is removed (nothing left running)"
      else echo "reference_install.sh: the local cluster could not be removed: $OUT/cluster-down.log; make cluster-down" >&2
      fi' EXIT
"$BIN/ansible-playbook" playbooks/local_cluster.yml -e local_cluster_state=absent >"$OUT/cluster-down.log" 2>&1
"$BIN/ansible-playbook" playbooks/local_cluster.yml -e "local_cluster_nodes=$N" >"$OUT/cluster.log" 2>&1

declare -A took
for transport in http copy; do
  extra=$(printf '{"ddp_env_path": "/opt/ddp/venv-ref-%s", "pytorch_env_primary": false, "ddp_torch_version": "2.1.0",
    "ddp_torchvision_version": "0.16.0", "ddp_cuda_version": "12.1", "pytorch_env_install_torchvision": true,
    "pytorch_env_wheelhouse": "%s", "pytorch_env_wheelhouse_transport": "%s",
    "pytorch_env_extra_packages": ["numpy", "horovod==0.28.1"]}' "$transport" "$WHEELHOUSE" "$transport")
  start=$(date +%s)
  if ! "$BIN/ansible-playbook" -i "$INVENTORY" playbooks/pytorch_env.yml -e "$extra" >"$OUT/$transport.log" 2>&1; then
    echo "reference_install.sh: the $transport install failed (see $OUT/$transport.log):" >&2
    tail -20 "$OUT/$transport.log" >&2
    exit 1
  fi
  took[$transport]=$(( $(date +%s) - start ))
done
printf 'nodes  index (http) s  copies s  index/copies\n'
awk -v n="$N" -v h="${took[http]}" -v c="${took[copy]}" 'BEGIN { printf "%5d  %14d  %8d  %12.2f\n", n, h, c, h / c }'
