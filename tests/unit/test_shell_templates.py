"""Templates that write a shell script keep every inventory value one quoted word.

Each template is rendered with Ansible's own filters and a hostile value; the script must parse
(``sh -n``/``bash -n``) and the assignment must be one shell word holding exactly the value.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import jinja2
import pytest
from ansible.plugins.filter.core import FilterModule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTILE = ["RoCE v2'; touch /tmp/ddp-pwned; echo '", "$(touch /tmp/ddp-pwned)", "`id`", "a\"b", "x y"]

# template -> {shell variable: the inventory variable written into it}
TEMPLATES = {
    "roles/rdma/templates/ddp-rdma-roce.sh.j2": {
        "mode": "rdma_cma_roce_mode", "tos": "rdma_cma_roce_tos", "trust": "rdma_qos_trust", "pfc": "rdma_qos_pfc"},
}


def render(path, values):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(FilterModule().filters())
    with open(os.path.join(ROOT, path)) as handle:
        template = env.from_string(handle.read())
    base = {"ansible_managed": "Ansible managed", "__rdma_roce_unit": "ddp-rdma-roce.service",
            "__rdma_cm_configfs": "/sys/kernel/config/rdma_cm"}
    base.update(values)
    return template.render(**base)


CASES = [(path, shell, var, value) for path, names in sorted(TEMPLATES.items())
         for shell, var in sorted(names.items()) for value in HOSTILE]


@pytest.mark.parametrize("path, shell, var, value", CASES)
def test_hostile_value_stays_one_quoted_word(path, shell, var, value):
    values = dict((v, "") for v in TEMPLATES[path].values())
    values[var] = value
    script = render(path, values)
    for shell_bin in ("sh", "bash"):
        if shutil.which(shell_bin):
            proc = subprocess.run([shell_bin, "-n"], input=script, text=True, capture_output=True, check=False)
            assert proc.returncode == 0, proc.stderr
    lines = [line for line in script.splitlines() if line.startswith(shell + "=")]
    assert len(lines) == 1
    assert shlex.split(lines[0]) == ["%s=%s" % (shell, value)]


def test_unquoted_template_would_fail_this_test():
    """The check above can fail: the old, unquoted form lets the value out of its word."""
    line = "mode='%s'" % HOSTILE[0]
    assert shlex.split(line) != ["mode=%s" % HOSTILE[0]]
