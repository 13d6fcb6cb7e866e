"""diagnose_output through main(): a text or a file on the node, read by the same readers as ddp-health --diagnose."""
from __future__ import annotations

import json
import os

import pytest

from module_args import patch_module_args
from ansible_collections.ddp.cluster.plugins.modules import diagnose_output

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures")


def run_main(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            diagnose_output.main()
    return json.loads(capsys.readouterr().out)


def test_a_log_file_on_the_node(capsys):
    src = os.path.join(FIXTURES, "slurm", "slurmctld_log_munge-expired-credential_clock-skew__ansible-slurm-appliance-114.txt")
    out = run_main(capsys, {"src": src, "fail_on": "never"})
    assert out["kind"] == "slurm_log" and out["verdict"] == "FAIL" and out["errors"] == ["SLURM_MUNGE_CLOCK_SKEW"]
    assert out["healthy"] is False and out["changed"] is False and "failed" not in out


def test_text_fails_the_task_on_an_error(capsys):
    with open(os.path.join(FIXTURES, "runtime", "gloo_recv_timeout_unbound_buffer__gloo-511.txt")) as handle:
        text = handle.read()
    out = run_main(capsys, {"text": text})
    assert out["failed"] is True and "[GLOO_TIMEOUT]" in out["msg"] and out["kind"] == "training_log"


def test_a_healthy_text_and_a_missing_file(capsys):
    with open(os.path.join(FIXTURES, "rdma", "ibstat_2xConnectX3-mlx4_FDR56_all-Active__Heioy-Books.txt")) as handle:
        out = run_main(capsys, {"text": handle.read(), "kind": "ibstat"})
    assert out["verdict"] == "PASS" and out["problems"] == [] and len(out["facts"]["ports"]) == 4
    out = run_main(capsys, {"src": "/nonexistent/slurmctld.log"})
    assert out["failed"] is True and "cannot read /nonexistent/slurmctld.log" in out["msg"]
