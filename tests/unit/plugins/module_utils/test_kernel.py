from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.system.kernel import (
    headers_package,
    kernel_devel_plan,
    parse_mokutil_sb_state,
    secure_boot_problems,
)


def test_unknown_family():
    with pytest.raises(ValueError):
        headers_package("Suse", "5.14")


# --------------------------------------------------------------------------- kernel_devel_plan (C10)
C10_UNAME = "4.18.0-513.5.1.el8_9.x86_64"
C10_OLD = "kernel-devel-4.18.0-477.10.1.el8_8.x86_64"
C10_WANTED = "kernel-devel-4.18.0-513.5.1.el8_9.x86_64"

# (family, uname_r, installed, available, action, codes)
PLAN_CASES = [
    # C10: only the old kernel's headers, the running kernel's not offered -> refuse before the driver
    ("RedHat", C10_UNAME, [C10_OLD], [], "refuse", ["KERNEL_DEVEL_UNAVAILABLE"]),
    ("RedHat", C10_UNAME, [C10_OLD], False, "refuse", ["KERNEL_DEVEL_UNAVAILABLE"]),
    ("RedHat", C10_UNAME, C10_OLD + "\n", ["kernel-devel-4.18.0-553.el8_10.x86_64"], "refuse",
     ["KERNEL_DEVEL_UNAVAILABLE"]),
    # C10: offered by a repository -> install it
    ("RedHat", C10_UNAME, [C10_OLD], [C10_WANTED], "install", []),
    ("RedHat", C10_UNAME, [C10_OLD], ["kernel-devel-0:4.18.0-513.5.1.el8_9.x86_64"], "install", []),  # repoquery
    ("RedHat", C10_UNAME, [C10_OLD], True, "install", []),
    ("RedHat", C10_UNAME, "package kernel-devel is not installed\n", C10_WANTED + "\n", "install", []),
    ("RedHat", C10_UNAME, [C10_OLD, C10_WANTED], [], "present", []),
    ("Debian", "6.1.0-18-amd64", ["linux-headers-6.1.0-17-amd64"], ["linux-headers-6.1.0-18-amd64"], "install", []),
    ("Debian", "6.1.0-18-amd64", [], [], "refuse", ["KERNEL_DEVEL_UNAVAILABLE"]),
    ("Debian", "6.1.0-18-amd64", "linux-headers-6.1.0-18-amd64\n", False, "present", []),
]


@pytest.mark.parametrize("family, uname_r, installed, available, action, expected", PLAN_CASES)
def test_kernel_devel_plan(family, uname_r, installed, available, action, expected):
    plan = kernel_devel_plan(family, uname_r, installed, available)
    assert plan["action"] == action
    assert plan["package"] == ("kernel-devel-" if family == "RedHat" else "linux-headers-") + uname_r
    assert [p["code"] for p in plan["problems"]] == expected


def test_c10_refusal_names_the_running_kernels_package():
    (p,) = kernel_devel_plan("RedHat", C10_UNAME, [C10_OLD], [])["problems"]
    assert p["severity"] == "error" and p["subject"] == "kernel " + C10_UNAME
    assert C10_WANTED in p["message"] and C10_OLD in p["message"]
    assert C10_WANTED in p["fix"] and "reboot" in p["fix"]


def test_kernel_devel_plan_unknown_family():
    with pytest.raises(ValueError):
        kernel_devel_plan("Suse", "5.14", [], [])


# --------------------------------------------------------------------------- Secure Boot
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu_stack")


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("name, rc, state", [
    ("mokutil_sb-state_enabled__sosreport-issue1574.txt", 0, "enabled"),
    ("mokutil_sb-state_enabled_shim-validation-disabled__public-docs.txt", 0, "disabled"),
    ("mokutil_sb-state_disabled_setup-mode__public-guide.txt", 0, "disabled"),
    ("mokutil_sb-state_unsupported_rc255__leapp-actor-test.txt", 255, "unsupported"),
    ("mokutil_sb-state_no-efivars__public-doc.txt", 255, "unknown"),
])
def test_parse_mokutil_sb_state_fixtures(name, rc, state):
    assert parse_mokutil_sb_state(_fixture(name), rc) == state


@pytest.mark.parametrize("stdout, rc, state", [
    ("\x1b[32mSecureBoot enabled\n\x1b[0m", 0, "enabled"),       # coloured output of some builds
    ("Cannot determine secure boot state.\n", 0, "unknown"),
    ("", 127, "unknown"),
    ("/bin/sh: mokutil: command not found", 127, "unknown"),
    (None, None, "unknown"),
])
def test_parse_mokutil_sb_state_edges(stdout, rc, state):
    assert parse_mokutil_sb_state(stdout, rc) == state


@pytest.mark.parametrize("state, signing, severity", [
    ("enabled", False, "error"),
    ("enabled", True, None),
    ("unknown", False, "warning"),
    ("unknown", True, None),
    ("disabled", False, None),
    ("unsupported", False, None),
])
def test_secure_boot_problems(state, signing, severity):
    found = secure_boot_problems(state, signing)
    if severity is None:
        assert found == []
    else:
        (p,) = found
        assert p["code"] == "SECURE_BOOT_UNSIGNED" and p["severity"] == severity
        assert "nvidia_driver_secure_boot_signing" in p["fix"]
