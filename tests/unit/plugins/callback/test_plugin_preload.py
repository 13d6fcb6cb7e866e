"""ddp.cluster.plugin_preload: the hosts' connection, shell and become plugins loaded once, in the main process."""
from __future__ import annotations

import types

import pytest

from ansible_collections.ddp.cluster.plugins.callback.plugin_preload import (
    CallbackModule, host_inventory_var, plugins_for)
from tests.wrapped_playbook import THREE_TASKS, run


def _host(own, *groups):
    return types.SimpleNamespace(vars=own, get_groups=lambda: [types.SimpleNamespace(vars=g) for g in groups])


def test_host_var_before_groups_and_deeper_group_first():
    assert host_inventory_var(_host({"ansible_connection": "local"}, {"ansible_connection": "ssh"}),
                              "ansible_connection") == "local"
    # get_groups() lists 'all' first, then deeper groups: the last one that sets it wins
    assert host_inventory_var(_host({}, {"ansible_connection": "ssh"}, {"ansible_connection": "podman"}),
                              "ansible_connection") == "podman"
    assert host_inventory_var(_host({}, {}, {"x": 1}), "ansible_connection") is None
    assert host_inventory_var(_host(None), "ansible_shell_type") is None


_SSH = [("connection", "ssh"), ("connection", "ansible.builtin.ssh")]
_SH = [("shell", "sh"), ("shell", "ansible.builtin.sh")]
_SUDO = [("become", "sudo"), ("become", "ansible.builtin.sudo")]


def test_every_candidate_once_under_both_names():
    assert plugins_for("ssh", "containers.podman.podman", None, None, "ssh", "sudo") == [
        ("connection", "containers.podman.podman")] + _SSH + _SH + _SUDO
    assert plugins_for("ansible.legacy.local", "ansible.builtin.ssh", "bash", "su", "ssh", "sudo") == [
        ("connection", "ansible.builtin.ssh"), ("connection", "ssh"),
        ("connection", "ansible.legacy.local"), ("connection", "local"),
        ("shell", "bash"), ("shell", "ansible.builtin.bash")] + _SH + [
        ("become", "su"), ("become", "ansible.builtin.su")] + _SUDO


@pytest.mark.parametrize("value", ["{{ conn }}", "{% if a %}ssh{% endif %}", "", "  ", None, 3, ["ssh"]])
def test_templates_and_non_names_are_left_to_the_worker(value):
    assert plugins_for(value, value, value, value, "ssh", "sudo") == _SSH + _SH + _SUDO


def test_smart_is_ssh():
    assert plugins_for(None, "smart", None, None, "smart", None) == _SSH + _SH


class _Loader:
    def __init__(self, fail=()):
        self.got, self.fail = [], set(fail)

    def get(self, name, class_only=False):
        assert class_only
        self.got.append(name)
        if name in self.fail:
            raise ValueError("no plugin %s" % name)


class _Display:
    def __init__(self):
        self.lines = []

    def vvv(self, msg):
        self.lines.append(msg)


def test_each_plugin_loaded_once_and_a_failure_only_noted(monkeypatch):
    callback = CallbackModule.__new__(CallbackModule)
    callback._tried = set()
    callback._display = _Display()
    loaders = {"connection": _Loader(fail={"nosuch", "ansible.builtin.nosuch"}), "shell": _Loader(),
               "become": _Loader()}
    monkeypatch.setattr(CallbackModule, "_LOADERS", loaders)
    task = types.SimpleNamespace(connection="ssh", become_method="sudo")
    for host in (_host({"ansible_connection": "nosuch"}), _host({}), _host({"ansible_connection": "nosuch"})):
        callback.v2_runner_on_start(host, task)
    assert loaders["connection"].got == ["nosuch", "ansible.builtin.nosuch", "ssh", "ansible.builtin.ssh"]
    assert loaders["shell"].got == ["sh", "ansible.builtin.sh"]
    assert loaders["become"].got == ["sudo", "ansible.builtin.sudo"]
    assert callback._display.lines == [
        "plugin_preload: connection plugin %s not preloaded: no plugin %s" % (name, name)
        for name in ("nosuch", "ansible.builtin.nosuch")]


_WRAPPER = """\
import os
import sys

from ansible import constants as C

_parse = C.config.initialize_plugin_configuration_definitions


def _logged(plugin_type, name, defs):
    with open(os.environ["PRELOAD_TEST_LOG"], "a") as log:
        log.write("%d %s/%s\\n" % (os.getpid(), plugin_type, name))
    return _parse(plugin_type, name, defs)


C.config.initialize_plugin_configuration_definitions = _logged
from ansible.cli.playbook import main  # noqa: E402

sys.exit(main())
"""


def _config_def_loads(tmp_path, callbacks):
    """Run the play through ansible-playbook's own main(), with ansible-core's one call that takes a plugin's
    parsed option definitions logged (process and plugin), and return the main process's pid and the pids that
    parsed the ssh connection plugin's definitions under the name the inventory gives it, ansible.builtin.ssh.
    (ANSIBLE_DEBUG cannot tell: it makes the main process load
    every connection plugin, and it prints the workers' lines under the main process's pid.)"""
    log = tmp_path / "defs.log"
    log.write_text("")
    main, out = run(tmp_path, _WRAPPER, THREE_TASKS,
                    "[nodes]\nnode-a\nnode-b\nnode-c\n\n[nodes:vars]\nansible_connection=ansible.builtin.ssh\n",
                    PRELOAD_TEST_LOG=str(log), ANSIBLE_CALLBACKS_ENABLED=callbacks)
    assert "ok: [node-c]" in out
    pids = [int(line.split()[0]) for line in log.read_text().splitlines()
            if line.split()[1] == "connection/ansible_collections.ansible.builtin.plugins.connection.ssh"]
    return main, pids


def test_under_ansible_playbook_the_workers_no_longer_parse_it(tmp_path):
    """An inventory that names the connection ansible.builtin.ssh: without the callback each of the 9 workers (3
    tasks on 3 hosts, none skipped) parses ssh's option definitions; with it the main process does, once, and no
    worker does."""
    main, pids = _config_def_loads(tmp_path, "ansible.builtin.timer")
    assert len(pids) == 9 and main not in pids
    main, pids = _config_def_loads(tmp_path, "ansible.builtin.timer,ddp.cluster.plugin_preload")
    assert pids == [main]
