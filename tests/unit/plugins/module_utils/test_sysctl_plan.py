"""sysctl_plan on real outputs (fixtures/sysctl/SOURCES.md): which keys net_tuning writes or sets."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.net_tuning import net_tuning_plan
from ansible_collections.ddp.cluster.plugins.module_utils.system import sysctl_plan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysctl"
NOW = (FIXTURES / "sysctl_six-keys-and-one-unknown__procps-debian12.txt").read_text()
FILE = (FIXTURES / "90-ddp-net-tuning.conf__ansible.posix.sysctl.txt").read_text()
WANTED = {  # roles/net_tuning/defaults/main.yml
    "net.core.rmem_max": 134217728, "net.core.wmem_max": 134217728,
    "net.ipv4.tcp_rmem": "4096 87380 134217728", "net.ipv4.tcp_wmem": "4096 65536 134217728",
    "net.core.default_qdisc": "fq", "net.ipv4.tcp_congestion_control": "bbr",
}


def test_kernel_output_with_tabs_is_read():
    now = sysctl_plan.parse_sysctl_output(NOW)
    assert now["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert now["net.ipv4.tcp_congestion_control"] == "bbr"
    assert "net.nosuch.key" not in now


def test_the_file_written_by_ansible_posix_sysctl_needs_nothing():
    assert net_tuning_plan(NOW, FILE, WANTED)["file"] == []


def test_only_the_keys_that_differ_now_are_set():
    assert net_tuning_plan(NOW, FILE, WANTED)["now"] == [
        "net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.default_qdisc"]


def test_no_file_and_an_unknown_key():
    found = net_tuning_plan(NOW, "", dict(WANTED, **{"net.nosuch.key": 1}))
    assert found["file"] == list(WANTED) + ["net.nosuch.key"]
    assert found["now"][-1] == "net.nosuch.key"


def test_file_comments_and_last_line_win():
    text = "# comment\n; other\nnet.core.default_qdisc = pfifo_fast\nnet.core.default_qdisc=fq\n"
    assert sysctl_plan.parse_sysctl_file(text) == {"net.core.default_qdisc": "fq"}


@pytest.mark.parametrize("args", [(NOW, FILE, ["net.core.rmem_max"]), (None, FILE, WANTED), (NOW, None, WANTED)])
def test_bad_input_is_a_filter_error(args):
    with pytest.raises(AnsibleFilterError):
        net_tuning_plan(*args)
