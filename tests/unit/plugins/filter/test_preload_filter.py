"""ddp.cluster.preload: its value is unchanged, and its use is where it is templated: the hosts of the first play
that every entry point runs (playbooks/validate.yml), which ansible-playbook's main process templates before it
forks the workers. benchmarks/filter_preload.sh measures what that saves."""
from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.filter.preload import FilterModule, preload

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
