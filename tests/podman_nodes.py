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


def system_state(name):
    """What ``systemctl is-system-running`` prints in the container ``name`` ("" when podman cannot run it)."""
    try:
        proc = subprocess.run(["podman", "exec", name, "systemctl", "is-system-running"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip()


def systemd_up(name, timeout=120):
    """Wait until the container's systemd has booted (``running``, or ``degraded`` with a unit failed).

    ``systemctl is-system-running --wait`` is not enough: while a new container's systemd does not answer on its
    bus yet, it returns at once with ``offline`` or an error, and the next ``systemctl`` call in the test fails.
    Returns False when ``timeout`` seconds pass first.
    """
    return wait_until(lambda: system_state(name) in ("running", "degraded"), timeout, 1.0)
