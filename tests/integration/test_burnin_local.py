"""Run the burn-in program (roles/pytorch_env/files/ddp_burnin.py) for real on the controller's CPU torch."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not importable in this interpreter; the burn-in test needs it")

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "roles", "pytorch_env", "files", "ddp_burnin.py")


def burn(*options):
    proc = subprocess.run([sys.executable, SCRIPT] + list(options), capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cpu_burnin_shape_and_bit_exact_repeat():
    first = burn("--seconds", "1", "--size", "256", "--device", "cpu")
    again = burn("--seconds", "0.5", "--size", "256", "--device", "cpu")
    assert (first["device_type"], first["dtype"], first["size"]) == ("cpu", "fp32", 256)
    (device,) = first["devices"]
    assert device["products"] > 0 and device["tflops"] > 0 and device["seconds"] >= 1.0
    assert len(device["digest"]) == 64
    # The same fixed inputs give the same product, bit for bit, whatever the time spent.
    assert again["devices"][0]["digest"] == device["digest"]
    other = burn("--seconds", "0.2", "--size", "128", "--device", "cpu")
    assert other["devices"][0]["digest"] != device["digest"]


def test_bad_option_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, SCRIPT, "--seconds", "-1"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 2 and "--seconds must be greater than 0" in proc.stderr
