"""ddp.cluster.progress: the polls of a waiting task as one progress line per task and interval."""
from __future__ import annotations

import types

import pytest

from ansible_collections.ddp.cluster.plugins.callback.progress import CallbackModule, progress_line


@pytest.mark.parametrize("attempts, delay, retries, interval, expected", [
    (1, 3, 151, 15, (0, 3, 453)),       # the first poll always says what is waited for
    (2, 3, 151, 15, None),
    (4, 3, 151, 15, None),              # 12 s: still in the first 15 s
    (5, 3, 151, 15, (1, 15, 453)),      # 15 s: a new line
    (6, 3, 151, 15, None),
    (10, 3, 151, 15, (2, 30, 453)),
    (2, 20, 10, 15, (2, 40, 200)),      # polls slower than the interval: every poll
    (3, 1, 30, 0, None),                # interval 0: the first line only
])
def test_progress_line(attempts, delay, retries, interval, expected):
    assert progress_line(attempts, delay, retries, interval) == expected


class FakeDisplay:
    verbosity = 0

    def __init__(self):
        self.lines = []

    def display(self, msg, color=None, **_kw):
        self.lines.append(msg)


def _retry(task, host, attempts):
    return types.SimpleNamespace(result={"attempts": attempts, "retries": 151}, task=task, task_name=task.get_name(),
                                 host=types.SimpleNamespace(get_name=lambda: host))


def test_three_hosts_polling_for_a_minute_print_five_lines():
    callback = CallbackModule.__new__(CallbackModule)
    callback._progress_shown = set()
    callback._display = FakeDisplay()
    callback.get_option = lambda name: {"interval": 15}[name]
    task = types.SimpleNamespace(_uuid="t1", delay=3, delegate_to=None,
                                 get_name=lambda: "run | Wait for the run on every node")
    for attempts in range(1, 21):                       # 60 s of polls every 3 s
        for host in ("ddp-node1", "ddp-node2", "ddp-node3"):
            callback.v2_runner_retry(_retry(task, host, attempts))
    assert callback._display.lines == [
        "waiting 3 s (up to 453 s): run | Wait for the run on every node [ddp-node1]",
        "waiting 15 s (up to 453 s): run | Wait for the run on every node [ddp-node1]",
        "waiting 30 s (up to 453 s): run | Wait for the run on every node [ddp-node1]",
        "waiting 45 s (up to 453 s): run | Wait for the run on every node [ddp-node1]",
        "waiting 60 s (up to 453 s): run | Wait for the run on every node [ddp-node1]",
    ]
    assert not any("FAILED" in line for line in callback._display.lines)
