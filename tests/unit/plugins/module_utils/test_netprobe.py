from __future__ import annotations

import errno

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.netprobe import VERDICTS, classify_connect


@pytest.mark.parametrize("err_no, timed_out, resolve_failed, verdict", [
    (None, False, False, "open"),
    (errno.ECONNREFUSED, False, False, "refused"),
    # C03: firewalld's default reject reads as "No route to host" at the client.
    (errno.EHOSTUNREACH, False, False, "firewall_reject"),
    (None, True, False, "timeout"),
    (errno.ETIMEDOUT, False, False, "timeout"),
    (errno.ENETUNREACH, False, False, "unreachable"),
    (None, False, True, "unresolved"),
    (errno.EMFILE, False, False, "error"),
])
def test_classify_connect(err_no, timed_out, resolve_failed, verdict):
    result = classify_connect(err_no, timed_out=timed_out, resolve_failed=resolve_failed)
    assert result["verdict"] == verdict
    assert result["verdict"] in VERDICTS
    assert result["message"]
