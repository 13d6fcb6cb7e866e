"""Whether a podman container (a Molecule or local-cluster node) is running, for the integration tests' skip marks,
and waiting for a node's state to come.

pytest puts tests/ on sys.path (tests/conftest.py), so any test can ``from podman_nodes import running``.
"""
from __future__ import annotations

import subprocess
import time


def running(name):
    """True when the container ``name`` exists and is running (False when podman or the container is missing)."""
    try:
        proc = subprocess.run(["podman", "container", "inspect", "-f", "{{.State.Running}}", name],
                              capture_output=True, text=True, check=False)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def wait_until(predicate, timeout, step=1.0):
    """Call ``predicate`` every ``step`` seconds until it is true (True) or ``timeout`` seconds have passed (False)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False
