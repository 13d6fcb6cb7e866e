from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.fabric import netprobe
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.netprobe import VERDICTS, classify_connect


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


SSH_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "fixtures", "ssh")


@pytest.mark.parametrize("name, verdict", [
    ("host-key-unknown", "host_key_unknown"),
    ("auth-denied", "auth_denied"),
    ("firewall-reject", "firewall_reject"),
    ("refused", "refused"),
    ("unresolved", "unresolved"),
    ("timeout", "timeout"),
])
def test_classify_ssh_real_messages(name, verdict):
    with open(os.path.join(SSH_FIXTURES, name + ".stderr")) as handle:
        assert netprobe.classify_ssh(255, handle.read())["verdict"] == verdict


@pytest.mark.parametrize("stderr, verdict", [
    ("kex_exchange_identification: read: Connection reset by peer\r\n", "dropped"),
    ("kex_exchange_identification: Connection closed by remote host\r\n", "dropped"),
    ("@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@\nHost key verification failed.\n",
     "host_key_changed"),
    ("something new\n", "error"),
    ("", "error"),
])
def test_classify_ssh_other_messages(stderr, verdict):
    """Messages from OpenSSH's source (sshd's MaxStartups drop, ssh's changed-key banner), not captured here."""
    assert netprobe.classify_ssh(255, stderr)["verdict"] == verdict


def test_classify_ssh_remote_status_proves_login():
    assert netprobe.classify_ssh(0, "")["verdict"] == "ok"
    assert netprobe.classify_ssh(1, "bash: line 1: false\n")["verdict"] == "ok"
    assert "something new" in netprobe.classify_ssh(255, "something new\n")["message"]
