"""ddp_bench.py's Slurm provenance (pure; importing the script needs no torch)."""
from __future__ import annotations

from role_files import load

ddp_bench = load("ddp_benchmark", "ddp_bench.py")


def test_slurm_job_is_recorded():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "ddp-node[1-3]", "SLURM_JOB_NUM_NODES": "3",
           "SLURM_JOB_PARTITION": "ddp", "SLURM_CLUSTER_NAME": "ddp", "SLURM_PROCID": "0"}
    assert ddp_bench.collect_scheduler(env) == {"name": "slurm", "job_id": "7", "nodelist": "ddp-node[1-3]",
                                                "nodes": "3", "partition": "ddp", "cluster": "ddp"}


def test_no_scheduler_outside_slurm():
    assert ddp_bench.collect_scheduler({"TORCHELASTIC_RUN_ID": "x"}) is None
