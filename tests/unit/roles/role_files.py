"""Import a program a role ships (roles/<role>/files/<name>.py) as a module, for the tests beside this file."""
from __future__ import annotations

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(role, filename):
    """The module of ``roles/<role>/files/<filename>``, executed once per call (importing needs no torch)."""
    name = os.path.splitext(filename)[0]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "roles", role, "files", filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
