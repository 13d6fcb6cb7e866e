"""Facts are read from ``ansible_facts``, never from the top-level ``ansible_<fact>`` variables.

ansible-core 2.20 deprecates the injected top-level fact variables (``INJECT_FACTS_AS_VARS``; they go in 2.24), and
a run with ``inject_facts_as_vars = False`` does not define them. The fact names come from ansible-core itself: the
``setup`` module run on this machine (the names a node reports are the same modules' keys).
"""
from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.filter.validate import fact_variables
from checkout_env import checkout_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_BIN = os.path.join(os.path.dirname(sys.executable), "ansible")
# Everything that templates variables: roles, playbooks, module EXAMPLES, benchmarks, inventories, scenarios.
CONTENT = ("roles", "playbooks", "plugins", "benchmarks", "inventory", "molecule", "site.yml")


@pytest.fixture(scope="module")
def setup_facts(tmp_path_factory):
    env = checkout_env(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
                       ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([ANSIBLE_BIN, "localhost", "-i", "localhost,", "-c", "local", "-m", "ansible.builtin.setup",
                           "-e", "ansible_python_interpreter=" + sys.executable],
                          cwd=str(tmp_path_factory.mktemp("setup")), env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the JSON document first; the timer callback that ansible.cfg enables prints its line after it
    result = json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]
    return result["plays"][0]["tasks"][0]["hosts"]["localhost"]["ansible_facts"]


@pytest.fixture(scope="module")
def fact_names(setup_facts):
    names = {name[len("ansible_"):] if name.startswith("ansible_") else name for name in setup_facts}
    assert {"distribution", "date_time", "default_ipv4", "hostname"} <= names
    return names


def injected_uses(names, text):
    """``ansible_<fact>`` used as a variable (not ``ansible_facts.<fact>`` or ``ansible_facts['<fact>']``)."""
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    pattern = re.compile(r"(?<![\w.'\"\[])ansible_(%s)\b" % alternatives)
    return sorted({match.group(0) for match in pattern.finditer(text)})


def test_the_scan_finds_an_injected_fact(fact_names):
    assert injected_uses(fact_names, "when: ansible_distribution == 'Debian'") == ["ansible_distribution"]
    assert injected_uses(fact_names, "x: '{{ hostvars[h].ansible_date_time.epoch }}'") == []  # hostvars_uses
    assert injected_uses(fact_names, "x: '{{ ansible_facts.date_time.epoch }} {{ ansible_python_interpreter }}'") == []


# hostvars[<host>].ansible_<fact> or hostvars[<host>]['ansible_<fact>'] (the host expression may nest brackets)
HOSTVARS_ATTR = re.compile(r"\](?:\.|\[['\"])ansible_(\w+)")


def hostvars_uses(names, text):
    return ["hostvars[...].ansible_" + name for name in HOSTVARS_ATTR.findall(text) if name in names]


def test_the_scan_finds_another_hosts_injected_fact(fact_names):
    text = "rdzv_id: \"x-{{ hostvars[groups[ddp_head_group | default('ddp_head')][0]].ansible_date_time.epoch }}\""
    assert hostvars_uses(fact_names, text) == ["hostvars[...].ansible_date_time"]
    assert hostvars_uses(fact_names, "{{ hostvars[h]['ansible_default_ipv4'] }} {{ hostvars[h].ansible_host }}") == [
        "hostvars[...].ansible_default_ipv4"]


def test_no_content_reads_an_injected_fact(fact_names):
    found = {}
    for top in CONTENT:
        path = os.path.join(ROOT, top)
        walk = [(ROOT, [], [top])] if os.path.isfile(path) else os.walk(path)
        for folder, _dirs, files in walk:
            for name in files:
                if not name.endswith((".yml", ".yaml", ".j2", ".py")):
                    continue
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    text = handle.read()
                uses = injected_uses(fact_names, text)
                uses += hostvars_uses(fact_names, text)
                if uses:
                    found[os.path.relpath(os.path.join(folder, name), ROOT)] = uses
    assert found == {}


def test_the_checkout_and_every_scenario_inject_no_fact_variables():
    # ansible.cfg and each molecule scenario (whose ansible.cfg molecule writes from config_options): a run from the
    # checkout defines no ansible_<fact> variables, so anything that still read one fails in the tests.
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "ansible.cfg"))
    assert parser.getboolean("defaults", "inject_facts_as_vars") is False
    scenarios = os.path.join(ROOT, "molecule")
    for name in sorted(os.listdir(scenarios)):
        with open(os.path.join(scenarios, name, "molecule.yml"), encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
        assert config["provisioner"]["config_options"]["defaults"]["inject_facts_as_vars"] is False, name


def test_the_validate_stage_knows_every_fact_setup_reports(setup_facts):
    # validate refuses a value that reads ansible_<fact> where facts are not injected (VALIDATE_FACT_VARIABLE): the
    # names it knows are every one that setup reported here, less those named after a network interface.
    interfaces = {"ansible_" + name.replace("-", "_") for name in setup_facts.get("ansible_interfaces", [])}
    reported = {name for name in setup_facts if name.startswith("ansible_") and name != "ansible_local"} - interfaces
    known = set(fact_variables(False))
    assert reported - known == set()
    assert fact_variables(True) == []
    assert not {"ansible_local", "ansible_facts", "ansible_host", "ansible_user", "ansible_check_mode"} & known
