# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: worker_gc
type: aggregate
short_description: Keep each forked worker's garbage collector off the objects it inherits from the main process
version_added: 0.3.0
description:
  - >-
    C(ansible-playbook) forks one worker process per task and host. The worker inherits the main process's heap
    (the parsed playbooks, the inventory and every host's variables, the loaded plugins), shared with the main
    process until either writes to a page. Python's cyclic garbage collector, when it runs a collection of its
    oldest generation in the worker, visits every object the worker holds, inherited ones included: it reads and
    writes each object's header, so the worker spends that time and the kernel copies every page it touches.
  - >-
    This callback registers, in the main process, a handler that Python runs in every child right after C(fork)
    (C(os.register_at_fork(after_in_child=gc.freeze))): the worker moves every object it inherited into the
    collector's permanent generation, which no collection visits. The worker's own objects are collected as before.
    Python's documentation of C(gc.freeze) gives this use: "If a process will fork() without exec(), ... ensuring
    that GC collections in child processes won't touch the gc_refs counter of long-lived objects originating in the
    parent process". The main process itself is not changed.
  - >-
    It changes nothing a task does or reports; a worker lives for one task and host, so what it inherits is freed
    when it exits, as before. Measured on the local cluster (docs/scale.md): in a no-change C(site.yml) on three
    nodes, about 50 of some 700 workers ran a collection of the oldest generation, each taking 45 to 80
    CPU-milliseconds. The handler is registered once per process, however many times the callback is loaded.
  - The repository's C(ansible.cfg) enables it (C(callbacks_enabled)); elsewhere add C(ddp.cluster.worker_gc)
    to C(callbacks_enabled) or to C(ANSIBLE_CALLBACKS_ENABLED).
author:
  - ddp.cluster maintainers (@ddp-cluster)
"""

import gc
import os

from ansible.plugins.callback import CallbackBase

# Whether this process registered the handler. It cannot be removed, and a forked child inherits it with this flag.
_REGISTERED = []


def freeze_in_forked_children():
    """Make every later ``os.fork()`` of this process run ``gc.freeze()`` in the child, once per process.

    Returns True where this call registered the handler, False where this process had it already (a second
    callback instance, a second call, or a child forked after the first call, which inherits the handler). Only
    forks are affected: a child that calls ``exec`` (subprocess) drops the Python heap anyway. Raises nothing;
    ``os.register_at_fork`` exists from Python 3.7 on every POSIX system ansible-core runs on as a controller."""
    if _REGISTERED:
        return False
    os.register_at_fork(after_in_child=gc.freeze)
    _REGISTERED.append(True)
    return True


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ddp.cluster.worker_gc"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        freeze_in_forked_children()
