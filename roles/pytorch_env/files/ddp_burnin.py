# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in stress of one node: matmuls on every GPU (or on the CPU) for a set time, printed as one JSON object.

The health stage's burn-in tier (``ddp_health_level: burnin``) runs it on every node at once with the training
environment's Python; ``ddp.cluster.burnin_findings`` then compares the devices with each other, within a node and
across nodes. Installed by the pytorch_env role as ``<env>/share/ddp-cluster/ddp_burnin.py``.

Per device, one thread each (every GPU is stressed at once, as training does):

* a fixed pair of ``--size`` x ``--size`` matrices from a seeded generator (the same on every device and node), and
  their product repeated until ``--seconds`` have passed; achieved TFLOPS = 2 n^3 x products / seconds / 1e12
  (the FLOP count of a dense n x n x n GEMM);
* the SHA-256 of the bytes of one product of those inputs, taken after the stress: devices of one model with the
  same torch and library versions compute bit-identical GEMMs, so a device whose digest differs from its peers
  computes wrong results (the cross-GPU comparison Imbue's 4,092-H100 health checks make).

Options: ``--seconds`` (default 300, Imbue's 5 minutes), ``--size`` (default 8192 on GPU, 1024 on CPU), ``--dtype``
(``bf16`` on GPUs that support it, else ``fp32``; always ``fp32`` on CPU). Output keys: ``host``, ``torch``,
``device_type`` (``cuda`` or ``cpu``), ``dtype``, ``size``, ``seconds`` (asked), ``threads`` (torch's
intra-op threads), ``devices`` (one dict per device:
``index``, ``name``, ``uuid`` (GPU), ``products``, ``seconds`` (measured), ``tflops``, ``digest``, ``error`` (only
when that device failed: its message)). Exit status 0 when the JSON was printed (a failed device is in it); 2 with a
one-line error on stderr when torch does not import or the options are wrong.

Python 3.8+, standard library + torch.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import socket
import sys
import threading
import time

PROG = "ddp_burnin.py"
SEED = 20261201
GPU_SIZE = 8192
CPU_SIZE = 1024


def parse_args(argv=None):
    """Parse the command line (seconds, matrix side, dtype)."""
    p = argparse.ArgumentParser(prog=PROG, description="Matmul burn-in of every GPU (or the CPU) of this node.")
    p.add_argument("--seconds", type=float, default=300.0, help="stress time per device, seconds (default 300)")
    p.add_argument("--size", type=int, default=0, help="matrix side n; 0 = %d on GPU, %d on CPU" % (GPU_SIZE, CPU_SIZE))
    p.add_argument("--dtype", choices=("auto", "fp32", "bf16"), default="auto",
                   help="auto = bf16 on GPUs that support it, fp32 otherwise and on CPU")
    p.add_argument("--device", choices=("auto", "cpu"), default="auto", help="cpu: stress the CPU even with GPUs")
    args = p.parse_args(argv)
    if args.seconds <= 0:
        p.error("--seconds must be greater than 0, got %s" % args.seconds)
    if args.size < 0:
        p.error("--size must be 0 (the default for the device) or positive, got %d" % args.size)
    return args


def tflops(size, products, seconds):
    """Achieved TFLOPS of ``products`` dense ``size`` x ``size`` GEMMs in ``seconds`` (2 n^3 FLOPs each)."""
    if seconds <= 0:
        return 0.0
    return 2.0 * float(size) ** 3 * products / seconds / 1e12


def digest(tensor):
    """SHA-256 (hex) of a tensor's bytes as the device stored them (copied to the CPU; no NumPy needed)."""
    flat = tensor.detach().cpu().contiguous()
    return hashlib.sha256(ctypes.string_at(flat.data_ptr(), flat.numel() * flat.element_size())).hexdigest()


def stress(torch, device, size, dtype, seconds, clock=time.perf_counter):
    """Run the GEMMs on one device; return ``{"products", "seconds", "tflops", "digest"}``."""
    gen = torch.Generator().manual_seed(SEED)
    a = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    c = torch.matmul(a, b)  # warm-up: kernel selection and clocks ramping up are not timed
    sync()
    products, start = 0, clock()
    deadline = start + seconds
    while True:
        torch.matmul(a, b, out=c)
        products += 1
        if products % 8 == 0 or device.type == "cpu":
            sync()
            if clock() >= deadline:
                break
    sync()
    elapsed = clock() - start
    check = torch.matmul(a, b)
    sync()
    return {"products": products, "seconds": round(elapsed, 3), "tflops": round(tflops(size, products, elapsed), 4),
            "digest": digest(check)}


def devices(torch, want):
    """``[(index, torch.device, name, uuid)]``: every visible GPU, or the CPU (its model name from /proc/cpuinfo)."""
    if want != "cpu" and torch.cuda.is_available():
        out = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            out.append((index, torch.device("cuda", index), props.name, str(getattr(props, "uuid", "") or "")))
        return out
    return [(0, torch.device("cpu"), cpu_model(), "")]


def cpu_model(path="/proc/cpuinfo"):
    """The CPU's ``model name`` line of /proc/cpuinfo (``cpu`` when there is none)."""
    try:
        with open(path) as handle:
            for line in handle:
                key, _sep, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return "cpu"


def run(args):
    """Stress every device at once (one thread each); return the result dict."""
    import torch
    found = devices(torch, args.device)
    on_gpu = found[0][1].type == "cuda"
    if args.dtype == "auto":
        name = "bf16" if on_gpu and torch.cuda.is_bf16_supported() else "fp32"
    else:
        name = args.dtype if on_gpu else "fp32"
    dtype = torch.bfloat16 if name == "bf16" else torch.float32
    size = args.size or (GPU_SIZE if on_gpu else CPU_SIZE)
    results = [None] * len(found)

    def work(slot, index, device, label, uuid):
        entry = {"index": index, "name": label}
        if uuid:
            entry["uuid"] = uuid
        try:
            entry.update(stress(torch, device, size, dtype, args.seconds))
        except Exception as exc:  # one failing GPU is a finding, not the end of the others' run
            entry["error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
        results[slot] = entry

    threads = [threading.Thread(target=work, args=(slot,) + item) for slot, item in enumerate(found)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"host": socket.gethostname(), "torch": torch.__version__, "device_type": "cuda" if on_gpu else "cpu",
            "dtype": name, "size": size, "seconds": args.seconds, "threads": torch.get_num_threads(),
            "devices": results}


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch  # noqa: F401
    except Exception as exc:
        print("%s: error: torch does not import in %s: %s" % (PROG, sys.executable, exc), file=sys.stderr)
        return 2
    print(json.dumps(run(args), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
