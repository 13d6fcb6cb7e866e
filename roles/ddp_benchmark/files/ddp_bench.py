# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Synthetic-data PyTorch DDP training benchmark, launched by torchrun.

Launch on every node at once with the same c10d rendezvous::

    torchrun --nnodes N --nproc-per-node G \\
        --rdzv-backend c10d --rdzv-endpoint HEAD:PORT --rdzv-id RUN \\
        ddp_bench.py --output /tmp/ddp_bench.json

The rank layout is read from torchrun's environment (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), never from a ``--local_rank``
argument (torch.distributed.launch in torch 2.x passes ``--local-rank``; it is
accepted and ignored here, the environment wins).

Each rank times ``--steps`` training steps after ``--warmup-steps`` (with
``torch.cuda.synchronize`` on GPU and a barrier before and after the timed
loop) and measures its own samples/s. The per-rank figures are gathered to
every rank (an ``all_gather_object`` that does not need NumPy); rank 0 builds
the result, which is shared with every rank, and the LOCAL_RANK 0 process of
every node writes the same JSON to ``--output`` (temp file + ``os.replace``),
so the controller can fetch it from any node.

Python 3.8+, standard library + torch; torchvision is imported only for
ResNet-50.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import socket
import sys
import tempfile
import time

SCHEMA_VERSION = 1
REQUIRED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")
SMALL_CNN_NAME = "small_cnn (torch.nn, 4 conv layers, CPU stand-in for ResNet-50)"
RESNET50_NAME = "resnet50 (torchvision.models, random init)"
PROG = "ddp_bench.py"


class BenchError(Exception):
    """An error reported as one line on stderr with a non-zero exit."""


def parse_args(argv=None):
    """Parse the command line. Sizes are per process; times are seconds."""
    p = argparse.ArgumentParser(prog=PROG, description="Synthetic-data PyTorch DDP benchmark (launch with torchrun).")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                   help="process-group backend; auto = nccl when CUDA is available, else gloo")
    p.add_argument("--model", choices=("auto", "resnet50", "small_cnn"), default="auto",
                   help="auto = resnet50 on CUDA when torchvision imports, else small_cnn")
    p.add_argument("--batch-size", type=_positive_int, default=64, help="samples per process per step")
    p.add_argument("--image-size", type=_positive_int, default=224, help="square input side in pixels")
    p.add_argument("--num-classes", type=_positive_int, default=1000)
    p.add_argument("--warmup-steps", type=_non_negative_int, default=10, help="untimed steps before timing")
    p.add_argument("--steps", type=_positive_int, default=50, help="timed steps")
    p.add_argument("--init-timeout-s", type=_positive_int, default=300,
                   help="timeout for init_process_group and collectives, seconds")
    p.add_argument("--output", default="ddp_bench.json", help="JSON result path (written by LOCAL_RANK 0 of every node)")
    p.add_argument("--seed", type=int, default=1234)
    # torch.distributed.launch (torch 2.x) appends --local-rank=N; torchrun does not.
    # Accept it so such a launch does not die in argparse, but never use it (C15).
    p.add_argument("--local-rank", "--local_rank", dest="legacy_local_rank", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer, got %s" % text)
    return value


def _non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or a positive integer, got %s" % text)
    return value


def read_launch_env(environ):
    """Return the rank layout from torchrun's environment, or raise BenchError."""
    missing = [name for name in REQUIRED_ENV if not environ.get(name)]
    if missing:
        raise BenchError(
            "missing torchrun environment variable(s) %s; launch with torchrun "
            "(torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT "
            "--rdzv-id RUN %s ...), not plain python" % (", ".join(missing), PROG))
    try:
        layout = {name.lower(): int(environ[name]) for name in REQUIRED_ENV if name not in ("MASTER_ADDR",)}
    except ValueError as exc:
        raise BenchError("torchrun environment variable is not an integer: %s" % exc)
    return layout


def utc_now():
    """UTC time as ISO 8601 with seconds precision and a Z suffix."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def build_small_cnn(nn, num_classes):
    """Four stride-2 conv blocks + global pool + linear: a cheap CPU stand-in."""
    layers = []
    channels = (3, 32, 64, 128, 256)
    for c_in, c_out in zip(channels[:-1], channels[1:]):
        layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels[-1], num_classes)]
    return nn.Sequential(*layers)


def choose_model(requested, on_cuda):
    """Return (name, note, builder-or-None). builder None means small_cnn."""
    if requested in ("auto", "resnet50"):
        try:
            import torchvision  # noqa: F401  (lazy: only ResNet-50 needs it)
            tv_error = None
        except Exception as exc:  # ImportError, or a torchvision that does not match torch
            tv_error = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
        if requested == "resnet50":
            if tv_error:
                raise BenchError("--model resnet50 needs torchvision, which does not import: %s" % tv_error)
            return RESNET50_NAME, "requested with --model resnet50", _resnet50
        if on_cuda and not tv_error:
            return RESNET50_NAME, "auto: CUDA available and torchvision imports", _resnet50
        why = "no CUDA device" if not on_cuda else "torchvision does not import (%s)" % tv_error
        return SMALL_CNN_NAME, "auto: %s, so small_cnn; figures are not comparable to ResNet-50" % why, None
    return SMALL_CNN_NAME, "requested with --model small_cnn; figures are not comparable to ResNet-50", None


def _resnet50(num_classes):
    import torchvision
    try:
        return torchvision.models.resnet50(weights=None, num_classes=num_classes)
    except TypeError:  # torchvision < 0.13
        return torchvision.models.resnet50(pretrained=False, num_classes=num_classes)


def collect_env(environ):
    """NCCL_*, TORCH_NCCL_* and GLOO_* variables present, sorted by name."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENV_PREFIXES)}


def torch_versions(torch):
    """Versions as the loaded torch reports them; None where not built in."""
    nccl = None
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:
            nccl = None
    cudnn = None
    try:
        if torch.backends.cudnn.is_available():
            cudnn = torch.backends.cudnn.version()
    except Exception:
        cudnn = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn, "nccl": nccl}


def write_json_atomic(path, data):
    """Write data as JSON to path via a temp file in the same directory and os.replace."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ddp_bench.", suffix=".tmp", dir=directory)
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


def run(args, layout):
    """Initialise the process group, run the benchmark, return the result dict."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, local_rank, world_size = layout["rank"], layout["local_rank"], layout["world_size"]
    cuda = torch.cuda.is_available()
    backend = args.backend if args.backend != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        raise BenchError("--backend nccl needs CUDA, but torch.cuda.is_available() is False (torch %s)" % torch.__version__)
    on_gpu = cuda and backend == "nccl"
    if on_gpu:
        if local_rank >= torch.cuda.device_count():
            raise BenchError("LOCAL_RANK %d but only %d CUDA device(s) visible" % (local_rank, torch.cuda.device_count()))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.backends.cudnn.benchmark = True
    else:
        device = torch.device("cpu")

    model_name, model_note, builder = choose_model(args.model, on_gpu)
    started_at = utc_now()
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=args.init_timeout_s))
    try:
        torch.manual_seed(args.seed)
        model = builder(args.num_classes) if builder else build_small_cnn(nn, args.num_classes)
        model = model.to(device)
        ddp = DDP(model, device_ids=[local_rank] if on_gpu else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        gen = torch.Generator().manual_seed(args.seed + rank)
        images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen).to(device)
        labels = torch.randint(0, args.num_classes, (args.batch_size,), generator=gen).to(device)

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(images), labels)
            loss.backward()
            optimizer.step()

        def sync():
            if on_gpu:
                torch.cuda.synchronize(device)

        ddp.train()
        for _warm in range(args.warmup_steps):
            step()
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _step in range(args.steps):
            step()
        sync()
        elapsed = time.perf_counter() - t0
        dist.barrier()

        mine = {
            "rank": rank,
            "local_rank": local_rank,
            "group_rank": layout["group_rank"],
            "host": socket.gethostname(),
            "elapsed_s": elapsed,
            "samples_per_s": args.batch_size * args.steps / elapsed,
            "step_time_mean_s": elapsed / args.steps,
            "cpu_threads": torch.get_num_threads(),
        }
        gathered = all_gather_objects(torch, dist, mine, device, world_size)

        result = None
        if rank == 0:
            result = build_result(args, layout, gathered, model_name, model_note, backend,
                                  torch.cuda.get_device_name(device) if on_gpu else "cpu",
                                  torch_versions(torch), collect_env(os.environ), started_at)
        # Every node writes rank 0's result, so the files are identical.
        result = all_gather_objects(torch, dist, result, device, world_size)[0]
        if local_rank == 0:
            write_json_atomic(args.output, result)
        dist.barrier()
        return result
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def all_gather_objects(torch, dist, obj, device, world_size):
    """Gather one picklable object from every rank, in rank order.

    Same contract as ``dist.all_gather_object``, which in current torch
    unpickles through ``tensor.numpy()`` and so fails on a torch installed
    without NumPy; this version needs only torch. Payloads here are a few KiB.
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


def build_result(args, layout, gathered, model_name, model_note, backend, device, versions, env, started_at):
    """Assemble the result dict (units: seconds, samples/s) from the gathered per-rank figures."""
    gathered = sorted(gathered, key=lambda r: r["rank"])
    world_size = layout["world_size"]
    slowest = max(r["elapsed_s"] for r in gathered)
    global_sps = world_size * args.batch_size * args.steps / slowest
    hosts = {}
    for r in gathered:
        hosts.setdefault(r["host"], []).append(r["rank"])
    nnodes = len({r["group_rank"] for r in gathered})
    return {
        "schema_version": SCHEMA_VERSION,
        "model": model_name,
        "model_note": model_note,
        "backend": backend,
        "device": device,
        "world_size": world_size,
        "nnodes": nnodes,
        "nproc_per_node": layout["local_world_size"],
        "batch_size_per_process": args.batch_size,
        "global_batch_size": args.batch_size * world_size,
        "image_size": args.image_size,
        "warmup_steps": args.warmup_steps,
        "steps": args.steps,
        "elapsed_s": round(gathered[0]["elapsed_s"], 6),
        "samples_per_s": round(global_sps, 3),
        "samples_per_s_per_process": round(global_sps / world_size, 3),
        # torchrun sets OMP_NUM_THREADS=1 only when nproc_per_node > 1; on CPU
        # the intra-op thread count changes throughput several-fold, so record it.
        "cpu_threads_per_process": gathered[0]["cpu_threads"],
        "hosts": {h: sorted(ranks) for h, ranks in sorted(hosts.items())},
        "per_rank": [
            {
                "rank": r["rank"],
                "local_rank": r["local_rank"],
                "host": r["host"],
                "samples_per_s": round(r["samples_per_s"], 3),
                "step_time_mean_s": round(r["step_time_mean_s"], 6),
            }
            for r in gathered
        ],
        "versions": versions,
        "started_at": started_at,
        "finished_at": utc_now(),
        "env": env,
    }


def main(argv=None):
    args = parse_args(argv)
    try:
        layout = read_launch_env(os.environ)
        if args.legacy_local_rank is not None and str(layout["local_rank"]) != str(args.legacy_local_rank):
            print("%s: ignoring --local-rank=%s; LOCAL_RANK=%d from the environment wins"
                  % (PROG, args.legacy_local_rank, layout["local_rank"]), file=sys.stderr)
        run(args, layout)
    except BenchError as exc:
        print("%s: error: %s" % (PROG, exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
