"""Pure check that the kernel headers for the running kernel are installed (case C10).

DKMS builds the NVIDIA module (and OFED's, and nvidia-peermem) against
``/lib/modules/$(uname -r)/build``, which the kernel-devel (EL) or linux-headers (Debian/Ubuntu)
package of exactly the running kernel provides. When only headers for another kernel are installed,
the driver package installs "successfully", DKMS builds nothing, and the GPU is dead after the
reboot (NVIDIA/ansible-role-nvidia-driver issue 18, NVIDIA/deepops issue 658). Also the plan for
that package (install it, or refuse before the driver) and the Secure Boot state that decides whether
the module must be signed. No I/O here.
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

_PREFIX = {"RedHat": "kernel-devel-", "Debian": "linux-headers-"}


def headers_package(os_family, uname_r):
    """The package that holds the build tree for ``uname_r`` on ``os_family`` (RedHat or Debian).

    :raises ValueError: for another OS family.
    """
    if os_family not in _PREFIX:
        raise ValueError("os_family must be RedHat or Debian, got %r" % os_family)
    return _PREFIX[os_family] + uname_r


_EPOCH_RE = re.compile(r"^(kernel-devel-|linux-headers-)\d+:")


def _package_names(lines):
    """Installed/available package names, stripped, epochs dropped (``kernel-devel-0:4.18...``)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    names = []
    for line in lines or []:
        text = str(line).strip()
        if text:
            names.append(_EPOCH_RE.sub(r"\1", text))
    return names


def kernel_devel_plan(os_family, uname_r, installed, available):
    """Decide what to do about the headers of the running kernel before the driver (case C10).

    :param os_family: ``RedHat`` or ``Debian``.
    :param uname_r: the running kernel, ``uname -r`` (``4.18.0-513.5.1.el8_9.x86_64``).
    :param installed: installed header packages, names as ``rpm -q kernel-devel`` /
        ``dpkg-query -W -f '${Package}\\n' 'linux-headers-*'`` print them (a list, or the text);
        lines that are not package names ("package kernel-devel is not installed") never match.
    :param available: what the enabled repositories offer: True when the role checked that the
        wanted package is installable, False when it is not, or package names (``dnf repoquery``
        NEVRA with or without the ``0:`` epoch, ``apt-cache pkgnames`` lines).
    :returns: ``{"package": "kernel-devel-<uname_r>", "action": "present"|"install"|"refuse",
        "problems": [...]}``. ``refuse`` carries one ``KERNEL_DEVEL_UNAVAILABLE`` error: the headers
        of the running kernel are neither installed nor installable, so DKMS would build nothing
        and the GPU would be dead after the reboot (NVIDIA/ansible-role-nvidia-driver issue 18,
        NVIDIA/deepops issue 658). The role must stop before the driver.
    :raises ValueError: for another OS family (see :func:`headers_package`).
    """
    wanted = headers_package(os_family, uname_r)
    names = _package_names(installed)
    if wanted in names:
        return {"package": wanted, "action": "present", "problems": []}
    if available is True or (not isinstance(available, bool) and wanted in _package_names(available)):
        return {"package": wanted, "action": "install", "problems": []}
    others = ", ".join(sorted(n for n in names if n.startswith(_PREFIX[os_family]))) or "none"
    if os_family == "RedHat":
        fix = ("make %s installable (enable the repository that carries it, e.g. the vault of the running minor "
               "release), or update the kernel ('dnf update kernel kernel-devel'), reboot into it and run again"
               % wanted)
    else:
        fix = ("make %s installable (apt-get update; the archive may have dropped it), or upgrade the kernel "
               "('apt-get install linux-image-<flavour> linux-headers-<flavour>'), reboot into it and run again"
               % wanted)
    return {"package": wanted, "action": "refuse", "problems": [problem(
        "KERNEL_DEVEL_UNAVAILABLE", "error", "kernel %s" % uname_r,
        "%s (the build tree of the running kernel %s) is not installed and no enabled repository offers it "
        "(installed: %s): DKMS could not build the NVIDIA module, so the driver is not installed"
        % (wanted, uname_r, others), fix)]}


# mokutil --sb-state (lcp/mokutil): "SecureBoot enabled" / "SecureBoot disabled", optionally followed by
# "SecureBoot validation is disabled in shim" or "Platform is in Setup Mode"; "This system doesn't support
# Secure Boot" (exit 255) on firmware without it; "EFI variables are not supported on this system" when the
# kernel has no EFI runtime access (a legacy-BIOS boot, or efi=noruntime as on some real-time kernels).
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def parse_mokutil_sb_state(stdout, rc):
    """Read ``mokutil --sb-state``: ``"enabled"``, ``"disabled"``, ``"unsupported"`` or ``"unknown"``.

    :param stdout: the command's output (pass stdout and stderr joined: the "not supported" lines go
        to stderr on some versions). ANSI colour codes are ignored.
    :param rc: its exit code (127 or None: mokutil missing -> ``unknown``).
    :returns: ``enabled`` when Secure Boot is on and shim validates modules; ``disabled`` when it is
        off, in Setup Mode, or on with validation disabled in shim (unsigned modules load);
        ``unsupported`` when the firmware has no Secure Boot; ``unknown`` otherwise, including
        "EFI variables are not supported" (that text also appears on EFI systems booted with
        efi=noruntime, so it does not prove Secure Boot is off).
    """
    text = _ANSI_RE.sub("", stdout or "").lower()
    if rc == 127 or not text.strip():
        return "unknown"
    if "secureboot enabled" in text:
        return "disabled" if "validation is disabled in shim" in text else "enabled"
    if "secureboot disabled" in text:
        return "disabled"
    if "doesn't support secure boot" in text or "does not support secure boot" in text:
        return "unsupported"
    return "unknown"


def secure_boot_problems(state, signing_configured):
    """Problems when Secure Boot would reject an unsigned NVIDIA module.

    :param state: :func:`parse_mokutil_sb_state` result.
    :param signing_configured: the operator has set up module signing (nvidia_driver_secure_boot_signing):
        DKMS >= 3.0 signs the modules it builds with /var/lib/dkms/mok.key, and its certificate
        /var/lib/dkms/mok.pub is enrolled as a MOK. The role does not create or enrol keys.
    :returns: ``[]``, or one ``SECURE_BOOT_UNSIGNED`` problem: an error when Secure Boot is enabled
        (the kernel refuses the module: "Key was rejected by service"), a warning when the state is
        unknown.
    """
    if signing_configured or state in ("disabled", "unsupported"):
        return []
    fix = ("enrol DKMS's signing certificate (DKMS >= 3.0 signs with /var/lib/dkms/mok.key: mokutil --import "
           "/var/lib/dkms/mok.pub, then confirm it in MokManager on the console at the next boot) and set "
           "nvidia_driver_secure_boot_signing: true, or disable Secure Boot in the firmware")
    if state == "enabled":
        return [problem(
            "SECURE_BOOT_UNSIGNED", "error", "Secure Boot",
            "Secure Boot is enabled and the NVIDIA module would not be signed: the kernel would refuse to load it "
            "(modprobe: 'Key was rejected by service')", fix)]
    return [problem(
        "SECURE_BOOT_UNSIGNED", "warning", "Secure Boot",
        "the Secure Boot state could not be read (mokutil missing or no EFI runtime access): if it is enabled, "
        "the unsigned NVIDIA module will not load", "check 'mokutil --sb-state' on the node; " + fix)]
