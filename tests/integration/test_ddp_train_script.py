"""Run roles/slurm/files/ddp_train.py for real under torchrun: CPU processes, Gloo, a checkpoint folder.

- a run saves a checkpoint every K steps and ends with the line of steps, replays and throughput;
- the process that saves dies half-way through writing a checkpoint (its write() stops after half the bytes and
  the process exits at once, as a node that loses power): the half-written file is never loaded, the next run
  (with another world size, as after losing a node) resumes from the checkpoint before it, replays at most K
  steps and finishes;
  (a newer file under a final name that does not load, truncated as a filesystem without atomic rename could
  leave it, is skipped too);
- the sampler's position survives a change of world size: no sample of the epoch is seen twice or skipped;
- a frozen rank (SIGSTOP) ends the run within the hang timeout instead of hanging.

Needs torch in the interpreter running pytest (make controller-torch; skipped otherwise). Tiny sizes keep it to
about a minute on 2 cores.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable in this interpreter; the training test needs it")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "roles", "slurm", "files", "ddp_train.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "roles"))
from role_files import load  # noqa: E402

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "DDP_CHECKPOINT_DIR",
                 "DDP_HANG_TIMEOUT")
SMALL = ["--batch-size", "4", "--synthetic-samples", "96", "--image-size", "8", "--workers", "0", "--log-every", "5"]

# Runs ddp_train.main() with the module's open() replaced for the checkpoint of step 15: the unit tests' DiesHalfWay
# puts half its bytes down, flushes them to disk and here ends the process at once (os._exit: no cleanup, as a node
# losing power).
CRASH_DRIVER = '''
import builtins, os, sys
sys.path.insert(0, %(unit_dir)r)
from role_files import load
from test_ddp_train import DiesHalfWay

class DiesHere(DiesHalfWay):
    def stop(self):
        os._exit(137)

def crashing_open(path, mode="r", *args, **kwargs):
    if "step-00000015" in os.path.basename(path) and "w" in mode:
        return DiesHere(path, mode)
    return builtins.open(path, mode, *args, **kwargs)

train = load("slurm", "ddp_train.py")
train.open = crashing_open
sys.exit(train.main())
'''


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def torchrun(nproc, program, args, timeout=180, env=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           program] + list(args)
    start = time.time()
    proc = subprocess.run(cmd, env=env or _env(), capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout + proc.stderr, time.time() - start


def done_line(out):
    found = re.findall(r"done: (\d+) steps, world size (\d+) \(this run from step (\d+)\), (\d+) steps replayed "
                       r"since the last checkpoint \((\d+) restarts?\), ([0-9.]+) samples/s", out)
    assert found, out[-3000:]
    return tuple(int(x) for x in found[-1][:5]) + (float(found[-1][5]),)


def test_crash_while_saving_resumes_from_the_checkpoint_before(tmp_path):
    ckpt = tmp_path / "ckpt"
    driver = tmp_path / "crash_driver.py"
    driver.write_text(CRASH_DRIVER % {"unit_dir": os.path.join(ROOT, "tests", "unit", "roles")})
    args = ["--steps", "20", "--checkpoint-every", "5", "--checkpoint-dir", str(ckpt)] + SMALL

    rc, out, _elapsed = torchrun(2, str(driver), args)
    assert rc != 0, out[-3000:]
    names = sorted(os.listdir(str(ckpt)))
    # The complete checkpoints of steps 5 and 10, the half-written one under its temporary name only.
    assert [n for n in names if n.startswith("step-")] == ["step-00000005.pt", "step-00000010.pt"], names
    half = [n for n in names if n.startswith(".tmp-step-00000015.pt")]
    assert len(half) == 1 and 0 < os.path.getsize(str(ckpt / half[0])), names

    # And a newer file under a final name that does not load (truncated, as a filesystem without atomic rename
    # could leave it): skipped with a warning.
    good = (ckpt / "step-00000010.pt").read_bytes()
    (ckpt / "step-00000013.pt").write_bytes(good[: len(good) // 3])

    # Restart on 3 processes (a world size of its own, as a job requeued onto other nodes).
    rc, out, _elapsed = torchrun(3, SCRIPT, args)
    assert rc == 0, out[-3000:]
    assert "skipping %s: it does not load" % (ckpt / "step-00000013.pt") in out, out[-3000:]
    assert "resumed from %s: step 10" % (ckpt / "step-00000010.pt") in out, out[-3000:]
    assert "5 step(s) done after it are replayed" in out, out[-3000:]
    steps, world, start, replayed, restarts, rate = done_line(out)
    assert (steps, world, start, replayed, restarts) == (20, 3, 10, 5, 1)
    assert replayed <= 5 and rate > 0
    # The leftover temporary file went with the next save; the two newest checkpoints are kept (13 < 15, 20).
    assert sorted(n for n in os.listdir(str(ckpt)) if n != "progress.json") == ["step-00000015.pt", "step-00000020.pt"]


def test_sampler_position_survives_another_world_size():
    train = load("slurm", "ddp_train.py")
    size, batch = 50, 2
    seen = []
    first = [train.ResumableSampler(size, r, 3, batch, seed=7, epoch=4) for r in range(3)]
    steps_before = 4
    for sampler in first:
        seen += sampler.indices()[: steps_before * batch]
    position = steps_before * first[0].global_batch
    second = [train.ResumableSampler(size, r, 2, batch, seed=7, epoch=4, position=position) for r in range(2)]
    for sampler in second:
        seen += sampler.indices()
    assert len(seen) == len(set(seen)), "a sample was seen twice in one epoch"
    # Every sample but the tail that does not fill one global batch of the second world (50 - 24 = 26 = 6 x 4 + 2).
    assert len(seen) == 24 + 24 and second[0].steps_left() == 6
    # The same permutation as one run on one process would have gone through.
    whole = train.ResumableSampler(size, 0, 1, 1, seed=7, epoch=4).indices()
    assert set(seen) == set(whole[:48])


def test_a_frozen_rank_ends_the_run_within_the_hang_timeout(tmp_path):
    hang = 10
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", SCRIPT,
           "--steps", "100000", "--checkpoint-every", "1000", "--hang-timeout", str(hang),
           "--step-delay", "0.05"] + SMALL
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "step 10/" in line:
                break
        workers = subprocess.run(["pgrep", "-f", "-P", str(proc.pid), SCRIPT], capture_output=True, text=True,
                                 check=False).stdout.split()
        assert len(workers) == 2, "".join(lines)
        frozen = int(workers[-1])
        os.kill(frozen, signal.SIGSTOP)
        stopped = time.time()
        rest = proc.communicate(timeout=hang + 60)[0]
        took = time.time() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in subprocess.run(["pgrep", "-f", SCRIPT], capture_output=True, text=True,
                                  check=False).stdout.split():
            if "--hang-timeout" in open("/proc/%s/cmdline" % pid).read().replace("\0", " "):
                os.kill(int(pid), signal.SIGKILL)
    out = "".join(lines) + rest
    assert proc.returncode != 0, out[-3000:]
    # The survivor's collective timed out after the hang timeout; torchrun then stopped the frozen worker.
    assert took < hang + 45, (took, out[-3000:])
    assert re.search(r"[Tt]imed out|timeout|Timeout", out), out[-3000:]
