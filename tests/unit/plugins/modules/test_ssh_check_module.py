"""ssh_check's I/O edge: logins a few at a time, in order, retried only when sshd dropped them."""
from __future__ import annotations

import threading
import time

from ansible_collections.ddp.cluster.plugins.modules import ssh_check as mod

FIXTURE_DROPPED = "kex_exchange_identification: read: Connection reset by peer\r\n"


def test_run_all_keeps_order_and_bounds_parallelism():
    running, peak, lock = [0], [0], threading.Lock()

    def job(i):
        def run():
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.02)
            with lock:
                running[0] -= 1
            return i
        return run

    assert mod.run_all([job(i) for i in range(20)], 4) == list(range(20))
    assert peak[0] == 4
    assert mod.run_all([], 4) == []


class FakeModule(object):
    """Stands in for AnsibleModule.run_command only: answers from a script of (rc, stderr)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []

    def run_command(self, argv):
        self.calls.append(argv)
        rc, err = self.answers.pop(0)
        return rc, "", err


def test_login_retries_only_a_dropped_connection():
    fake = FakeModule([(255, FIXTURE_DROPPED), (0, "")])
    result = mod.login(fake, "a", {"name": "b", "host": "10.0.0.2"}, 10, 2)
    assert result["verdict"] == "ok" and result["attempts"] == 2
    assert fake.calls[0][:4] == ["ssh", "-o", "BatchMode=yes", "-o"] and fake.calls[0][-2:] == ["10.0.0.2", "true"]
    fake = FakeModule([(255, "Host key verification failed.\n")])
    assert mod.login(fake, "a", {"name": "b", "host": "b"}, 10, 2)["verdict"] == "host_key_unknown"
    fake = FakeModule([(255, FIXTURE_DROPPED)] * 3)
    result = mod.login(fake, "a", {"name": "b", "host": "b"}, 10, 2)
    assert result["verdict"] == "dropped" and result["attempts"] == 3
