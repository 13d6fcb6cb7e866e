from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.kernel import headers_package, kernel_devel_problems


@pytest.mark.parametrize("family, uname_r, installed, expected", [
    # C10: kernel-devel of another kernel only
    ("RedHat", "4.18.0-513.5.1.el8_9.x86_64", ["kernel-devel-4.18.0-477.10.1.el8_8.x86_64"],
     "install kernel-devel-4.18.0-513.5.1.el8_9.x86_64"),
    ("RedHat", "4.18.0-513.5.1.el8_9.x86_64", [], "install kernel-devel-4.18.0-513.5.1.el8_9.x86_64"),
    ("RedHat", "4.18.0-513.5.1.el8_9.x86_64",
     ["kernel-devel-4.18.0-477.10.1.el8_8.x86_64", "kernel-devel-4.18.0-513.5.1.el8_9.x86_64"], None),
    ("Debian", "6.1.0-18-amd64", ["linux-headers-6.1.0-17-amd64"], "install linux-headers-6.1.0-18-amd64"),
    ("Debian", "6.1.0-18-amd64", ["linux-headers-6.1.0-18-amd64\n"], None),
])
def test_kernel_devel_problems(family, uname_r, installed, expected):
    found = kernel_devel_problems(family, uname_r, installed)
    if expected is None:
        assert found == []
    else:
        (p,) = found
        assert p["code"] == "KERNEL_DEVEL_MISSING" and p["severity"] == "error"
        assert p["fix"].startswith(expected)


def test_c10_message_names_what_is_installed():
    (p,) = kernel_devel_problems("RedHat", "4.18.0-513.5.1.el8_9.x86_64", ["kernel-devel-4.18.0-477.10.1.el8_8.x86_64"])
    assert "kernel-devel-4.18.0-477.10.1.el8_8.x86_64" in p["message"]


def test_unknown_family():
    with pytest.raises(ValueError):
        headers_package("Suse", "5.14")
