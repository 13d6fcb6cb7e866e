# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the programs that run under torch.distributed share: gathering a result to every rank, writing it.

Installed by the pytorch_env role as <env>/share/ddp-cluster/ddp_dist.py, beside the health stage's
all-reduce (ddp_nccl_allreduce.py, which imports it from its own folder); the benchmark's ddp_bench.py,
installed elsewhere by the ddp_benchmark role and run with the environment's Python, finds it in
``<sys.prefix>/share/ddp-cluster``.

Python 3.8+, standard library; torch is passed in by the caller.
"""
from __future__ import annotations

import json
import os
import pickle
import tempfile


def all_gather_objects(torch, dist, obj, device, world_size):
    """Gather one picklable object from every rank, in rank order, to every rank.

    Same contract as ``dist.all_gather_object``, which in current torch unpickles through
    ``tensor.numpy()`` and so fails on a torch installed without NumPy; this needs only torch: two
    ``all_gather`` calls, the sizes of the pickled payloads, then the payloads padded to the largest.

    :param device: where the tensors live for the backend (``cuda:<local rank>`` with NCCL, ``cpu`` with Gloo).
    :returns: list of ``world_size`` objects.
    """
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8).to(device)
    size = torch.tensor([data.numel()], dtype=torch.long, device=device)
    sizes = [torch.zeros_like(size) for _rank in range(world_size)]
    dist.all_gather(sizes, size)
    sizes = [int(s.item()) for s in sizes]
    padded = torch.zeros(max(sizes), dtype=torch.uint8, device=device)
    padded[: data.numel()] = data
    chunks = [torch.zeros_like(padded) for _rank in range(world_size)]
    dist.all_gather(chunks, padded)
    return [pickle.loads(bytes(c[:n].cpu().tolist())) for c, n in zip(chunks, sizes)]


def write_json_atomic(path, data, prefix=".ddp."):
    """Write ``data`` as JSON (indented, sorted keys) to ``path``, mode 0644, all or nothing.

    A temporary file in the same folder (created if missing) is written, flushed to disk and renamed over
    ``path`` (``os.replace``), so a reader never sees half a file; on any error the temporary file is removed
    and the error raised.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
