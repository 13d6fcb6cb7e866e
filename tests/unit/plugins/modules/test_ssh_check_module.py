"""ssh_check's I/O edge: logins a few at a time, in order, retried only when sshd dropped them."""
from __future__ import annotations

import json
import pwd
import threading
import time

import pytest
from module_args import patch_module_args
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


def test_ssh_modes_reads_the_folder_and_the_files_that_exist(tmp_path):
    ssh = tmp_path / ".ssh"
    ssh.mkdir(mode=0o775)
    ssh.chmod(0o775)
    (ssh / "known_hosts").write_text("")
    (ssh / "known_hosts").chmod(0o600)
    (ssh / "id_ed25519").write_text("")
    (ssh / "id_ed25519").chmod(0o644)
    assert mod.ssh_modes(str(ssh)) == {
        str(ssh): ["dir", "0775"],
        str(ssh / "id_ed25519"): ["private_key", "0644"],
        str(ssh / "known_hosts"): ["known_hosts", "0600"],
    }
    assert mod.ssh_modes(str(tmp_path / "absent")) == {}


def test_modes_feed_the_cross_node_check(tmp_path):
    """The shape ssh_check returns is the one cluster_problems judges (SSH_MODE_TOO_OPEN for the 0775 folder)."""
    from ansible_collections.ddp.cluster.plugins.filter.crossnode import cluster_problems
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    ssh.chmod(0o775)
    found = cluster_problems({"n0": {"ssh_modes": mod.ssh_modes(str(ssh))}})
    assert [(p["code"], p["subject"]) for p in found] == [("SSH_MODE_TOO_OPEN", "n0:%s" % ssh)]


def run_main(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            mod.main()
    return json.loads(capsys.readouterr().out)


def test_known_hosts_under_a_user_the_node_lacks_fails_clearly(capsys):
    out = run_main({"mode": "known_hosts", "name": "n1", "peers": [{"name": "n2", "host": "n2"}],
                    "known_hosts": "~ddp-no-such-user/.ssh/known_hosts"}, capsys)
    assert out["failed"] is True
    assert "no user ddp-no-such-user" in out["msg"], out["msg"]


def test_known_hosts_under_tilde_user_is_that_users_home(capsys):
    # ~root expands from the passwd database (type path); the file is looked at there
    home = pwd.getpwnam("root").pw_dir
    out = run_main({"mode": "known_hosts", "name": "n1", "peers": [],
                    "known_hosts": "~root/.ssh/known_hosts"}, capsys)
    assert not out.get("failed"), out
    assert all(path.startswith(home) for path in out["modes"]), out["modes"]
