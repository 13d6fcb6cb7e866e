#!/usr/bin/env bash
# One-GPU check of the benchmark settings (issues 6 and 15), in one go, under 5 minutes:
#   default            : bf16 autocast + channels_last, synthetic data on the device
#   reference_baseline : the reference script's settings, as the matrix variant of that name: fp32 (TF32 off),
#                        torchvision FakeData with CPU transforms in 8 DataLoader workers, pin_memory, lr 0.1
# Prints img/s of both, default / reference_baseline, the DataLoader's own feed rate, and the provenance.
#
# Usage: benchmarks/gpu_check.sh [PYTHON]   (PYTHON: an interpreter with torch + torchvision; default python3)
# Env:   GPU_CHECK_MODEL (resnet50), GPU_CHECK_BATCH (64), GPU_CHECK_STEPS (50), GPU_CHECK_WARMUP (10),
#        GPU_CHECK_WORKERS (8), GPU_CHECK_OUT (a temp dir; results default.json / reference_baseline.json land there)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-${PYTHON:-python3}}
script=$here/roles/ddp_benchmark/files/ddp_bench.py
out=${GPU_CHECK_OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
model=${GPU_CHECK_MODEL:-resnet50}
batch=${GPU_CHECK_BATCH:-64}
steps=${GPU_CHECK_STEPS:-50}
warmup=${GPU_CHECK_WARMUP:-10}
workers=${GPU_CHECK_WORKERS:-8}

if ! "$python" - <<'PY'
import sys
try:
    import torch
except ImportError as exc:
    sys.exit("gpu_check: torch does not import in %s: %s" % (sys.executable, exc))
if not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device (torch %s, torch.version.cuda=%s, torch.cuda.device_count()=%d): "
             "this check needs one NVIDIA GPU and a CUDA build of torch" % (torch.__version__, torch.version.cuda,
                                                                         torch.cuda.device_count()))
try:
    import torchvision  # noqa: F401
except ImportError as exc:
    sys.exit("gpu_check: torchvision does not import (%s): ResNet-50 and FakeData need it" % exc)
PY
then
    exit 2
fi

run() {  # name, extra options...
    local name=$1; shift
    echo "== $name: $*" >&2
    timeout 200 "$python" -m torch.distributed.run --standalone --nproc-per-node 1 "$script" \
        --model "$model" --batch-size "$batch" --steps "$steps" --warmup-steps "$warmup" \
        --output "$out/$name.json" "$@" >"$out/$name.log" 2>&1 || {
        echo "gpu_check: the $name run failed; last lines of $out/$name.log:" >&2
        tail -20 "$out/$name.log" >&2
        exit 1
    }
}
start=$(date +%s)
run default --precision bf16 --memory-format channels_last --data synthetic
run reference_baseline --precision fp32 --memory-format contiguous --data loader --workers "$workers" --pin-memory on \
    --base-lr 0.1 --lr-scaling none
"$python" - "$out/default.json" "$out/reference_baseline.json" "$(( $(date +%s) - start ))" <<'PY'
import json, sys
ours, base = (json.load(open(p)) for p in sys.argv[1:3])
print("gpu_check: %s on %s" % (ours["model"], ours["device"]))
fmt = "  %-18s %-55s %10.1f img/s"
print(fmt % ("default", "bf16 autocast + channels_last, synthetic", ours["samples_per_s"]))
print(fmt % ("reference_baseline", "fp32, %s, %d workers" % (base["data_note"].split(" (")[0], base["workers"]),
             base["samples_per_s"]))
print("  default / reference_baseline: %.2fx" % (ours["samples_per_s"] / base["samples_per_s"]))
feed = base.get("loader") or {}
if feed.get("samples_per_s_per_process"):
    print("  DataLoader alone: %.1f img/s (headroom %.2fx over training: %s)"
          % (feed["samples_per_s_per_process"], feed["headroom"],
             "input-bound" if feed["input_bound"] else "not input-bound"))
v = ours["versions"]
print("  provenance: torch %s, CUDA %s, cuDNN %s, NCCL %s, python %s, torchvision %s; batch %d, %d+%d steps; %s s"
      % (v["torch"], v["cuda"], v["cudnn"], v["nccl"], ours["runtime_versions"]["python"],
         ours["runtime_versions"]["torchvision"], ours["batch_size_per_process"], ours["warmup_steps"],
         ours["steps"], sys.argv[3]))
PY
echo "results: $out/default.json $out/reference_baseline.json"
