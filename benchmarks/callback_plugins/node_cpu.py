# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark callback: the CPU seconds the nodes spend on each task of a playbook run.

Used by benchmarks/converge.sh on the local podman cluster, where the nodes are containers on the controller's
machine and each one's CPU use is a cgroup counter this process can read. Enabled with
``ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback_plugins ANSIBLE_CALLBACKS_ENABLED=node_cpu`` and two variables:

- ``DDP_NODE_CPU_CGROUPS``: ``host=file`` pairs separated by commas, ``file`` being the node's cgroup CPU counter:
  ``cpuacct.usage`` (cgroup v1, nanoseconds) or ``cpu.stat`` (cgroup v2, its ``usage_usec`` line).
- ``DDP_NODE_CPU_OUT``: the JSON file written at the end of the run: ``{"tasks": [...], "total_s": float,
  "ctl_total_s": float}``, each task ``{"task": "role : name", "cpu_s": float, "ctl_cpu_s": float, "runs": int}``,
  most node CPU first. ``cpu_s`` is summed over every node and over every run of a task of that name; ``runs``
  counts those runs.
- ``DDP_CTL_CPU_COUNTER`` (optional): the controller's own counter file, read the same way at the same moments:
  the cgroup that converge.sh starts ansible-playbook in (its main process, workers and ssh). ``ctl_cpu_s`` is then
  the controller's CPU seconds from the start of the task to the start of the next one: the main process queuing
  the task for every host and reading the results, the workers templating and sending it. Without it,
  ``ctl_cpu_s`` is 0.

The play runs its tasks one after the other (the linear strategy), so the CPU the nodes use between the start of
one task and the start of the next is that task's, plus what the nodes' own daemons use meanwhile (measured idle on
the local cluster: about 4 CPU-milliseconds per node and second, under 1 % of a no-change run). An async task
started with ``poll: 0`` is counted where its work is collected, not where it starts.
"""
from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: node_cpu
type: aggregate
short_description: CPU seconds the nodes spend on each task (benchmarks/converge.sh, local podman cluster)
description:
  - Reads each node's cgroup CPU counter at the start of every task; what the nodes used until the next task starts
    is the task's. Writes the tasks, most CPU first, to the file in E(DDP_NODE_CPU_OUT).
  - The nodes and their counters come from E(DDP_NODE_CPU_CGROUPS) (C(host=file,...)); the controller's own counter,
    where given, from E(DDP_CTL_CPU_COUNTER).
requirements:
  - The nodes' cgroup CPU counters readable from the controller (containers on the same machine).
"""


def parse_cgroups(spec):
    """``"host=file,host=file"`` -> {host: file}. Raises ValueError on an entry without ``=`` or an empty side."""
    out = {}
    for entry in (spec or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, path = entry.partition("=")
        if not sep or not host or not path:
            raise ValueError("DDP_NODE_CPU_CGROUPS: '%s' is not host=file" % entry)
        out[host] = path
    return out


def cpu_seconds(text, name):
    """CPU seconds in the text of a cgroup counter file ``name``: cpuacct.usage (ns) or cpu.stat (usage_usec)."""
    if os.path.basename(name) == "cpu.stat":
        for line in text.splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[0] == "usage_usec":
                return int(fields[1]) / 1e6
        raise ValueError("%s has no usage_usec line" % name)
    return int(text.strip()) / 1e9


def ranked(totals, runs, ctl=None):
    """{task: cpu_s}, {task: runs}, {task: ctl_cpu_s} -> the tasks as dicts, most node CPU first (ties by name)."""
    ctl = ctl or {}
    return [{"task": task, "cpu_s": round(cpu, 3), "ctl_cpu_s": round(ctl.get(task, 0.0), 3), "runs": runs[task]}
            for task, cpu in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "node_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._files = parse_cgroups(os.environ.get("DDP_NODE_CPU_CGROUPS", ""))
        self._out = os.environ.get("DDP_NODE_CPU_OUT", "")
        self._ctl_file = os.environ.get("DDP_CTL_CPU_COUNTER", "")
        self._current = None
        self._mark = 0.0
        self._ctl_mark = 0.0
        self._totals = {}
        self._ctl = {}
        self._runs = {}

    def _read(self):
        total = 0.0
        for path in self._files.values():
            try:
                with open(path) as f:
                    total += cpu_seconds(f.read(), path)
            except (OSError, ValueError):
                continue  # a node gone meanwhile (a day-2 run) counts nothing from here on
        return total

    def _read_ctl(self):
        if not self._ctl_file:
            return 0.0
        with open(self._ctl_file) as f:  # the controller's own cgroup: there while ansible-playbook runs in it
            return cpu_seconds(f.read(), self._ctl_file)

    def _close(self):
        now, ctl_now = self._read(), self._read_ctl()
        if self._current is not None:
            self._totals[self._current] = self._totals.get(self._current, 0.0) + now - self._mark
            self._ctl[self._current] = self._ctl.get(self._current, 0.0) + ctl_now - self._ctl_mark
            self._runs[self._current] = self._runs.get(self._current, 0) + 1
        self._mark, self._ctl_mark = now, ctl_now
        self._current = None

    def _start(self, task):
        self._close()
        self._current = task.get_name().strip()

    def v2_playbook_on_task_start(self, task, is_conditional):
        del is_conditional  # ansible-core passes it by this name (keyword); nothing here needs it
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def v2_playbook_on_play_start(self, play):
        del play
        self._close()

    def v2_playbook_on_stats(self, stats):
        del stats
        self._close()
        if not self._out:
            return
        tasks = ranked(self._totals, self._runs, self._ctl)
        with open(self._out, "w") as f:
            json.dump({"tasks": tasks, "total_s": round(sum(self._totals.values()), 3),
                       "ctl_total_s": round(sum(self._ctl.values()), 3)}, f, indent=1)
