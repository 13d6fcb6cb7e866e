"""Whether a podman container (a Molecule or local-cluster node) is running, for the integration tests' skip marks.

pytest puts tests/ on sys.path (tests/conftest.py), so any test can ``from podman_nodes import running``.
"""
from __future__ import annotations

import subprocess


def running(name):
    """True when the container ``name`` exists and is running (False when podman or the container is missing)."""
    try:
        proc = subprocess.run(["podman", "container", "inspect", "-f", "{{.State.Running}}", name],
                              capture_output=True, text=True, check=False)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "true"
