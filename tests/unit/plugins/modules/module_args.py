"""``patch_module_args`` for the module tests, on every ansible-core the collection supports.

ansible-core 2.19 added ``ansible.module_utils.testing.patch_module_args`` (the arguments a module's
``AnsibleModule`` reads, for the length of a ``with`` block). Older ansible-core (2.16 to 2.18) has no such
helper: there the module reads its arguments from ``ansible.module_utils.basic._ANSIBLE_ARGS``, a JSON
document ``{"ANSIBLE_MODULE_ARGS": {...}}`` in bytes, which is what this stand-in patches (the way
community.general's module tests set their arguments on those versions).
"""
from __future__ import annotations

import contextlib
import json
from unittest import mock

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core < 2.19
    from ansible.module_utils import basic

    @contextlib.contextmanager
    def patch_module_args(args=None):
        """Make ``AnsibleModule`` read ``args`` (a dict of option values) inside the ``with`` block."""
        args = dict(args or {})
        args.setdefault("_ansible_remote_tmp", "/tmp")
        args.setdefault("_ansible_keep_remote_files", False)
        document = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode("utf-8")
        with mock.patch.object(basic, "_ANSIBLE_ARGS", document):
            yield

__all__ = ["patch_module_args"]
