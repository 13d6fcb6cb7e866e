"""benchmarks/callback_plugins/node_cpu.py: the nodes' CPU per task, from their cgroup counters (converge.sh)."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

from checkout_env import checkout_env

_PATH = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "callback_plugins" / "node_cpu.py"
_SPEC = importlib.util.spec_from_file_location("ddp_bench_node_cpu", _PATH)
node_cpu = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(node_cpu)


def test_parse_cgroups():
    assert node_cpu.parse_cgroups("a=/x/cpuacct.usage, b=/y/cpu.stat,") == {"a": "/x/cpuacct.usage", "b": "/y/cpu.stat"}
    assert node_cpu.parse_cgroups("") == {}


@pytest.mark.parametrize("spec", ["a", "=/x", "a=", "a=/x,b"])
def test_parse_cgroups_refuses(spec):
    with pytest.raises(ValueError, match="is not host=file"):
        node_cpu.parse_cgroups(spec)


def test_cpu_seconds_both_cgroup_versions():
    # cgroup v1 cpuacct.usage: nanoseconds; v2 cpu.stat: usage_usec among other lines (the kernel's cgroup-v2.rst)
    assert node_cpu.cpu_seconds("2500000000\n", "/c/cpuacct.usage") == 2.5
    assert node_cpu.cpu_seconds("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n", "/c/cpu.stat") == 1.5
    with pytest.raises(ValueError, match="no usage_usec"):
        node_cpu.cpu_seconds("user_usec 1\n", "/c/cpu.stat")


def _task(name):
    return types.SimpleNamespace(get_name=lambda: name)


def test_cpu_between_task_starts_goes_to_the_task(tmp_path, monkeypatch):
    one, two = tmp_path / "cpuacct.usage", tmp_path / "cpu.stat"
    one.write_text("0\n")
    two.write_text("usage_usec 0\n")
    out = tmp_path / "out.json"
    monkeypatch.setenv("DDP_NODE_CPU_CGROUPS", "n1=%s,n2=%s" % (one, two))
    monkeypatch.setenv("DDP_NODE_CPU_OUT", str(out))
    cb = node_cpu.CallbackModule()
    cb.v2_playbook_on_play_start(play=None)
    one.write_text("1000000000\n")          # before the first task: counted for nothing
    cb.v2_playbook_on_task_start(_task("role : read"), is_conditional=False)  # as ansible-core calls it
    one.write_text("1500000000\n")          # 0.5 s on n1
    two.write_text("usage_usec 250000\n")   # 0.25 s on n2
    cb.v2_playbook_on_task_start(_task("role : probe"), False)
    one.write_text("4500000000\n")          # 3 s
    cb.v2_playbook_on_handler_task_start(_task("role : read"))
    two.write_text("usage_usec 1250000\n")  # 1 s, the second run of "role : read"
    cb.v2_playbook_on_stats(stats=None)
    got = json.loads(out.read_text())
    assert got == {"tasks": [{"task": "role : probe", "cpu_s": 3.0, "ctl_cpu_s": 0.0, "runs": 1},
                             {"task": "role : read", "cpu_s": 1.75, "ctl_cpu_s": 0.0, "runs": 2}],
                   "total_s": 4.75, "ctl_total_s": 0.0}


def test_the_controllers_counter_per_task(tmp_path, monkeypatch):
    node, ctl = tmp_path / "node" / "cpuacct.usage", tmp_path / "ctl" / "cpu.stat"
    node.parent.mkdir()
    ctl.parent.mkdir()
    node.write_text("0\n")
    ctl.write_text("usage_usec 7000000\n")    # what the controller spent before the play: counted for nothing
    out = tmp_path / "out.json"
    monkeypatch.setenv("DDP_NODE_CPU_CGROUPS", "n1=%s" % node)
    monkeypatch.setenv("DDP_CTL_CPU_COUNTER", str(ctl))
    monkeypatch.setenv("DDP_NODE_CPU_OUT", str(out))
    cb = node_cpu.CallbackModule()
    cb.v2_playbook_on_play_start(None)
    cb.v2_playbook_on_task_start(_task("role : skipped"), False)
    ctl.write_text("usage_usec 7010000\n")    # 0.01 s on the controller, none on the node
    cb.v2_playbook_on_task_start(_task("role : read"), False)
    node.write_text("200000000\n")            # 0.2 s on the node
    ctl.write_text("usage_usec 7060000\n")    # 0.05 s on the controller
    cb.v2_playbook_on_stats(None)
    got = json.loads(out.read_text())
    assert got == {"tasks": [{"task": "role : read", "cpu_s": 0.2, "ctl_cpu_s": 0.05, "runs": 1},
                             {"task": "role : skipped", "cpu_s": 0.0, "ctl_cpu_s": 0.01, "runs": 1}],
                   "total_s": 0.2, "ctl_total_s": 0.06}


def test_a_node_gone_counts_nothing_more(tmp_path, monkeypatch):
    one = tmp_path / "cpuacct.usage"
    one.write_text("0\n")
    monkeypatch.setenv("DDP_NODE_CPU_CGROUPS", "n1=%s,n2=%s" % (one, tmp_path / "gone" / "cpuacct.usage"))
    monkeypatch.delenv("DDP_NODE_CPU_OUT", raising=False)
    cb = node_cpu.CallbackModule()
    cb.v2_playbook_on_task_start(_task("t"), False)
    one.write_text("2000000000\n")
    cb.v2_playbook_on_stats(None)          # no output file asked for: nothing written, no error
    assert node_cpu.ranked(cb._totals, cb._runs) == [{"task": "t", "cpu_s": 2.0, "ctl_cpu_s": 0.0, "runs": 1}]


def test_under_ansible_playbook(tmp_path):
    """ansible-core loads the callback and calls its hooks as it does in converge.sh (by keyword, where it does)."""
    counter = tmp_path / "cpuacct.usage"
    counter.write_text("0\n")
    out = tmp_path / "out.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- name: Two tasks\n"
        "  hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Spend 3 s of node CPU\n"
        "      ansible.builtin.copy:\n"
        "        content: \"3000000000\\n\"\n"
        "        dest: %s\n"
        "    - name: Spend nothing\n"
        "      ansible.builtin.debug:\n"
        "        msg: done\n" % counter)
    env = checkout_env(DDP_NODE_CPU_CGROUPS="localhost=%s" % counter, DDP_NODE_CPU_OUT=str(out),
                       ANSIBLE_CALLBACK_PLUGINS=str(_PATH.parent), ANSIBLE_CALLBACKS_ENABLED="node_cpu",
                       ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local",
                          "-i", "localhost,", "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Callback dispatch" not in run.stdout + run.stderr
    got = json.loads(out.read_text())
    assert got["tasks"][0] == {"task": "Spend 3 s of node CPU", "cpu_s": 3.0, "ctl_cpu_s": 0.0, "runs": 1}
    assert got["total_s"] == 3.0
