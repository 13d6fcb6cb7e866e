# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PyTorch DDP training benchmark, launched by torchrun (or by Horovod).

Launch on every node at once with the same c10d rendezvous::

    torchrun --nnodes N --nproc-per-node G \\
        --rdzv-backend c10d --rdzv-endpoint HEAD:PORT --rdzv-id RUN \\
        ddp_bench.py --output /tmp/ddp_bench.json

The rank layout is read from torchrun's environment (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), never from a ``--local_rank``
argument (torch.distributed.launch in torch 2.x passes ``--local-rank``; it is
accepted and ignored here, the environment wins: case C15). With
``--launcher horovod`` (under horovodrun or mpirun) the layout comes from
Horovod instead, the optimizer is ``hvd.DistributedOptimizer`` and the
parameters are broadcast from rank 0.

Each rank times ``--steps`` training steps after ``--warmup-steps`` (with
``torch.cuda.synchronize`` on GPU and a barrier before and after the timed
loop) and measures its own samples/s. Options: precision (fp32, tf32,
bf16/fp16 autocast), channels_last, torch.compile, and the input: synthetic
tensors already on the device (default) or a DataLoader with workers and
pin_memory over torchvision FakeData with CPU transforms (or, without
torchvision, a torch-only dataset that does the same kind of CPU work per
sample). The learning rate follows a scaling rule (linear or sqrt in the
global batch) and is reported; every RNG is seeded.

The per-rank figures are gathered to every rank (an ``all_gather`` of pickled
bytes that does not need NumPy); rank 0 builds the result, which is shared with
every rank, and the LOCAL_RANK 0 process of every node writes the same JSON to
``--output`` (temp file + ``os.replace``), so the controller can fetch it from
any node. With NCCL, the NCCL_DEBUG=INFO lines that show the transport are
captured per rank (unless NCCL_DEBUG is set already) and kept in the result.

Python 3.8+, standard library + torch; torchvision is imported only for
ResNet-50 and FakeData, horovod only with ``--launcher horovod``.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import random
import re
import socket
import sys
import time


def _shared_module_dir():
    """Where ddp_dist.py is: ``<env>/share/ddp-cluster`` (the pytorch_env role installs it there and this program
    runs with the environment's Python), else the collection's own roles/pytorch_env/files (a checkout, tests)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.path.join(sys.prefix, "share", "ddp-cluster"),
                   os.path.join(here, os.pardir, os.pardir, "pytorch_env", "files")):
        if os.path.isfile(os.path.join(folder, "ddp_dist.py")):
            return os.path.normpath(folder)
    raise ImportError("ddp_bench.py needs ddp_dist.py, which the pytorch_env role installs in %s: run the "
                      "environment stage of this collection's version (or run ddp_bench.py with that "
                      "environment's Python)" % os.path.join(sys.prefix, "share", "ddp-cluster"))


_SHARED_DIR = _shared_module_dir()
if _SHARED_DIR not in sys.path:
    sys.path.append(_SHARED_DIR)
from ddp_dist import all_gather_objects, write_json_atomic  # noqa: E402  (gathering and writing, shared with health)

SCHEMA_VERSION = 1
REQUIRED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")
# Other launch variables kept as provenance in "launch_env".
LAUNCH_ENV_PREFIXES = ("TORCH_", "HOROVOD_", "TORCHELASTIC_")
LAUNCH_ENV_EXACT = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
# Slurm's job provenance, when the run is a Slurm job (ddp-torchrun.sbatch): kept in "scheduler".
SLURM_ENV = (("SLURM_JOB_ID", "job_id"), ("SLURM_JOB_NODELIST", "nodelist"), ("SLURM_JOB_NUM_NODES", "nodes"),
             ("SLURM_JOB_PARTITION", "partition"), ("SLURM_CLUSTER_NAME", "cluster"))
SMALL_CNN_NAME = "small_cnn (torch.nn, 4 conv layers, CPU stand-in for ResNet-50)"
RESNET50_NAME = "resnet50 (torchvision.models, random init)"
FAKEDATA_NAME = ("torchvision FakeData + RandomResizedCrop/RandomHorizontalFlip/ToTensor/Normalize "
                 "(PIL, in DataLoader workers)")
CPU_DATASET_NAME = ("cpu_transform_dataset (torch-only stand-in for FakeData: uint8 image per sample, random "
                    "resized crop, flip, normalise, in DataLoader workers)")
PROG = "ddp_bench.py"
# NCCL_DEBUG=INFO lines that show what NCCL used (the rest is dropped to keep the result small).
_NCCL_KEEP_RE = re.compile(r"NCCL (?:WARN|INFO (?:NCCL version|Bootstrap|NET/|Using network|.*GPU Direct RDMA"
                           r"|Channel \d+(?:/\d+)?\s*:.* via NET/|.*Init COMPLETE|\d+ coll channels))")
NCCL_LINES_MAX = 200
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class BenchError(Exception):
    """An error reported as one line on stderr with a non-zero exit."""


def parse_args(argv=None):
    """Parse the command line. Sizes are per process; times are seconds."""
    p = argparse.ArgumentParser(prog=PROG, description="PyTorch DDP benchmark (launch with torchrun or horovodrun).")
    p.add_argument("--launcher", choices=("torchrun", "horovod"), default="torchrun",
                   help="torchrun: torch.distributed + DDP; horovod: horovod.torch under horovodrun/mpirun")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                   help="process-group backend; auto = nccl when CUDA is available, else gloo")
    p.add_argument("--model", choices=("auto", "resnet50", "small_cnn"), default="auto",
                   help="auto = resnet50 on CUDA when torchvision imports, else small_cnn")
    p.add_argument("--batch-size", type=_positive_int, default=64, help="samples per process per step")
    p.add_argument("--image-size", type=_positive_int, default=224, help="square input side in pixels")
    p.add_argument("--num-classes", type=_positive_int, default=1000)
    p.add_argument("--warmup-steps", type=_non_negative_int, default=10, help="untimed steps before timing")
    p.add_argument("--steps", type=_positive_int, default=50, help="timed steps")
    p.add_argument("--precision", choices=("auto", "fp32", "tf32", "bf16", "fp16"), default="auto",
                   help="fp32 (TF32 off), tf32 (TF32 matmul/cuDNN), bf16/fp16 autocast; "
                        "auto = bf16 on a CUDA device that supports it, else fp32")
    p.add_argument("--memory-format", choices=("auto", "channels_last", "contiguous"), default="auto",
                   help="auto = channels_last on CUDA, contiguous on CPU")
    p.add_argument("--compile", choices=("off", "on"), default="off", help="torch.compile the DDP model")
    p.add_argument("--compile-backend", default="inductor", help="torch.compile backend (inductor, aot_eager, eager)")
    p.add_argument("--data", choices=("synthetic", "loader"), default="synthetic",
                   help="synthetic: one random batch on the device; loader: DataLoader over FakeData with CPU "
                        "transforms (or a torch-only CPU-transform dataset without torchvision)")
    p.add_argument("--workers", type=_non_negative_int, default=8, help="DataLoader workers per process (--data loader)")
    p.add_argument("--pin-memory", choices=("auto", "on", "off"), default="auto",
                   help="DataLoader pin_memory; auto = on with CUDA")
    p.add_argument("--loader-probe", choices=("on", "off"), default="on",
                   help="with --data loader: first time the DataLoader alone (no model) on every rank, so the "
                        "result says how many samples/s the input pipeline can feed")
    p.add_argument("--base-lr", type=float, default=0.1, help="learning rate at the reference batch")
    p.add_argument("--lr-scaling", choices=("linear", "sqrt", "none"), default="linear",
                   help="lr = base-lr x (global batch / reference batch), or x its square root")
    p.add_argument("--lr-reference-batch", type=_non_negative_int, default=0,
                   help="reference batch of --base-lr; 0 = the per-process batch (so linear = lr x world size)")
    p.add_argument("--nccl-debug", choices=("auto", "off"), default="auto",
                   help="auto: with NCCL and NCCL_DEBUG unset, log NCCL_DEBUG=INFO (INIT,NET) to a file per rank "
                        "and keep the transport lines in the result")
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


def scaled_lr(base_lr, rule, global_batch, reference_batch):
    """Learning rate under a scaling rule: linear (x global/reference), sqrt (x its root) or none."""
    ratio = float(global_batch) / float(reference_batch)
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    return base_lr


def resolve_settings(args, on_gpu, bf16_ok):
    """The effective precision, memory format and pin_memory for this device."""
    precision = args.precision
    if precision == "auto":
        precision = "bf16" if on_gpu and bf16_ok else "fp32"
    memory_format = args.memory_format
    if memory_format == "auto":
        memory_format = "channels_last" if on_gpu else "contiguous"
    pin = args.pin_memory == "on" or (args.pin_memory == "auto" and on_gpu)
    return precision, memory_format, pin


def seed_everything(torch, seed):
    """Seed Python's, NumPy's (when installed) and torch's (CPU and every CUDA device) RNGs."""
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed % (2 ** 32))
    except ImportError:
        pass
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def build_small_cnn(nn, num_classes):
    """Four stride-2 conv blocks + global pool + linear: a cheap CPU stand-in."""
    layers = []
    channels = (3, 32, 64, 128, 256)
    for c_in, c_out in zip(channels[:-1], channels[1:]):
        layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels[-1], num_classes)]
    return nn.Sequential(*layers)


def _torchvision_error():
    try:
        import torchvision  # noqa: F401  (lazy: only ResNet-50 and FakeData need it)
        return None
    except Exception as exc:  # ImportError, or a torchvision that does not match torch
        return "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")


def choose_model(requested, on_cuda):
    """Return (name, note, builder-or-None). builder None means small_cnn."""
    if requested in ("auto", "resnet50"):
        tv_error = _torchvision_error()
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


class CpuTransformDataset(object):
    """A torch-only stand-in for FakeData + CPU transforms (no torchvision needed).

    Per sample: a uint8 3 x S' x S' image (S' = 8/7 x S, seeded by index), a
    random resized crop (area 8-100 %, aspect 3/4-4/3) resized to S x S with
    bilinear interpolation, a random horizontal flip, scaling to [0, 1] and
    per-channel normalisation: the same kind of CPU work per image as
    torchvision's FakeData with RandomResizedCrop/Flip/ToTensor/Normalize.
    """

    def __init__(self, size, image_size, num_classes, seed):
        self.size = size
        self.image_size = image_size
        self.source_size = int(round(image_size * 8 / 7.0))
        self.num_classes = num_classes
        self.seed = seed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        import torch
        import torch.nn.functional as F
        gen = torch.Generator().manual_seed(self.seed * 1000003 + index)
        src = self.source_size
        image = torch.randint(0, 256, (3, src, src), dtype=torch.uint8, generator=gen)
        rand = torch.rand(4, generator=gen).tolist()
        area = (0.08 + 0.92 * rand[0]) * src * src
        aspect = math.exp(math.log(3 / 4.0) + (math.log(4 / 3.0) - math.log(3 / 4.0)) * rand[1])
        width = max(1, min(src, int(round(math.sqrt(area * aspect)))))
        height = max(1, min(src, int(round(math.sqrt(area / aspect)))))
        top = int(rand[2] * (src - height))
        left = int(rand[3] * (src - width))
        crop = image[:, top:top + height, left:left + width].float().unsqueeze(0)
        out = F.interpolate(crop, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)[0]
        if torch.rand(1, generator=gen).item() < 0.5:
            out = out.flip(-1)
        out = out / 255.0
        mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
        label = int(torch.randint(0, self.num_classes, (1,), generator=gen).item())
        return (out - mean) / std, label


def _seed_worker(worker_id):
    """DataLoader worker_init_fn: seed Python and NumPy from torch's per-worker seed."""
    import torch
    seed = torch.initial_seed() % (2 ** 32)
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass


def make_loader(torch, args, rank, world_size, pin):
    """(DataLoader, dataset name) for --data loader; the sampler splits the samples between ranks."""
    size = args.batch_size * (args.warmup_steps + args.steps) * world_size
    if _torchvision_error() is None:
        import torchvision
        from torchvision import transforms as T
        transform = T.Compose([T.RandomResizedCrop(args.image_size), T.RandomHorizontalFlip(), T.ToTensor(),
                               T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
        dataset = torchvision.datasets.FakeData(size=size, image_size=(3, args.image_size, args.image_size),
                                                num_classes=args.num_classes, transform=transform,
                                                random_offset=args.seed)
        name = FAKEDATA_NAME
    else:
        dataset = CpuTransformDataset(size, args.image_size, args.num_classes, args.seed)
        name = CPU_DATASET_NAME
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed,
                                 drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        pin_memory=pin, drop_last=True, worker_init_fn=_seed_worker,
                        generator=torch.Generator().manual_seed(args.seed + rank))
    return loader, name


SHM_PATH = "/dev/shm"
# DataLoader's default prefetch_factor: each worker keeps this many batches ready (torch.utils.data.DataLoader).
PREFETCH_FACTOR = 2


def loader_shm_bytes(batch_size, image_size, workers, processes_per_node, prefetch=PREFETCH_FACTOR):
    """Bytes of /dev/shm the DataLoaders of one node hold at once (0 without workers).

    A worker hands each batch to its process through shared memory (torch.multiprocessing): per process,
    ``workers x prefetch`` batches in flight plus the one being trained on; a batch is ``batch_size``
    float32 images of 3 x ``image_size`` x ``image_size`` and an int64 label each.
    """
    if workers <= 0:
        return 0
    batch = batch_size * (3 * image_size * image_size * 4 + 8)
    return processes_per_node * (workers * prefetch + 1) * batch


def shm_problem(needed, path=SHM_PATH, statvfs=os.statvfs):
    """A one-line problem when ``path`` has less than ``needed`` bytes free, else None (also without ``path``)."""
    if needed <= 0:
        return None
    try:
        st = statvfs(path)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= needed:
        return None
    mib = 1024.0 * 1024.0
    return ("the DataLoader needs about %.0f MiB of shared memory on this node but %s has %.0f MiB free (of %.0f MiB): "
            "its workers would die with 'unable to allocate shared memory(shm)', and the other nodes would then lose "
            "this rank. Fix: a larger %s (a container's --shm-size, e.g. 1g, or --ipc=host; local_cluster_shm_size "
            "for the local cluster), fewer workers (--workers, ddp_benchmark_workers) or a smaller batch or image size"
            % (needed / mib, path, free / mib, st.f_blocks * st.f_frsize / mib, path))


def measure_loader(loader, batches, clock=time.perf_counter):
    """Samples/s one rank's DataLoader delivers alone (no model, no collective).

    Iterates a fresh epoch of ``loader``: the first batch (worker start-up) is
    not timed, then up to ``batches`` batches are. The figure is what the
    input pipeline can feed this process; a training run that consumes close
    to it is input-bound (see ``input_verdict``).

    :returns: ``{"samples_per_s": float, "batches": int, "seconds": float}``;
        ``samples_per_s`` is None when the loader holds fewer than 2 batches.
    """
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(1)
    it = iter(loader)
    timed, samples, t0 = 0, 0, None
    try:
        for x, _y in it:
            if t0 is None:
                t0 = clock()
                continue
            samples += int(x.shape[0])
            timed += 1
            if timed >= batches:
                break
        seconds = clock() - t0 if t0 is not None else 0.0
    finally:
        del it  # stops this epoch's workers before training starts its own
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(0)
    rate = samples / seconds if timed and seconds > 0 else None
    return {"samples_per_s": rate, "batches": timed, "seconds": round(seconds, 6)}


# The input pipeline limits training when training consumes more than this share of what the
# DataLoader feeds alone (the loader also competes with the model for CPU while training).
# Our threshold, not a published one: below it the loader has over 25 % headroom.
INPUT_BOUND_SHARE = 0.8


def input_verdict(loader_samples_per_s, train_samples_per_s, share=INPUT_BOUND_SHARE):
    """(headroom, input_bound): loader samples/s / training samples/s, both per process.

    ``input_bound`` is True when training consumed at least ``share`` of what the
    loader alone delivers; (None, None) when either figure is missing or not positive.
    """
    if not loader_samples_per_s or not train_samples_per_s or loader_samples_per_s <= 0 or train_samples_per_s <= 0:
        return None, None
    headroom = loader_samples_per_s / train_samples_per_s
    return round(headroom, 4), bool(train_samples_per_s >= share * loader_samples_per_s)


def collect_env(environ):
    """NCCL_*, TORCH_NCCL_* and GLOO_* variables present, sorted by name."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENV_PREFIXES)}


def collect_launch_env(environ):
    """Other TORCH_*, TORCHELASTIC_*, HOROVOD_* variables, OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH."""
    return {k: environ[k] for k in sorted(environ)
            if (k.startswith(LAUNCH_ENV_PREFIXES) and not k.startswith(ENV_PREFIXES)) or k in LAUNCH_ENV_EXACT}


def collect_scheduler(environ):
    """``{"name": "slurm", "job_id", "nodelist", ...}`` inside a Slurm job, else None."""
    if not environ.get("SLURM_JOB_ID"):
        return None
    out = {"name": "slurm"}
    out.update({key: environ[name] for name, key in SLURM_ENV if environ.get(name)})
    return out


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


def runtime_versions():
    """Python, and torchvision / horovod when this process imported them."""
    out = {"python": "%d.%d.%d" % sys.version_info[:3], "torchvision": None, "horovod": None}
    for name in ("torchvision", "horovod"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = getattr(module, "__version__", None)
    return out


def setup_nccl_debug(environ, output, backend, mode):
    """With NCCL and NCCL_DEBUG unset, log INFO (INIT,NET) to a per-process file; return its path or None."""
    if backend != "nccl" or mode == "off" or environ.get("NCCL_DEBUG") or environ.get("NCCL_DEBUG_FILE"):
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(output)), ".ddp_bench.%d.nccl.log" % os.getpid())
    environ["NCCL_DEBUG"] = "INFO"
    environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
    environ["NCCL_DEBUG_FILE"] = path
    return path


def read_nccl_lines(path):
    """The transport lines of an NCCL debug file (at most NCCL_LINES_MAX), then remove the file."""
    if not path:
        return []
    try:
        with open(path, errors="replace") as fh:
            lines = [line.rstrip("\n") for line in fh if _NCCL_KEEP_RE.search(line)]
    except OSError:
        return []
    try:
        os.unlink(path)
    except OSError:
        pass
    return lines[:NCCL_LINES_MAX]


class TorchComm(object):
    """torch.distributed under torchrun: DDP wrapper, barrier, gather."""

    name = "torchrun"

    def __init__(self, torch, layout, backend, timeout_s):
        import torch.distributed as dist
        self.torch, self.dist, self.layout, self.backend = torch, dist, layout, backend
        self.timeout_s = timeout_s

    def init(self):
        self.dist.init_process_group(backend=self.backend, timeout=datetime.timedelta(seconds=self.timeout_s))

    def wrap(self, model, optimizer_fn, device_ids):
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp = DDP(model, device_ids=device_ids)
        return ddp, optimizer_fn(ddp.parameters())

    def barrier(self):
        self.dist.barrier()

    def gather(self, obj, device):
        return all_gather_objects(self.torch, self.dist, obj, device, self.layout["world_size"])

    def close(self):
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


class HorovodComm(object):
    """horovod.torch under horovodrun/mpirun: DistributedOptimizer, parameter broadcast, gather."""

    name = "horovod"

    def __init__(self, torch):
        try:
            import horovod.torch as hvd
        except Exception as exc:
            raise BenchError("--launcher horovod needs horovod.torch, which does not import: %s: %s"
                             % (type(exc).__name__, exc))
        self.torch, self.hvd = torch, hvd
        self.layout = None
        self.gathers = 0

    def init(self):
        self.hvd.init()
        hvd = self.hvd
        self.layout = {"rank": hvd.rank(), "local_rank": hvd.local_rank(), "world_size": hvd.size(),
                       "local_world_size": hvd.local_size(), "group_rank": hvd.cross_rank(), "master_port": 0}
        nccl = bool(getattr(hvd, "nccl_built", lambda: False)())
        self.backend = "horovod+%s" % ("nccl" if nccl and self.torch.cuda.is_available() else
                                       ("gloo" if hvd.gloo_enabled() else "mpi"))

    def wrap(self, model, optimizer_fn, device_ids):
        hvd = self.hvd
        optimizer = optimizer_fn(model.parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        return model, hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    def barrier(self):
        self.hvd.allreduce(self.torch.zeros(1), name="ddp_bench.barrier")

    def gather(self, obj, device):
        # An explicit name, the same on every rank: without one Horovod names the op after type(obj), and rank 0's
        # dict beside the other ranks' None would be two different collectives that never match (a hang).
        self.gathers += 1
        return self.hvd.allgather_object(obj, name="ddp_bench.gather.%d" % self.gathers)

    def close(self):
        self.hvd.shutdown()


def run(args, layout):
    """Initialise the process group, run the benchmark, return the result dict."""
    import torch
    from torch import nn

    cuda = torch.cuda.is_available()
    if args.launcher == "horovod":
        comm = HorovodComm(torch)
        backend = "nccl" if cuda and args.backend != "gloo" else "gloo"
    else:
        backend = args.backend if args.backend != "auto" else ("nccl" if cuda else "gloo")
        if backend == "nccl" and not cuda:
            raise BenchError("--backend nccl needs CUDA, but torch.cuda.is_available() is False (torch %s)"
                             % torch.__version__)
        comm = TorchComm(torch, layout, backend, args.init_timeout_s)
    nccl_log = setup_nccl_debug(os.environ, args.output, backend, args.nccl_debug)
    if args.data == "loader" and layout is not None:
        # Before any collective: a rank that cannot feed itself would leave its peers waiting on it.
        problem = shm_problem(loader_shm_bytes(args.batch_size, args.image_size, args.workers,
                                               layout["local_world_size"]))
        if problem:
            raise BenchError(problem)
    started_at = utc_now()
    comm.init()
    if args.launcher == "horovod":
        layout = comm.layout
        backend = comm.backend
    rank, local_rank, world_size = layout["rank"], layout["local_rank"], layout["world_size"]
    on_gpu = cuda and (backend == "nccl" or args.launcher == "horovod")
    try:
        if on_gpu:
            if local_rank >= torch.cuda.device_count():
                raise BenchError("LOCAL_RANK %d but only %d CUDA device(s) visible" % (local_rank, torch.cuda.device_count()))
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
            torch.backends.cudnn.benchmark = True
        else:
            device = torch.device("cpu")
        bf16_ok = bool(on_gpu and torch.cuda.is_bf16_supported())
        precision, memory_format, pin = resolve_settings(args, on_gpu, bf16_ok)
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        fmt = torch.channels_last if memory_format == "channels_last" else torch.contiguous_format

        model_name, model_note, builder = choose_model(args.model, on_gpu)
        seed_everything(torch, args.seed)
        model = builder(args.num_classes) if builder else build_small_cnn(nn, args.num_classes)
        model = model.to(device, memory_format=fmt)
        global_batch = args.batch_size * world_size
        reference = args.lr_reference_batch or args.batch_size
        lr = scaled_lr(args.base_lr, args.lr_scaling, global_batch, reference)
        ddp, optimizer = comm.wrap(model, lambda params: torch.optim.SGD(params, lr=lr, momentum=0.9),
                                   [local_rank] if on_gpu else None)
        if args.compile == "on":
            ddp = torch.compile(ddp, backend=args.compile_backend)
        loss_fn = nn.CrossEntropyLoss()
        scaler = None
        if precision == "fp16":
            scaler = torch.amp.GradScaler(device.type)

        loader_probe = None
        if args.data == "loader":
            loader, data_name = make_loader(torch, args, rank, world_size, pin)
            if args.loader_probe == "on":
                loader_probe = measure_loader(loader, args.steps)
            batches = iter(loader)
        else:
            data_name = "synthetic (one random batch, already on the device)"
            gen = torch.Generator().manual_seed(args.seed + rank)
            images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen)
            images = images.to(device).contiguous(memory_format=fmt)
            labels = torch.randint(0, args.num_classes, (args.batch_size,), generator=gen).to(device)

        def next_batch():
            if args.data != "loader":
                return images, labels
            x, y = next(batches)
            return (x.to(device, non_blocking=pin).contiguous(memory_format=fmt), y.to(device, non_blocking=pin))

        def step():
            x, y = next_batch()
            if args.launcher == "horovod":
                # hvd.DistributedOptimizer.zero_grad() takes no arguments (torch >= 2.0 then sets None anyway)
                optimizer.zero_grad()
            else:
                optimizer.zero_grad(set_to_none=True)
            if amp_dtype is not None:
                with torch.autocast(device_type=device.type, dtype=amp_dtype):
                    loss = loss_fn(ddp(x), y)
            else:
                loss = loss_fn(ddp(x), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()

        def sync():
            if on_gpu:
                torch.cuda.synchronize(device)

        ddp.train()
        w0 = time.perf_counter()
        for _warm in range(args.warmup_steps):
            step()
        sync()
        warmup_s = time.perf_counter() - w0
        comm.barrier()
        t0 = time.perf_counter()
        for _step in range(args.steps):
            step()
        sync()
        elapsed = time.perf_counter() - t0
        comm.barrier()

        mine = {
            "rank": rank,
            "local_rank": local_rank,
            "group_rank": layout["group_rank"],
            "local_world_size": layout["local_world_size"],
            "host": socket.gethostname(),
            "elapsed_s": elapsed,
            "warmup_s": warmup_s,
            "samples_per_s": args.batch_size * args.steps / elapsed,
            "step_time_mean_s": elapsed / args.steps,
            "cpu_threads": torch.get_num_threads(),
            "loader_samples_per_s": (loader_probe or {}).get("samples_per_s"),
            "nccl_lines": read_nccl_lines(nccl_log),
        }
        gathered = comm.gather(mine, device)

        result = None
        if rank == 0:
            settings = {
                "launcher": comm.name, "precision": precision, "memory_format": memory_format,
                "compile": args.compile if args.compile == "off" else "on (%s)" % args.compile_backend,
                "data": "synthetic" if args.data != "loader" else "loader", "data_note": data_name,
                "workers": args.workers if args.data == "loader" else 0,
                "pin_memory": pin if args.data == "loader" else False,
                "seed": args.seed, "base_lr": args.base_lr, "lr_scaling": args.lr_scaling,
                "lr_reference_batch": reference, "lr": round(lr, 8),
                "nccl_debug_capture": nccl_log is not None,
                "runtime_versions": runtime_versions(), "launch_env": collect_launch_env(os.environ),
                "scheduler": collect_scheduler(os.environ),
            }
            result = build_result(args, layout, gathered, model_name, model_note, backend,
                                  torch.cuda.get_device_name(device) if on_gpu else "cpu",
                                  torch_versions(torch), collect_env(os.environ), started_at, settings)
        # Every node writes rank 0's result, so the files are identical.
        result = comm.gather(result, device)[0]
        if local_rank == 0:
            write_json_atomic(args.output, result, prefix=".ddp_bench.")
        comm.barrier()
        return result
    finally:
        comm.close()


def loader_summary(gathered, train_samples_per_s_per_process):
    """The loader-only figures of a run (``--loader-probe``), or None when no rank measured one.

    DDP steps in lockstep, so the slowest rank's loader is what the run can be fed:
    ``samples_per_s_per_process`` is the minimum over ranks, ``per_host`` the sum of each
    node's ranks (samples/s). ``headroom`` and ``input_bound`` come from :func:`input_verdict`
    against the training samples/s per process.
    """
    rates = [(r["host"], r.get("loader_samples_per_s")) for r in gathered]
    if not rates or any(rate is None for _host, rate in rates):
        return None
    per_host = {}
    for host, rate in rates:
        per_host[host] = round(per_host.get(host, 0.0) + rate, 3)
    slowest = min(rate for _host, rate in rates)
    headroom, bound = input_verdict(slowest, train_samples_per_s_per_process)
    return {"samples_per_s_per_process": round(slowest, 3), "per_host": per_host, "headroom": headroom,
            "input_bound": bound, "input_bound_share": INPUT_BOUND_SHARE}


def build_result(args, layout, gathered, model_name, model_note, backend, device, versions, env, started_at,
                 settings=None):
    """Assemble the result dict (units: seconds, samples/s) from the gathered per-rank figures."""
    gathered = sorted(gathered, key=lambda r: r["rank"])
    world_size = layout["world_size"]
    slowest = max(r["elapsed_s"] for r in gathered)
    global_sps = world_size * args.batch_size * args.steps / slowest
    hosts = {}
    for r in gathered:
        hosts.setdefault(r["host"], []).append(r["rank"])
    nnodes = len({r["group_rank"] for r in gathered})
    result = {
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
        "warmup_s": round(max(r.get("warmup_s", 0.0) for r in gathered), 6),
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
                "loader_samples_per_s": None if r.get("loader_samples_per_s") is None
                else round(r["loader_samples_per_s"], 3),
            }
            for r in gathered
        ],
        "loader": loader_summary(gathered, global_sps / world_size),
        "nccl_debug": [{"rank": r["rank"], "host": r["host"], "lines": r.get("nccl_lines") or []}
                       for r in gathered if r.get("nccl_lines")],
        "versions": versions,
        "started_at": started_at,
        "finished_at": utc_now(),
        "env": env,
    }
    result.update(settings or {})
    return result


def main(argv=None):
    args = parse_args(argv)
    try:
        layout = None
        if args.launcher == "torchrun":
            layout = read_launch_env(os.environ)
            if args.legacy_local_rank is not None and str(layout["local_rank"]) != str(args.legacy_local_rank):
                print("%s: ignoring --local-rank=%s; LOCAL_RANK=%d from the environment wins"
                      % (PROG, args.legacy_local_rank, layout["local_rank"]), file=sys.stderr)
        run(args, layout)
    except BenchError as exc:
        print("%s: error: %s" % (PROG, exc), file=sys.stderr)
        return 2
    return 0


def exit_without_finalizing(code):
    """Flush stdout/stderr and end the process with ``code``, skipping interpreter finalisation.

    DDP's reducer keeps the Gloo process group alive after ``destroy_process_group`` (torch
    2.13: the ``pt_gloo_runloop`` threads are still there when ``main`` returns), so a worker
    thread may still be releasing the last collective's tensors while the interpreter finalises.
    That release needs the GIL, which a finalising interpreter no longer grants: ``terminate
    called without an active exception`` and SIGABRT after the result was written, seen here in
    about 1 run in 8 on a loaded 2-core machine (pytorch/pytorch PR 179291 describes the race).
    Every file this program writes is closed before this point.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_finalizing(main())
