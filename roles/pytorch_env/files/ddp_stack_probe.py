# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the training environment really loads: print one JSON object on stdout (no collective, no GPU work).

Run by ``ddp.cluster.node_stack`` with the environment's Python, through ``ddp-env`` when it is installed, so the
library path is the one training jobs get. Installed by the pytorch_env role as
``<env>/share/ddp-cluster/ddp_stack_probe.py``.

Output keys:

* ``torch``: ``{"version", "cuda", "cudnn", "nccl", "cuda_available"}``: ``torch.__version__`` without its local
  label, ``torch.version.cuda``, ``torch.backends.cudnn.version()`` (an int such as 90100, as a string),
  ``torch.cuda.nccl.version()`` joined with dots; None where the build has none (a CPU build);
* ``mapped``: the shared objects of interest mapped into this process after those calls (``/proc/self/maps``):
  NCCL, cuDNN, the CUDA runtime, cuBLAS, NVML;
* ``wheel_lib_dirs``: ``{folder: [file names]}`` of ``site-packages/nvidia/*/lib`` (the CUDA libraries pip installed
  with torch);
* ``env``: ``NCCL_NET_PLUGIN``, ``LD_LIBRARY_PATH``, ``LD_PRELOAD``, ``HPCX_DIR`` as this process sees them;
* ``ld_path_libs``: ``{folder: [file names]}`` of the CUDA libraries (NCCL, cuDNN, cuBLAS, the CUDA runtime ...) in
  each ``LD_LIBRARY_PATH`` folder: copies the loader finds before the wheel's, listed even when torch cannot import;
* ``error``: only when torch cannot be imported (the message), with the other keys empty.

Exit status 0 whenever the JSON was printed.
"""
from __future__ import annotations

import glob
import json
import os
import sys

INTERESTING = ("libnccl", "libcudnn", "libcudart", "libcublas", "libnvidia-ml")


def mapped_libraries(maps_path="/proc/self/maps"):
    """Absolute paths of the interesting shared objects mapped into this process, in order of first mapping."""
    seen = []
    try:
        with open(maps_path) as handle:
            for line in handle:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if path.startswith("/") and os.path.basename(path).startswith(INTERESTING) and path not in seen:
                    seen.append(path)
    except OSError:
        pass
    return seen


def wheel_lib_dirs(paths=None):
    """``{folder: sorted file names}`` of every ``site-packages/nvidia/*/lib`` on ``sys.path``."""
    out = {}
    for entry in paths if paths is not None else sys.path:
        for folder in sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib"))):
            if os.path.isdir(folder):
                out[folder] = sorted(os.listdir(folder))
    return out


SHADOWING = ("libnccl", "libcudnn", "libcudart", "libcublas", "libnvrtc", "libcusparse", "libcufft", "libcurand",
             "libcusolver", "libnvJitLink", "libcupti")


def ld_path_libs(value):
    """``{folder: sorted names}`` of the CUDA libraries in each folder of the LD_LIBRARY_PATH value."""
    out = {}
    for folder in (value or "").split(":"):
        if not folder or not os.path.isdir(folder):
            continue
        try:
            names = sorted(n for n in os.listdir(folder) if n.startswith(SHADOWING) and ".so" in n)
        except OSError:
            continue
        if names:
            out[folder] = names
    return out


def torch_facts():
    """The torch build's versions; loads cuDNN and NCCL where the build has them, so that they show as mapped."""
    import torch  # pylint: disable=import-outside-toplevel,import-error

    facts = {"version": torch.__version__.split("+")[0], "cuda": torch.version.cuda, "cudnn": None, "nccl": None,
             "cuda_available": False}
    if torch.version.cuda:
        try:
            facts["cuda_available"] = bool(torch.cuda.is_available())
        except RuntimeError:
            facts["cuda_available"] = False
        try:
            cudnn = torch.backends.cudnn.version()
            facts["cudnn"] = str(cudnn) if cudnn else None
        except (RuntimeError, OSError):
            facts["cudnn"] = None
        try:
            nccl = torch.cuda.nccl.version()
            facts["nccl"] = ".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else str(nccl)
        except (RuntimeError, AttributeError, OSError):
            facts["nccl"] = None
    return facts


def main():
    out = {"torch": None, "mapped": [], "wheel_lib_dirs": {},
           "env": {name: os.environ.get(name) for name in ("NCCL_NET_PLUGIN", "LD_LIBRARY_PATH", "LD_PRELOAD",
                                                           "HPCX_DIR")}}
    try:
        out["torch"] = torch_facts()
    except Exception as exc:  # pylint: disable=broad-except
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    out["mapped"] = mapped_libraries()
    out["wheel_lib_dirs"] = wheel_lib_dirs()
    out["ld_path_libs"] = ld_path_libs(os.environ.get("LD_LIBRARY_PATH"))
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
