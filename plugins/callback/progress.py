# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: progress
type: stdout
short_description: Ansible's default output, with the polls of a waiting task shown as progress, not as failures
version_added: 0.3.0
description:
  - >-
    The default stdout callback (P(ansible.builtin.default#callback)) with one change. A task that waits by polling
    (C(until) with C(retries) and C(delay): a benchmark run, the health all-reduce with fewer forks than nodes,
    Slurm's node registration) makes the default callback print C(FAILED - RETRYING: [host]: task (N retries left))
    for every host at every poll, dozens of lines that read like failures although nothing failed. This callback
    prints instead one line per task each O(interval) seconds of waiting, for example
    C(waiting 30 s (polls up to 453 s): run | Wait for the run on every node [ddp-node1]): the wall time since the
    task's first poll, the time its retries and delay allow for polling, the task, and the host whose poll crossed
    into the new interval.
  - A task that runs out of retries fails as with the default callback, with its message.
  - With C(-vv) or more every poll is printed as the default callback prints it.
  - >-
    The repository's C(ansible.cfg) sets it (C(stdout_callback = ddp.cluster.progress)); elsewhere set it the same
    way or with C(ANSIBLE_STDOUT_CALLBACK=ddp.cluster.progress).
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
options:
  interval:
    description: Seconds of waiting between two progress lines of one task (a line at the first poll, then one for each
      interval in which the task still polls).
    type: int
    default: 15
    ini:
      - section: callback_progress
        key: interval
    env:
      - name: DDP_PROGRESS_INTERVAL
"""

import time

from ansible import constants as C
from ansible.plugins.callback.default import CallbackModule as Default


def progress_bucket(waited, interval):
    """The ``interval``-long stretch of waiting that ``waited`` seconds fall in (0: the first ``interval`` s)."""
    return int(waited // interval) if interval > 0 else 0


class CallbackModule(Default):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "ddp.cluster.progress"

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._progress_shown = set()
        self._progress_start = {}
        self._clock = time.monotonic

    def v2_runner_retry(self, result):
        if self._display.verbosity >= 2:
            return super(CallbackModule, self).v2_runner_retry(result)
        data = getattr(result, "result", None)
        data = data if isinstance(data, dict) else result._result
        task = getattr(result, "task", None) or result._task
        delay = max(float(getattr(task, "delay", 0) or 0), 0.0)
        # Wall time since the task's first poll (plus the delay before it): polls of a loaded controller or node
        # take longer than the delay, so attempts x delay would understate it.
        now = self._clock()
        started = self._progress_start.setdefault(task._uuid, now - delay)
        waited = now - started
        key = (task._uuid, progress_bucket(waited, int(self.get_option("interval"))))
        if key in self._progress_shown:
            return None
        self._progress_shown.add(key)
        limit = int(data.get("retries", 0) or 0) * delay
        name = getattr(result, "task_name", None) or task.get_name()
        self._display.display("waiting %d s (polls up to %d s): %s [%s]"
                              % (waited, limit, name, self.host_label(result)), color=C.COLOR_DEBUG)
        return None
