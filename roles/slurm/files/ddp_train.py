# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ddp_train.py: DDP training that checkpoints atomically and resumes, a start for your own training script.

Installed by ddp.cluster.slurm beside the job script (``/opt/ddp/bin``); runs under torchrun, which the job script
starts on every node of the allocation::

    sbatch -N 3 /opt/ddp/bin/ddp-torchrun.sbatch /opt/ddp/bin/ddp_train.py --steps 2000 --checkpoint-every 100

What it does, per process (torchrun's RANK, LOCAL_RANK, WORLD_SIZE in the environment):

* DDP on GPU (NCCL, one GPU per process, AMP with bf16 or fp16 and a GradScaler, channels_last) or on CPU (Gloo);
  the process group's timeout is ``--hang-timeout`` seconds (``$DDP_HANG_TIMEOUT``), so a collective that hangs
  (a frozen peer) ends with an error instead of waiting forever.
* Data through a DataLoader with a :class:`ResumableSampler`: synthetic samples (made from their index, the same on
  every run) or a folder of class sub-folders (``<class>/<name>.pt`` tensors, or images through torchvision when it
  is installed).
* Every ``--checkpoint-every`` steps, rank 0 writes one checkpoint file to ``--checkpoint-dir``
  (``$DDP_CHECKPOINT_DIR``, which the job script sets to a per-job folder on shared storage): the model, the
  optimizer, the GradScaler, the sampler's epoch and position (in samples of the epoch, so a run on another number
  of nodes goes on where this one stopped), every rank's RNG states and the step. The file is written under a
  temporary name, flushed to disk (fsync), then renamed (``os.replace``) to ``step-<step>.pt`` and the folder
  fsynced: a file under its final name is complete. A process killed half-way leaves only a ``.tmp`` file, which
  is never loaded (and is removed by the next save).
* On start, rank 0 picks the newest checkpoint that loads (a file that does not, e.g. truncated by a filesystem
  without atomic rename, is reported and skipped) and every rank loads it: training goes on from its step.
  The steps done before the restart but after that checkpoint (``progress.json``, written by rank 0 every step)
  are counted as replayed.

The last line of a run (rank 0) reads, e.g.::

    ddp_train: done: 200 steps, world size 3 (this run from step 100), 7 steps replayed since the last checkpoint
    (1 restart), 412.3 samples/s

Exit status: 0 done, 1 training failed (a collective timed out, a peer went away: the job script decides whether
to requeue), 2 bad arguments or data, before any training.

Python 3.8+, standard library + torch; torchvision only for image folders and ``--model resnet50``.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import io
import json
import os
import pickle
import random
import re
import socket
import sys
import time

PROG = "ddp_train"
CHECKPOINT_VERSION = 1
CHECKPOINT_RE = re.compile(r"^step-([0-9]{8,})\.pt$")
PROGRESS_FILE = "progress.json"
TMP_PREFIX = ".tmp-"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


class TrainError(Exception):
    """A problem with the arguments, the data or the checkpoints, found before training: exit status 2."""


# ---------------------------------------------------------------------------------------------------------------
# Arguments and settings


def _at_least(low, kind=int):
    """An argparse type: a number of ``kind`` that is ``low`` or more (greater than 0 for a float)."""
    def parse(text):
        value = kind(text)
        if value < low or (kind is float and value <= 0):
            raise argparse.ArgumentTypeError("%s is out of range (at least %s)" % (text, low))
        return value
    return parse


def parse_args(argv=None, environ=None):
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--steps", type=_at_least(1), default=1000, help="optimizer steps in all (default 1000)")
    parser.add_argument("--batch-size", type=_at_least(1), default=32, help="samples per process and step")
    parser.add_argument("--lr", type=_at_least(0, float), default=0.01, help="SGD learning rate (default 0.01)")
    parser.add_argument("--data", default="synthetic",
                        help="synthetic (default), or a folder of class sub-folders of .pt tensors or images")
    parser.add_argument("--synthetic-samples", type=_at_least(1), default=50000,
                        help="samples in the synthetic data set (one epoch)")
    parser.add_argument("--image-size", type=_at_least(1), default=32, help="synthetic images' side, pixels")
    parser.add_argument("--num-classes", type=_at_least(1), default=10, help="classes of the synthetic data")
    parser.add_argument("--model", choices=["auto", "small_cnn", "resnet50"], default="auto",
                        help="auto: resnet50 on GPU when torchvision is installed, else small_cnn")
    parser.add_argument("--amp", choices=["auto", "bf16", "fp16", "off"], default="auto",
                        help="mixed precision on GPU (auto: bf16 where supported, else fp16); off on CPU")
    parser.add_argument("--workers", type=_at_least(0), default=2, help="DataLoader workers per process")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the data order and of every RNG")
    parser.add_argument("--checkpoint-dir", default=environ.get("DDP_CHECKPOINT_DIR", ""),
                        help="where checkpoints go (default $DDP_CHECKPOINT_DIR; empty: no checkpoints)")
    parser.add_argument("--checkpoint-every", type=_at_least(1),
                        default=int(environ.get("DDP_CHECKPOINT_EVERY", "100") or 100),
                        help="steps between checkpoints (default $DDP_CHECKPOINT_EVERY or 100)")
    parser.add_argument("--keep", type=_at_least(1), default=2, help="complete checkpoints kept (default 2)")
    parser.add_argument("--hang-timeout", type=_at_least(0, float),
                        default=float(environ.get("DDP_HANG_TIMEOUT", "600") or 600),
                        help="seconds a collective may wait for its peers (default $DDP_HANG_TIMEOUT or 600)")
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="seconds to sleep after each step (slows a tiny model down to watch or test a restart)")
    parser.add_argument("--log-every", type=_at_least(1), default=10, help="steps between progress lines")
    return parser.parse_args(argv)


def read_launch_env(environ):
    """The rank layout torchrun sets: ``{rank, local_rank, world_size, local_world_size, restart}``."""
    missing = [k for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE") if k not in environ]
    if missing:
        raise TrainError("%s not set: start this program with torchrun (or the job script ddp-torchrun.sbatch)"
                         % ", ".join(missing))
    return {"rank": int(environ["RANK"]), "local_rank": int(environ["LOCAL_RANK"]),
            "world_size": int(environ["WORLD_SIZE"]),
            "local_world_size": int(environ.get("LOCAL_WORLD_SIZE", "1")),
            "restart": int(environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)}


def say(text, rank=0):
    """One line on stdout from rank 0 (every rank with rank=None), prefixed with the program and the time."""
    if rank is None or rank == 0:
        sys.stdout.write("%s: %s %s\n" % (PROG, datetime.datetime.now().strftime("%H:%M:%S"), text))
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints: pure file handling (no torch needed to find them)


def checkpoint_name(step):
    return "step-%08d.pt" % step


def list_checkpoints(folder):
    """[(step, path)] of the files under their final name in ``folder``, newest first (temporary files never)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        match = CHECKPOINT_RE.match(name)
        if match and os.path.isfile(os.path.join(folder, name)):
            found.append((int(match.group(1)), os.path.join(folder, name)))
    return sorted(found, reverse=True)


def _fsync_dir(folder):
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data):
    """Write ``data`` (bytes) to ``path`` all or nothing: temporary file in the same folder, fsync, rename, fsync.

    A reader (or a restart after a crash at any point) sees either the old state or the whole new file, never a
    part of it; the temporary file of a write that failed is removed before the error is raised.
    """
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, "%s%s.%d" % (TMP_PREFIX, os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def prune(folder, keep):
    """Remove all but the ``keep`` newest complete checkpoints and every leftover temporary file."""
    for _step, path in list_checkpoints(folder)[keep:]:
        os.unlink(path)
    for path in glob.glob(os.path.join(folder, TMP_PREFIX + "*")):
        os.unlink(path)


def read_progress(folder):
    """The last ``progress.json`` (``{"step", "time", "world_size"}``) or None."""
    try:
        with open(os.path.join(folder, PROGRESS_FILE)) as handle:
            data = json.load(handle)
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("step"), int) else None


def write_progress(folder, step, world_size, clock=time.time):
    write_atomic(os.path.join(folder, PROGRESS_FILE),
                 json.dumps({"step": step, "time": clock(), "world_size": world_size}).encode())


def replayed_steps(progress, checkpoint_step):
    """Steps done before the restart after the checkpoint it resumes from (0 without a progress record)."""
    if not progress:
        return 0
    return max(0, int(progress["step"]) - int(checkpoint_step))


# ---------------------------------------------------------------------------------------------------------------
# Data


class ResumableSampler(object):
    """The indices of one epoch for one rank, from a position given in samples of the whole epoch.

    Every epoch is one permutation of the data set, the same on every rank (seeded by ``seed + epoch``). A step
    takes ``batch_size * world_size`` consecutive indices of it: rank ``r`` gets every ``world_size``-th index from
    position + ``r``. The position is counted in samples of the epoch, not in steps of one rank, so a restart with
    another world size (fewer nodes after a loss) continues the same permutation where the last checkpoint left it.
    Only whole global batches are handed out (the tail of an epoch smaller than one is dropped).
    """

    def __init__(self, size, rank, world_size, batch_size, seed, epoch=0, position=0):
        self.size, self.rank, self.world_size, self.batch_size = size, rank, world_size, batch_size
        self.seed, self.epoch, self.position = seed, epoch, position

    @property
    def global_batch(self):
        return self.batch_size * self.world_size

    def steps_left(self):
        return max(0, (self.size - self.position) // self.global_batch)

    def indices(self):
        import torch  # the only torch use here: torch.randperm, the same on every platform for one seed
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.size, generator=generator).tolist()
        end = self.position + self.steps_left() * self.global_batch
        return order[self.position + self.rank:end:self.world_size]

    def __iter__(self):
        return iter(self.indices())

    def __len__(self):
        return self.steps_left() * self.batch_size

    def state(self):
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}


class SyntheticDataset(object):
    """Images made from their index (the same sample on every run and node): CHW float tensors and a class."""

    def __init__(self, size, image_size, num_classes, seed):
        self.size, self.image_size, self.num_classes, self.seed = size, image_size, num_classes, seed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        import torch
        generator = torch.Generator()
        generator.manual_seed(self.seed * 1000003 + index)
        image = torch.randn(3, self.image_size, self.image_size, generator=generator)
        return image, index % self.num_classes


class FolderDataset(object):
    """A folder of class sub-folders (sorted names are the classes 0..N-1), each sample one file.

    ``.pt`` files hold one CHW tensor (``torch.save``), loaded with ``weights_only=True``; image files are read with
    torchvision (``torchvision.io.read_image``, scaled to 0..1), which must then be installed.
    """

    def __init__(self, root):
        if not os.path.isdir(root):
            raise TrainError("--data %s: not a folder (give a folder of class sub-folders, or synthetic)" % root)
        self.classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.samples = []
        for label, name in enumerate(self.classes):
            for file_name in sorted(os.listdir(os.path.join(root, name))):
                if file_name.endswith(".pt") or file_name.lower().endswith(IMAGE_SUFFIXES):
                    self.samples.append((os.path.join(root, name, file_name), label))
        if not self.samples:
            raise TrainError("--data %s: no .pt or image files in class sub-folders" % root)
        if any(not p.endswith(".pt") for p, _label in self.samples):
            try:
                import torchvision  # noqa: F401  pylint: disable=unused-import
            except ImportError:
                raise TrainError("--data %s holds images, which need torchvision (not installed in this "
                                 "environment); save the samples as .pt tensors or install torchvision" % root)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        import torch
        path, label = self.samples[index]
        if path.endswith(".pt"):
            return torch.load(path, weights_only=True).float(), label
        from torchvision.io import read_image
        return read_image(path).float() / 255.0, label


def make_dataset(args):
    if args.data == "synthetic":
        return SyntheticDataset(args.synthetic_samples, args.image_size, args.num_classes, args.seed), \
            args.num_classes
    dataset = FolderDataset(args.data)
    return dataset, len(dataset.classes)


# ---------------------------------------------------------------------------------------------------------------
# Training


def build_model(torch, kind, num_classes, on_cuda):
    if kind == "auto":
        try:
            import torchvision  # noqa: F401  pylint: disable=unused-import
            kind = "resnet50" if on_cuda else "small_cnn"
        except ImportError:
            kind = "small_cnn"
    if kind == "resnet50":
        try:
            import torchvision
        except ImportError:
            raise TrainError("--model resnet50 needs torchvision, which is not installed in this environment")
        return torchvision.models.resnet50(num_classes=num_classes), kind
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, num_classes)), kind


def rng_state(torch, on_cuda):
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if on_cuda:
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(torch, state, on_cuda):
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if on_cuda and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"])


def seed_all(torch, seed):
    random.seed(seed)
    torch.manual_seed(seed)


def checkpoint_state(model, optimizer, scaler, sampler, step, rng_states, replayed, restarts, world_size):
    """The dict saved in a checkpoint (every field a resume needs)."""
    return {"version": CHECKPOINT_VERSION, "step": step, "model": model.state_dict(),
            "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
            "sampler": sampler.state(), "rng": rng_states, "replayed": replayed, "restarts": restarts,
            "world_size": world_size, "saved_at": time.time()}


def save_checkpoint(torch, folder, state, keep):
    """Write ``state`` as ``step-<step>.pt`` atomically (:func:`write_atomic`), then prune; returns the path."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path = os.path.join(folder, checkpoint_name(state["step"]))
    write_atomic(path, buffer.getvalue())
    prune(folder, keep)
    return path


def load_newest(torch, folder, warn=None):
    """The newest checkpoint in ``folder`` that loads: ``(path, state)``, or ``(None, None)`` when none does.

    Files that fail to load (truncated, not a checkpoint) are skipped with a warning: only complete checkpoints
    are ever used, whatever the filesystem did.
    """
    for _step, path in list_checkpoints(folder):
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
            if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION or "model" not in state:
                raise ValueError("not a checkpoint of this program (version %r)" % (
                    state.get("version") if isinstance(state, dict) else None))
        except Exception as exc:  # pylint: disable=broad-except
            # Any file that does not load is skipped, never used.
            if warn:
                warn("skipping %s: it does not load (%s: %s)" % (path, type(exc).__name__, exc))
            continue
        return path, state
    return None, None


def all_gather_bytes(torch, dist, raw, world_size, device, cap=1 << 16):
    """Every rank's ``raw`` bytes (at most ``cap``), in rank order, on every rank: one all_gather of a fixed-size
    buffer that starts with the length (8 bytes, big-endian). Needs only torch (``all_gather_object`` needs NumPy).
    """
    if len(raw) > cap:
        raise ValueError("%d bytes to gather, more than %d" % (len(raw), cap))
    data = torch.zeros(cap + 8, dtype=torch.uint8)
    data[:8 + len(raw)] = torch.frombuffer(bytearray(len(raw).to_bytes(8, "big") + raw), dtype=torch.uint8)
    data = data.to(device)
    out = [torch.empty_like(data) for _rank in range(world_size)]
    dist.all_gather(out, data)
    blobs = [bytes(t.cpu().tolist()) for t in out]
    return [blob[8:8 + int.from_bytes(blob[:8], "big")] for blob in blobs]


def train(args, launch, environ):
    import torch
    import torch.distributed as dist

    rank, world_size = launch["rank"], launch["world_size"]
    on_cuda = torch.cuda.is_available()
    device = torch.device("cuda", launch["local_rank"]) if on_cuda else torch.device("cpu")
    if on_cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if on_cuda else "gloo"
    timeout = datetime.timedelta(seconds=args.hang_timeout)
    dist.init_process_group(backend=backend, timeout=timeout)
    host = socket.gethostname().split(".")[0]
    hosts = [b.decode() for b in all_gather_bytes(torch, dist, host.encode(), world_size, device, cap=256)]
    say("world size %d (%s) on %s, %s; collectives time out after %.0f s%s" % (
        world_size, backend, ", ".join(sorted(set(hosts))), device.type, args.hang_timeout,
        " (torchrun restart %d)" % launch["restart"] if launch["restart"] else ""), rank)

    dataset, num_classes = make_dataset(args)
    seed_all(torch, args.seed + rank)
    model, model_kind = build_model(torch, args.model, num_classes, on_cuda)
    model = model.to(device)
    amp = "off"
    if on_cuda:
        model = model.to(memory_format=torch.channels_last)
        amp = args.amp if args.amp != "auto" else ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if on_cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    else:  # torch 2.1/2.2 (the reference stack): the CUDA one, a pass-through when disabled
        scaler = torch.cuda.amp.GradScaler(enabled=amp == "fp16")
    loss_fn = torch.nn.CrossEntropyLoss()

    folder = args.checkpoint_dir
    step, epoch, position, replayed, restarts = 0, 0, 0, 0, 0
    if folder:
        if rank == 0:
            os.makedirs(folder, exist_ok=True)
            path, state = load_newest(torch, folder, warn=lambda text: say("warning: " + text))
            chosen = path or ""
        else:
            chosen, state = "", None
        chosen = all_gather_bytes(torch, dist, chosen.encode(), world_size, device, cap=4096)[0].decode()
        if chosen:
            if not os.path.isfile(chosen):
                raise TrainError("rank %d on %s cannot see %s, which rank 0 found: the checkpoint folder is not on "
                                 "storage every node shares (set ddp_shared_dir, or DDP_CHECKPOINT_DIR)"
                                 % (rank, host, chosen))
            if state is None:  # rank 0 has it loaded already
                state = torch.load(chosen, map_location="cpu", weights_only=False)
            ddp.module.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            if state.get("scaler"):
                scaler.load_state_dict(state["scaler"])
            step = state["step"]
            epoch, position = state["sampler"]["epoch"], state["sampler"]["position"]
            rngs = state.get("rng") or []
            if rank < len(rngs):
                set_rng_state(torch, rngs[rank], on_cuda)
            else:  # more ranks than when it was saved: a seed of its own, from the step
                seed_all(torch, args.seed + rank + 7919 * step)
            progress = read_progress(folder) if rank == 0 else None
            now_replayed = replayed_steps(progress, step)
            replayed = state.get("replayed", 0) + now_replayed
            restarts = state.get("restarts", 0) + 1
            if rank == 0:
                lost = ""
                if progress:
                    lost = ", %.0f s after the last step before the restart (world size %s then)" % (
                        time.time() - progress["time"], progress.get("world_size", "?"))
                say("resumed from %s: step %d, epoch %d at sample %d; %d step(s) done after it are replayed%s" % (
                    chosen, step, epoch, position, now_replayed, lost))
        elif rank == 0:
            say("no checkpoint in %s: starting at step 0" % folder)
    elif rank == 0:
        say("warning: no checkpoint folder (--checkpoint-dir, DDP_CHECKPOINT_DIR): a restart starts from step 0")

    sampler = ResumableSampler(len(dataset), rank, world_size, args.batch_size, args.seed, epoch, position)
    if sampler.global_batch > len(dataset):
        raise TrainError("the data set has %d samples, fewer than one global batch (%d x %d processes)"
                         % (len(dataset), args.batch_size, world_size))
    start_step, started = step, time.perf_counter()
    say("training %s from step %d to %d, batch %d x %d processes, checkpoint every %d steps%s" % (
        model_kind, step, args.steps, args.batch_size, world_size, args.checkpoint_every,
        ", AMP %s, channels_last" % amp if on_cuda else ""), rank)
    ddp.train()
    while step < args.steps:
        if sampler.steps_left() == 0:
            sampler.epoch, sampler.position = sampler.epoch + 1, 0
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                                             num_workers=args.workers, pin_memory=on_cuda, drop_last=True,
                                             persistent_workers=False)
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            if on_cuda:
                images = images.contiguous(memory_format=torch.channels_last)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16,
                                enabled=amp != "off"):
                loss = loss_fn(ddp(images), labels)
            # A disabled GradScaler (CPU, bf16) passes the loss and the step through unchanged.
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            sampler.position += sampler.global_batch
            if folder and rank == 0:
                write_progress(folder, step, world_size)
            if step % args.log_every == 0:
                say("step %d/%d loss %.4f" % (step, args.steps, loss.item()), rank)
            if folder and (step % args.checkpoint_every == 0 or step == args.steps):
                rngs = [pickle.loads(b) for b in all_gather_bytes(
                    torch, dist, pickle.dumps(rng_state(torch, on_cuda)), world_size, device)]
                if rank == 0:
                    path = save_checkpoint(torch, folder, checkpoint_state(
                        ddp.module, optimizer, scaler, sampler, step, rngs, replayed, restarts, world_size),
                        args.keep)
                    say("checkpoint %s (step %d)" % (path, step))
            if args.step_delay > 0:
                time.sleep(args.step_delay)
            if step >= args.steps:
                break
    if on_cuda:
        torch.cuda.synchronize()
    dist.barrier()
    elapsed = time.perf_counter() - started
    samples = (step - start_step) * args.batch_size * world_size
    say("done: %d steps, world size %d (this run from step %d), %d steps replayed since the last checkpoint "
        "(%d restart%s), %.1f samples/s" % (step, world_size, start_step, replayed, restarts,
                                            "" if restarts == 1 else "s", samples / elapsed if elapsed else 0.0),
        rank)
    dist.destroy_process_group()


def main(argv=None, environ=None):
    environ = os.environ if environ is None else environ
    args = parse_args(argv, environ)
    try:
        launch = read_launch_env(environ)
        train(args, launch, environ)
    except TrainError as exc:
        sys.stderr.write("%s: %s\n" % (PROG, exc))
        return 2
    return 0


def exit_without_finalizing(code):
    """Flush stdout/stderr and end the process with ``code``, skipping interpreter finalisation.

    With Gloo, a ``pt_gloo_runloop`` worker thread may still be releasing the last all-reduce when ``main`` returns:
    DDP keeps the process group alive after ``destroy_process_group``, and the work holds the context torch's
    autograd engine stashed during ``backward()``. Releasing it needs the GIL, which a finalising interpreter no longer
    grants to other threads: ``terminate called without an active exception`` and SIGABRT after training ended
    (pytorch/pytorch#117762; measured here with torch 2.13 on 2 CPU processes: 11 aborts in 130 runs of the README's
    train.py without this exit, none in 40 with it). Every checkpoint this program writes is closed before this point.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_finalizing(main())
