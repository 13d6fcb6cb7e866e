"""ddp.cluster.progress: the polls of a waiting task as one progress line per task and interval."""
from __future__ import annotations

import types

import pytest

from ansible_collections.ddp.cluster.plugins.callback.progress import CallbackModule, progress_bucket


@pytest.mark.parametrize("waited, interval, expected", [
    (3, 15, 0), (14.9, 15, 0), (15, 15, 1), (44, 15, 2), (60, 15, 4), (7, 0, 0),
])
def test_progress_bucket(waited, interval, expected):
    assert progress_bucket(waited, interval) == expected


class FakeDisplay:
    verbosity = 0

    def __init__(self):
        self.lines = []

    def display(self, msg, color=None, **_kw):
        self.lines.append(msg)


def _retry(task, host, attempts):
    """A retry result with both of core's spellings: ``result``/``task``/``host`` (the CallbackTaskResult of
    ansible-core 2.19 and later) and ``_result``/``_task``/``_host`` (the TaskResult of 2.16 to 2.18, which core's own
    ``host_label`` reads there)."""
    data, node = {"attempts": attempts, "retries": 151}, types.SimpleNamespace(get_name=lambda: host)
    return types.SimpleNamespace(result=data, task=task, task_name=task.get_name(), host=node,
                                 _result=data, _task=task, _host=node)


def _callback(clock):
    callback = CallbackModule.__new__(CallbackModule)
    callback._progress_shown, callback._progress_start, callback._clock = set(), {}, clock
    callback._display = FakeDisplay()
    callback.get_option = lambda name: {"interval": 15}[name]
    return callback


def test_three_hosts_polling_for_a_minute_print_five_lines():
    now = [1000.0]
    callback = _callback(lambda: now[0])
    task = types.SimpleNamespace(_uuid="t1", delay=3, delegate_to=None,
                                 get_name=lambda: "run | Wait for the run on every node")
    for _attempt in range(1, 21):                       # 60 s of polls every 3 s
        for host in ("ddp-node1", "ddp-node2", "ddp-node3"):
            callback.v2_runner_retry(_retry(task, host, _attempt))
        now[0] += 3
    assert callback._display.lines == [
        "waiting %d s (polls up to 453 s): run | Wait for the run on every node [ddp-node1]" % s
        for s in (3, 15, 30, 45, 60)]
    assert not any("FAILED" in line for line in callback._display.lines)


def test_slow_polls_count_wall_time():
    # A loaded machine: each poll of a 3 s delay takes 20 s; the line says 23 s, 43 s ..., not 3 s, 6 s.
    now = [0.0]
    callback = _callback(lambda: now[0])
    task = types.SimpleNamespace(_uuid="t2", delay=3, delegate_to=None, get_name=lambda: "Wait")
    for attempt in range(1, 4):
        callback.v2_runner_retry(_retry(task, "n1", attempt))
        now[0] += 20
    assert callback._display.lines == ["waiting 3 s (polls up to 453 s): Wait [n1]",
                                       "waiting 23 s (polls up to 453 s): Wait [n1]",
                                       "waiting 43 s (polls up to 453 s): Wait [n1]"]
