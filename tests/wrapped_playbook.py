"""Run a play through ansible-playbook's own ``main()`` with a wrapper script around it, for the tests that log what
each process (the main process, or a worker it forks) does: the callbacks and filters that move work from the workers
to the main process (tests/unit/plugins/callback/test_plugin_preload.py, test_worker_gc.py,
tests/unit/plugins/filter/test_preload_filter.py).

``run(tmp_path, wrapper, play, inventory, **env)`` writes the three files into ``tmp_path``, runs the wrapper with this
Python and the checkout's ansible.cfg (:func:`checkout_env`, ``env`` added), requires exit status 0 and returns
``(main process pid, output)``. The wrapper patches what it logs and ends with ``sys.exit(main())`` of
``ansible.cli.playbook``; ``pid`` tells the main process's lines from the workers'.
"""
from __future__ import annotations

import subprocess
import sys

from tests.checkout_env import checkout_env

# Three tasks on every host, none of which connects: a debug, a set_fact, a debug.
THREE_TASKS = """\
- name: Three tasks on every host, none of which connects
  hosts: all
  gather_facts: false
  tasks:
    - name: One
      ansible.builtin.debug:
        msg: one
    - name: Two
      ansible.builtin.set_fact:
        two: 2
    - name: Three
      ansible.builtin.debug:
        msg: three
"""

# No output that depends on the terminal, no warning about the inventory or localhost.
QUIET = {"ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
         "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}


def local_inventory(*hosts):
    """An INI inventory of ``hosts`` in group ``nodes`` on the local connection, with this Python on them."""
    return "[nodes]\n%s\n\n[nodes:vars]\nansible_connection=local\nansible_python_interpreter=%s\n" % (
        "\n".join(hosts), sys.executable)


def run(tmp_path, wrapper, play, inventory, timeout=180, **env):
    """Write ``wrapper``, ``play`` and ``inventory`` (texts) into ``tmp_path`` and run the play; returns
    ``(pid of ansible-playbook's main process, its output)``. AssertionError with the output when it fails."""
    paths = dict((name, tmp_path / name) for name in ("playbook_main.py", "play.yml", "hosts.ini"))
    for name, text in (("playbook_main.py", wrapper), ("play.yml", play), ("hosts.ini", inventory)):
        paths[name].write_text(text)
    environ = dict(QUIET)
    environ.update(env)
    proc = subprocess.Popen([sys.executable, str(paths["playbook_main.py"]), "-i", str(paths["hosts.ini"]),
                             str(paths["play.yml"])], env=checkout_env(**environ), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = proc.communicate(timeout=timeout)[0]
    assert proc.returncode == 0, out
    return proc.pid, out
