"""roles/nvidia_repo/tasks/epel.yml (EPEL for nvidia_repo and slurm): EPEL's release RPM given by URL (RHEL) is
installed only after EPEL's key matched its pinned fingerprint and was imported, and dnf checks the RPM's signature.

The task file runs on this machine over the local connection with stand-ins for ``rpm`` and ``dnf`` first on PATH
(they log their arguments; ``rpm -q`` answers from FAKE_RPM_INSTALLED), the key served over HTTP from a fixture.
The collection is the checkout's (tests/checkout_env.py).
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from checkout_env import checkout_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "openpgp")
KEY_FILE = "rsa3072_with-subkey__gpg-2.2.40-generated.asc"
KEY_FPR = "705F89B80E216C918A61FEEB3AFC6204F0283F57"      # its .show-keys-colons.txt
EPEL9_FPR = "FF8AD1344597106ECE813B918A3872BF3228467C"
PLAYBOOK = """
- hosts: localhost
  gather_facts: true
  gather_subset: [min]
  tasks:
    - ansible.builtin.include_role:
        name: ddp.cluster.nvidia_repo
        tasks_from: epel.yml
      vars:
        __nvidia_repo_epel_in: "{{ epel_in }}"
"""
FAKE_RPM = """#!/bin/sh
echo "rpm $*" >> "$FAKE_LOG"
if [ "$1" = "-q" ]; then
  for name in $FAKE_RPM_INSTALLED; do [ "$name" = "$2" ] && exit 0; done
  exit 1
fi
exit 0
"""
FAKE_DNF = """#!/bin/sh
echo "dnf $*" >> "$FAKE_LOG"
exit 0
"""


@pytest.fixture(scope="module")
def key_server():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=FIXTURES)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d/" % server.server_address[1]
    server.shutdown()


def converge(tmp_path, epel_in, installed=""):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in (("rpm", FAKE_RPM), ("dnf", FAKE_DNF)):
        path = bindir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    log = tmp_path / "calls.log"
    log.write_text("")
    env = checkout_env(PATH="%s:%s:%s" % (bindir, os.path.dirname(sys.executable), os.environ["PATH"]),
                       FAKE_LOG=str(log), FAKE_RPM_INSTALLED=installed, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
                       ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", json.dumps({"epel_in": epel_in}),
         str(tmp_path / "play.yml")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc, log.read_text().splitlines()


def epel_in(tmp_path, **kw):
    out = {"package": "https://mirror.invalid/epel/epel-release-latest-9.noarch.rpm", "key_url": "",
           "fingerprint": "", "variable": "slurm_epel_gpg_key_fingerprint", "role": "slurm",
           "key_path": str(tmp_path / "RPM-GPG-KEY-ddp-epel")}
    out.update(kw)
    return out


def test_pinned_key_is_imported_before_the_rpm_and_dnf_checks_its_signature(tmp_path, key_server):
    spec = epel_in(tmp_path, key_url=key_server + KEY_FILE, fingerprint=KEY_FPR)
    proc, calls = converge(tmp_path, spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(FIXTURES, KEY_FILE)) as handle:
        assert (tmp_path / "RPM-GPG-KEY-ddp-epel").read_text() == handle.read()
    assert calls == [
        "rpm -q epel-release",
        "rpm -q gpg-pubkey-f0283f57",
        "rpm --import %s" % spec["key_path"],
        "dnf -y --setopt=localpkg_gpgcheck=True install %s" % spec["package"],
    ]


def test_a_key_that_is_not_the_pinned_one_is_refused_before_anything_is_trusted(tmp_path, key_server):
    spec = epel_in(tmp_path, key_url=key_server + KEY_FILE, fingerprint=EPEL9_FPR)
    proc, calls = converge(tmp_path, spec)
    assert proc.returncode != 0
    assert "[EPEL_KEY_FINGERPRINT] slurm_epel_gpg_key_fingerprint:" in proc.stdout
    assert "slurm refused" in proc.stdout and KEY_FPR in proc.stdout
    assert calls == ["rpm -q epel-release"]
    assert not (tmp_path / "RPM-GPG-KEY-ddp-epel").exists()


def test_an_el_major_without_a_pinned_key_is_refused_when_none_is_given(tmp_path):
    # This machine is not EL 8 or 9: no published key applies, so nothing may be fetched or installed.
    proc, calls = converge(tmp_path, epel_in(tmp_path, variable="nvidia_repo_epel_gpg_key_fingerprint",
                                             role="nvidia_repo"))
    assert proc.returncode != 0
    assert "[EPEL_KEY_FINGERPRINT] nvidia_repo_epel_gpg_key_fingerprint:" in proc.stdout
    assert "nvidia_repo_epel_gpg_key_url" in proc.stdout
    assert calls == ["rpm -q epel-release"]


def test_nothing_is_fetched_when_epel_is_installed(tmp_path):
    proc, calls = converge(tmp_path, epel_in(tmp_path, key_url="http://127.0.0.1:9/unreachable"),
                           installed="epel-release")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == ["rpm -q epel-release"]


def test_a_package_name_comes_from_the_distribution_without_a_key(tmp_path):
    proc, calls = converge(tmp_path, epel_in(tmp_path, package="epel-release"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == ["rpm -q epel-release", "dnf -y install epel-release"]
