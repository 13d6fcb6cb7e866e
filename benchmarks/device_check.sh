#!/usr/bin/env bash
# One short run on a machine with a real NVIDIA GPU: the health modules on the real nvidia-smi, then gpu_check.sh.
#
#   1. nvidia-smi -L and the --query-gpu fields the gpu_health module reads (as printed, for the record);
#   2. ddp-health --json (roles/node_health/files/ddp_health.py) with the collection's module_utils, no Ansible;
#   3. the modules through ansible-core (when it imports, or from wheels in WHEELS): hardware_facts, gpu_health,
#      node_stack (the probe in PYTHON's environment) and nccl_health (one process all-reduce, torch mode);
#   4. the burn-in program (roles/pytorch_env/files/ddp_burnin.py) for 20 s: achieved TFLOPS and the GEMM digest;
#   5. benchmarks/gpu_check.sh (bf16 + channels_last vs the reference script's fp32 settings).
# Each step's output lands in OUT (default: a temp dir); a failing step is reported and the next one runs.
#
# Usage: benchmarks/device_check.sh [PYTHON]   (PYTHON: an interpreter with torch + torchvision; default python3)
# Env:   OUT (results folder), WHEELS (a folder of ansible-core and its dependencies as wheels, optional)
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-${PYTHON:-python3}}
out=${OUT:-$(mktemp -d /tmp/device_check.XXXXXX)}
mkdir -p "$out"
work=$(mktemp -d /tmp/device_check_work.XXXXXX)
trap 'rm -rf "$work"' EXIT
status=0

step() {  # name, command...: runs it, keeps stdout+stderr in $out/<name>.txt, prints its rc and tail
    local name=$1; shift
    echo "== $name: $*"
    "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    tail -n 40 "$out/$name.txt"
    echo "== $name: rc $rc"
    [ "$rc" -eq 0 ] || status=1
}

# The collection as Python and Ansible find it: <work>/ansible_collections/ddp/cluster -> this checkout.
mkdir -p "$work/ansible_collections/ddp"
ln -s "$here" "$work/ansible_collections/ddp/cluster"
# ansible-core's module_utils are found from ansible_collections' parent only when ansible is importable.
if [ -n "${WHEELS:-}" ] && ! "$python" -c 'import ansible' 2>/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$WHEELS"/*.whl \
        || echo "device_check: the wheels in $WHEELS did not install"
fi
export PYTHONPATH="$work:$work/site${PYTHONPATH:+:$PYTHONPATH}"
venv=$("$python" -c 'import sys; print(sys.prefix)')

step nvidia_smi bash -c 'nvidia-smi -L; nvidia-smi --query-gpu=index,name,uuid,driver_version,pci.bus_id,\
persistence_mode,temperature.gpu,ecc.errors.uncorrected.volatile.total,retired_pages.pending,\
remapped_rows.pending,remapped_rows.failure,clocks_throttle_reasons.active,memory.total,power.limit \
--format=csv; nvidia-smi topo -m'
step ddp_health "$python" "$here/roles/node_health/files/ddp_health.py" --json --config "$work/absent.json"

if "$python" -c 'import ansible' 2>/dev/null; then
    cat >"$work/ansible.cfg" <<EOF
[defaults]
collections_path = $work
interpreter_python = $python
stdout_callback = ansible.builtin.default
callback_result_format = yaml
EOF
    export ANSIBLE_CONFIG=$work/ansible.cfg ANSIBLE_LOCAL_TEMP=$work/tmp ANSIBLE_HOME=$work/home
    # ansible-core's own entry point (python -m ansible <cli>): wheels installed with --target have no scripts.
    adhoc=("$python" -m ansible adhoc localhost -c local -e "ansible_python_interpreter=$python")
    step hardware_facts "${adhoc[@]}" -m ddp.cluster.hardware_facts
    step gpu_health "${adhoc[@]}" -m ddp.cluster.gpu_health -a 'expected_gpus=1 xid_since=boot'
    step node_stack "${adhoc[@]}" -m ddp.cluster.node_stack \
        -a "python_env=$venv probe=$here/roles/pytorch_env/files/ddp_stack_probe.py launcher= manifest_dir=$work/none"
    step nccl_health "${adhoc[@]}" -m ddp.cluster.nccl_health \
        -a "python_env=$venv script=$here/roles/pytorch_env/files/ddp_nccl_allreduce.py nnodes=1 nproc_per_node=1 \
backend=nccl rdzv_endpoint=127.0.0.1:29531 timeout=180"
else
    echo "device_check: ansible does not import in $python (give WHEELS): the modules were not run"
    status=1
fi

step burnin "$python" "$here/roles/pytorch_env/files/ddp_burnin.py" --seconds 20
step gpu_check env GPU_CHECK_OUT="$out" "$here/benchmarks/gpu_check.sh" "$python"
echo "device_check: results in $out (rc $status)"
exit "$status"
