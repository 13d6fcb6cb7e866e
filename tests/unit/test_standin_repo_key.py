"""The Molecule gpu_stack scenario pins the stand-in repository's key: tests/standin_repo/build_repo.py writes
the fingerprint gpg shows into ddp-standin.fpr, and molecule/gpu_stack/converge.yml sets
nvidia_repo_key_fingerprint from it. This builds the repositories for real (gpg, dpkg-deb) and checks that
the role's own fingerprint check (module_utils/system/openpgp.py) accepts the served key with that pin."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.system import openpgp

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "standin_repo", "build_repo.py")
CONVERGE = os.path.join(HERE, "..", "..", "molecule", "gpu_stack", "converge.yml")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    missing = [tool for tool in ("gpg", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        pytest.skip("build_repo.py needs %s (apt-get install gnupg dpkg)" % ", ".join(missing))
    out = tmp_path_factory.mktemp("standin")
    subprocess.run([sys.executable, BUILD, str(out), "--kernel-release", "6.1.0-test"], check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return out


@pytest.mark.parametrize("sub", ["nvidia/debian12/x86_64", "kernel"])
def test_fpr_file_pins_the_served_key(repo, sub):
    with open(os.path.join(str(repo), sub, "ddp-standin.asc"), encoding="ascii") as fh:
        key = fh.read()
    with open(os.path.join(str(repo), sub, "ddp-standin.fpr"), encoding="ascii") as fh:
        pinned = fh.read().strip()
    assert openpgp.fingerprint_format_problem(pinned) is None
    assert openpgp.key_fingerprints(key) == [pinned]
    assert openpgp.pin_problems(key, pinned, "nvidia_repo_key_fingerprint", "stand-in", "NVIDIA_REPO_KEY_FINGERPRINT") == []


def test_nvidia_default_fingerprint_refuses_the_stand_in_key(repo):
    """Without the scenario's pin the role would refuse the stand-in key: the check is not a formality."""
    with open(os.path.join(str(repo), "nvidia/debian12/x86_64/ddp-standin.asc"), encoding="ascii") as fh:
        key = fh.read()
    problems = openpgp.pin_problems(key, "EB693B3035CD5710E231E123A4B469963BF863CC", "nvidia_repo_key_fingerprint",
                                    "stand-in", "NVIDIA_REPO_KEY_FINGERPRINT")
    assert [p["code"] for p in problems] == ["NVIDIA_REPO_KEY_FINGERPRINT"]


def test_converge_reads_the_fpr_file_the_builder_writes():
    with open(CONVERGE, encoding="utf-8") as fh:
        text = fh.read()
    assert "nvidia_repo_key_fingerprint:" in text
    assert ".cache/standin_repo/nvidia/debian12/x86_64/ddp-standin.fpr" in text
