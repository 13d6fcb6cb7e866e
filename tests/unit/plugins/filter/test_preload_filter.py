"""ddp.cluster.preload: its value is unchanged, and its use is where it is templated: the hosts of the first play
that every entry point runs (playbooks/validate.yml), which ansible-playbook's main process templates before it
forks the workers. benchmarks/filter_preload.sh measures what that saves."""
from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.filter.preload import FilterModule, preload
from tests.wrapped_playbook import local_inventory, run

ROOT = pathlib.Path(__file__).resolve().parents[4]
# The entry points that contact nodes; local_cluster.yml and awx_setup.yml run on the controller only.
CONTROLLER_ONLY = {"local_cluster.yml", "awx_setup.yml"}


@pytest.mark.parametrize("value", ["localhost", ["a", "b"], {"k": 1}, None, 3])
def test_the_value_is_unchanged(value):
    assert preload(value) is value
    assert FilterModule().filters()["preload"] is preload


def first_play(path):
    """The first play an entry point runs, following import_playbook."""
    play = yaml.safe_load(path.read_text())[0]
    target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
    return first_play(path.parent / target) if target else (path, play)


def test_validate_templates_its_hosts_through_preload():
    _path, play = first_play(ROOT / "playbooks" / "validate.yml")
    assert "| ddp.cluster.preload" in play["hosts"]


@pytest.mark.parametrize("entry", sorted(p.name for p in (ROOT / "playbooks").glob("*.yml")
                                         if p.name not in CONTROLLER_ONLY | {"validate.yml"}) + ["../site.yml"])
def test_every_entry_point_starts_with_the_preloading_play(entry):
    path, play = first_play(ROOT / "playbooks" / entry)
    assert path.name == "validate.yml", "%s starts with %s, not playbooks/validate.yml" % (entry, path)
    assert "| ddp.cluster.preload" in play["hosts"]


_WRAPPER = """\
import os
import sys

import yaml

from ansible.plugins.loader import PluginLoader

_load, _yaml_load = PluginLoader._load_module_source, yaml.load


def _log(what):
    with open(os.environ["PRELOAD_FILTER_TEST_LOG"], "a") as log:
        log.write("%d %s\\n" % (os.getpid(), what))


def _logged_load(self, *args, **kwargs):
    # ansible-core 2.19 and later: keywords python_module_name and path; before: (name, path)
    name = kwargs.get("python_module_name") or kwargs.get("name") or args[0]
    if name not in sys.modules:
        _log("module %s %s" % (name, kwargs.get("path") or args[1]))
    return _load(self, *args, **kwargs)


def _logged_yaml(stream, *args, **kwargs):
    _log("yaml " + os.path.basename(getattr(stream, "name", "-")))
    return _yaml_load(stream, *args, **kwargs)


PluginLoader._load_module_source = _logged_load
yaml.load = _logged_yaml
from ansible.cli.playbook import main  # noqa: E402

sys.exit(main())
"""

_PLAY = """\
- name: Three skipped tasks that use a test, another collection's filter and the matrix
  hosts: "{hosts}"
  gather_facts: false
  tasks:
    - name: A test
      ansible.builtin.debug:
        msg: not shown
      when: "'2.1' is version('3.0', '>')"
    - name: community.general's filter
      ansible.builtin.debug:
        msg: not shown
      when: "('x' | community.general.dict_kv('a')) == {{}}"
    - name: The compatibility matrix
      ansible.builtin.debug:
        msg: not shown
      when: "({{}} | ddp.cluster.compat_resolve).stack is not defined"
"""


def _worker_loads(tmp_path, hosts):
    """Run the play with every plugin module a process loads from source, and every YAML file parsed through
    yaml.load, logged with the process; return the workers' lines."""
    log = tmp_path / "loads.log"
    log.write_text("")
    main, out = run(tmp_path, _WRAPPER, _PLAY.format(hosts=hosts), local_inventory("node-a", "node-b"),
                    PRELOAD_FILTER_TEST_LOG=str(log))
    assert "skipped=3" in out, out
    lines = [line.split(" ", 1) for line in log.read_text().splitlines()]
    return [what for pid, what in lines if int(pid) != main]


def test_with_preload_no_worker_loads_the_plugins_or_parses_the_matrix(tmp_path):
    """Without the filter in the play's hosts every worker (3 tasks on 2 hosts) loads ansible-core's test plugins,
    community.general's filters or this collection's filters, and parses the matrix; with it the main process has
    loaded them all, and no worker loads a plugin module or parses a YAML file."""
    without = _worker_loads(tmp_path, "nodes")
    # by the file: 2.16 names the module after a hash of it, 2.19 after its package
    assert any(w.endswith("/ansible/plugins/test/core.py") for w in without)
    assert any("/community/general/plugins/filter/" in w for w in without)
    assert "yaml compat_matrix.yml" in without
    assert _worker_loads(tmp_path, "{{ 'nodes' | ddp.cluster.preload }}") == []
