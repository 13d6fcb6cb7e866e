"""Every problem code the collection can emit is documented in docs/troubleshooting.md."""
from __future__ import annotations

import ast
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def emitted_codes():
    """First arguments of problem(...) / _problem(...) calls in plugins/ (string constants), and the strings
    of a module-level ``CODES`` table (codes chosen at run time, e.g. module_utils/cluster/peermesh.py)."""
    codes = set()
    for path in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True):
        with open(path) as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CODES" for t in node.targets):
                codes.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.isupper())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            if name in ("problem", "_problem") and isinstance(first, ast.Constant) and isinstance(first.value, str):
                codes.add(first.value)
    return codes


def role_codes():
    """Codes the roles and playbooks put in their messages as ``[CODE]``."""
    codes = set()
    paths = glob.glob(os.path.join(ROOT, "roles", "**", "*.yml"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
    for path in paths:
        with open(path) as handle:
            codes.update(re.findall(r"\[([A-Z][A-Z0-9]*_[A-Z0-9_]+)\]", handle.read()))
    return codes


def test_role_codes_are_found():
    assert {"SLURM_MUNGE_KEY_MISMATCH", "SLURM_JOB_FAILED", "PYTORCH_ENV_INSTALLER_CHECKSUM"} <= role_codes()


def test_every_role_code_is_documented():
    with open(os.path.join(ROOT, "docs", "troubleshooting.md")) as handle:
        doc = handle.read()
    assert sorted(code for code in role_codes() if code not in doc) == []


def test_codes_are_found():
    codes = emitted_codes()
    assert {"PREFLIGHT_LOOPBACK_RDZV", "STACK_TORCHVISION_MISMATCH", "NO_GPU", "NO_RDMA",
            "NCCL_BUSBW_LOW", "CLUSTER_PORT_BLOCKED", "SSH_PAIR_FAILED", "CLUSTER_NODE_PORT_BLOCKED"} <= codes


def test_every_code_is_documented():
    with open(os.path.join(ROOT, "docs", "troubleshooting.md")) as handle:
        doc = handle.read()
    missing = sorted(code for code in emitted_codes() if code not in doc)
    assert missing == []
