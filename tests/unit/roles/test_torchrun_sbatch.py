"""roles/slurm/files/ddp-torchrun.sbatch: the torchrun command line it starts on each node.

The job script runs here under bash with stand-ins for Slurm's two commands on PATH (``scontrol`` answers the
allocation's node names and address, ``srun`` records its argv and exits 0). The cluster tests run it under real
Slurm; these cover how it builds torchrun's options from its settings, which the cluster tests do not vary.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "roles", "slurm", "files", "ddp-torchrun.sbatch")

SCONTROL = """#!/bin/sh
case "$1 $2" in
  "show hostnames") printf 'n1\\nn2\\n' ;;
  "show node") echo "NodeName=$3 NodeAddr=10.9.0.$(echo "$3" | tr -d n) State=IDLE" ;;
  "show job") echo "JobId=$SLURM_JOB_ID Requeue=0" ;;
  *) exit 1 ;;
esac
"""

# A step of a command other than torchrun (the shared-storage check's bash -c) runs here once per task.
SRUN = """#!%s
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SRUN_LOG"], "a", encoding="utf-8") as handle:
    handle.write(json.dumps(args) + "\\n")
if "bash" in args and "torchrun" not in args:
    tasks = int([a for a in args if a.startswith("--ntasks=")][0].split("=", 1)[1])
    for _ in range(tasks):
        subprocess.run(args[args.index("bash"):], check=True)
"""


def _executable(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def run_job(tmp_path, torchrun_args=None, **settings):
    """Run the job script on a two-node allocation; returns (completed process, torchrun argv per node)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "scontrol", SCONTROL)
    _executable(bin_dir / "srun", SRUN % sys.executable)
    log = tmp_path / "srun.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DDP_", "SLURM_"))}
    env.update(PATH="%s:%s" % (bin_dir, env.get("PATH", "/usr/bin:/bin")), SRUN_LOG=str(log),
               SLURM_JOB_ID="7", SLURM_JOB_NODELIST="n[1-2]", DDP_SLURM_JOB_CONF=str(tmp_path / "none.conf"),
               DDP_BIN_DIR="/opt/ddp/bin", **settings)
    if torchrun_args is not None:
        env["DDP_TORCHRUN_ARGS"] = torchrun_args
    done = subprocess.run(["bash", SCRIPT, "train.py", "--steps", "3"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    launches = [call[call.index("torchrun"):] for call in calls if "torchrun" in call]
    return done, launches


def rdzv_confs(argv):
    """Every --rdzv-conf value of a torchrun argv, in order."""
    return [arg.split("=", 1)[1] for arg in argv if arg.startswith(("--rdzv-conf=", "--rdzv_conf="))]


def parsed(conf):
    """A --rdzv-conf value as torch reads it (torch.distributed.elastic.rendezvous.utils: the last key wins)."""
    return dict(item.split("=", 1) for item in conf.split(","))


def test_one_torchrun_per_node_with_the_hang_timeout_for_join_and_store_reads(tmp_path):
    done, launches = run_job(tmp_path, DDP_HANG_TIMEOUT="300")
    assert done.returncode == 0, done.stderr
    assert len(launches) == 2
    for argv in launches:
        assert "--rdzv-endpoint=10.9.0.1:29400" in argv and "--rdzv-id=7" in argv
        assert argv[-3:] == ["train.py", "--steps", "3"]
        confs = rdzv_confs(argv)
        assert len(confs) == 1 and parsed(confs[0]) == {"join_timeout": "300", "read_timeout": "300"}


@pytest.mark.parametrize("given", ["--rdzv-conf=join_timeout=60 --max-restarts=1",
                                   "--max-restarts=1 --rdzv_conf join_timeout=60"])
def test_a_rdzv_conf_given_is_added_to_the_scripts_own(tmp_path, given):
    # torchrun keeps the last --rdzv-conf only: passed on as a second one, it would drop read_timeout to torch's 60 s
    # (a node starting over a minute after the first could not reach the store: "client socket has timed out").
    done, launches = run_job(tmp_path, given)
    assert done.returncode == 0, done.stderr
    for argv in launches:
        confs = rdzv_confs(argv)
        assert len(confs) == 1 and "--rdzv-conf" not in argv and "--rdzv_conf" not in argv
        assert parsed(confs[0]) == {"join_timeout": "60", "read_timeout": "600"}
        assert "--max-restarts=1" in argv


def test_the_shared_storage_check_overlaps_the_training_steps(tmp_path):
    # A plain step holds each node's CPUs and memory until the node reports its end: the training steps asked for
    # right after it are refused at first ("Requested nodes are busy") and start late, after the rendezvous gave up.
    done, launches = run_job(tmp_path, DDP_SHARED_DIR=str(tmp_path / "shared"))
    assert done.returncode == 0, done.stderr
    assert "shared: seen from every node" in done.stdout and len(launches) == 2
    calls = [json.loads(line) for line in (tmp_path / "srun.log").read_text(encoding="utf-8").splitlines()]
    check = calls[0]
    assert "bash" in check and "torchrun" not in check
    assert check[:2] == ["--overlap", "--mem=1M"] and "--nodes=2" in check


@pytest.mark.parametrize("given, named", [("--max-restarts=1 --rdzv-conf", "--rdzv-conf"),
                                          ("--rdzv_conf= --max-restarts=1", "--rdzv_conf")])
def test_a_rdzv_conf_without_its_value_is_refused_before_any_step(tmp_path, given, named):
    done, launches = run_job(tmp_path, given, DDP_SHARED_DIR=str(tmp_path / "shared"))
    assert done.returncode == 2 and launches == [] and not (tmp_path / "srun.log").exists()
    assert "DDP_TORCHRUN_ARGS has %s with no value" % named in done.stderr
