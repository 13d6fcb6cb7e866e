"""roles/net_tuning on this machine (local connection): with keys whose wanted values are the kernel's current ones,
the first run only writes the sysctl file, the second changes nothing and makes no per-key call
(module_utils/system/sysctl_plan.py). The kernel's values are never written: every wanted value is the current one.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from checkout_env import checkout_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.dirname(sys.executable)
KEYS = ("net.ipv4.tcp_congestion_control", "net.core.somaxconn")
PLAYBOOK = """
- hosts: localhost
  gather_facts: true
  roles:
    - role: ddp.cluster.net_tuning
"""


def _current(key):
    with open("/proc/sys/" + key.replace(".", "/")) as handle:
        return " ".join(handle.read().split())


def _play(tmp, extra):
    env = checkout_env(PATH="%s:%s" % (BIN, os.environ["PATH"]), ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"),
                       ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e",
                           json.dumps(extra), str(tmp / "play.yml")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def _changed(proc):
    found = re.search(r"localhost\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", proc.stdout)
    assert found, proc.stdout + proc.stderr
    return int(found.group(1))


def test_second_run_changes_nothing_and_calls_no_per_key_module(tmp_path):
    wanted = {key: _current(key) for key in KEYS}
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    extra = {"net_tuning_sysctls": wanted, "net_tuning_sysctl_file": str(tmp_path / "90-test.conf"),
             "net_tuning_modules": [], "net_tuning_unsettable": "report", "ansible_python_interpreter": sys.executable}
    first = _play(tmp_path, extra)
    assert _changed(first) == 1, first.stdout  # the one task that wrote the two file lines
    written = (tmp_path / "90-test.conf").read_text().splitlines()
    assert written == ["%s=%s" % (key, wanted[key]) for key in KEYS]
    second = _play(tmp_path, extra)
    assert _changed(second) == 0, second.stdout
    # write.yml is not included: its per-key task does not even show up as skipped items
    assert "Write the keys the file lacks" not in second.stdout, second.stdout
    block = second.stdout.split("Persist the kernel modules and write the keys")[1].split("TASK [")[0]
    assert "skipping: [localhost]" in block and "item=" not in block, block
    assert {key: _current(key) for key in KEYS} == wanted
