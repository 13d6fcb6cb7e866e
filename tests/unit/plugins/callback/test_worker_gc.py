"""ddp.cluster.worker_gc: each forked worker freezes the objects it inherits, so its collections skip them."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.checkout_env import ROOT, checkout_env
from tests.wrapped_playbook import THREE_TASKS, local_inventory, run

_FORKS = """\
import gc
import os
import sys

from ansible_collections.ddp.cluster.plugins.callback import worker_gc


def child_freeze_count():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        # a grandchild too: the handler is inherited, and registering again does nothing
        again = worker_gc.freeze_in_forked_children()
        inner_read, inner_write = os.pipe()
        inner = os.fork()
        if inner == 0:
            os.write(inner_write, str(gc.get_freeze_count()).encode())
            os._exit(0)
        os.close(inner_write)
        os.waitpid(inner, 0)
        grandchild = int(os.read(inner_read, 64).decode())
        os.write(write, ("%d %d %s" % (gc.get_freeze_count(), grandchild, again)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    return os.read(read, 64).decode()


before = child_freeze_count()
first = worker_gc.freeze_in_forked_children()
second = worker_gc.freeze_in_forked_children()
after = child_freeze_count()
print(before, "|", first, second, "|", after, "|", gc.get_freeze_count())
"""


def test_children_forked_after_the_call_freeze_what_they_inherit_and_the_parent_does_not(tmp_path):
    script = tmp_path / "forks.py"
    script.write_text(_FORKS)
    # the checkout's collections folder (a symlink back to it) on the path, as ansible-core puts it
    env = checkout_env(PYTHONPATH=os.path.join(ROOT, "collections"))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    before, registered, after, parent = [part.strip() for part in out.split("|")]
    # before the call a child's objects are all in the collected generations; that child's own call registers the
    # handler in it, so its child (the grandchild) freezes
    child, grandchild, again = before.split()
    assert child == "0" and int(grandchild) > 1000 and again == "True"
    assert registered == "True False"
    child, grandchild, again = after.split()
    assert int(child) > 1000 and int(grandchild) > 1000  # the interpreter and ansible's modules, at least
    assert again == "False"
    assert parent == "0"  # the main process keeps collecting its own objects


_WRAPPER = """\
import gc
import os
import sys

from ansible.executor.task_executor import TaskExecutor

_run = TaskExecutor.run


def _logged(self):
    with open(os.environ["WORKER_GC_TEST_LOG"], "a") as log:
        log.write("%d %d\\n" % (os.getpid(), gc.get_freeze_count()))
    return _run(self)


TaskExecutor.run = _logged
from ansible.cli.playbook import main  # noqa: E402

sys.exit(main())
"""


def _worker_freeze_counts(tmp_path, callbacks):
    """Run the play through ansible-playbook's own main() with every worker logging, as it starts its task, its pid
    and how many objects its collector has frozen; return the main process's pid and the logged (pid, count)."""
    log = tmp_path / "gc.log"
    log.write_text("")
    main, out = run(tmp_path, _WRAPPER, THREE_TASKS, local_inventory("node-a", "node-b", "node-c"),
                    WORKER_GC_TEST_LOG=str(log), ANSIBLE_CALLBACKS_ENABLED=callbacks)
    assert "ok: [node-c]" in out
    return main, [tuple(int(x) for x in line.split()) for line in log.read_text().splitlines()]


def test_under_ansible_playbook_every_worker_starts_with_its_inheritance_frozen(tmp_path):
    """Without the callback the 9 workers (3 tasks on 3 hosts) start with nothing frozen; with it every one starts
    with the main process's objects frozen, and the main process runs no task itself."""
    main, logged = _worker_freeze_counts(tmp_path, "ansible.builtin.timer")
    assert len(logged) == 9 and all(count == 0 for _pid, count in logged)
    main, logged = _worker_freeze_counts(tmp_path, "ansible.builtin.timer,ddp.cluster.worker_gc")
    assert len(logged) == 9
    assert all(pid != main and count > 1000 for pid, count in logged)
