"""Pure check that the kernel headers for the running kernel are installed (case C10).

DKMS builds the NVIDIA module (and OFED's, and nvidia-peermem) against
``/lib/modules/$(uname -r)/build``, which the kernel-devel (EL) or linux-headers (Debian/Ubuntu)
package of exactly the running kernel provides. When only headers for another kernel are installed,
the driver package installs "successfully", DKMS builds nothing, and the GPU is dead after the
reboot (NVIDIA/ansible-role-nvidia-driver issue 18, NVIDIA/deepops issue 658). No I/O here.
"""
from __future__ import annotations

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

_PREFIX = {"RedHat": "kernel-devel-", "Debian": "linux-headers-"}


def headers_package(os_family, uname_r):
    """The package that holds the build tree for ``uname_r`` on ``os_family`` (RedHat or Debian).

    :raises ValueError: for another OS family.
    """
    if os_family not in _PREFIX:
        raise ValueError("os_family must be RedHat or Debian, got %r" % os_family)
    return _PREFIX[os_family] + uname_r


def kernel_devel_problems(os_family, uname_r, installed):
    """Problems when the running kernel has no headers package.

    :param os_family: ``RedHat`` or ``Debian`` (ansible_facts.os_family).
    :param uname_r: the running kernel, ``uname -r`` (e.g. ``4.18.0-513.5.1.el8_9.x86_64``).
    :param installed: names of installed header packages as ``rpm -q kernel-devel`` prints them
        (``kernel-devel-4.18.0-477.10.1.el8_8.x86_64``) or as dpkg lists them (``linux-headers-6.1.0-18-amd64``).
    :returns: ``[]`` or one ``KERNEL_DEVEL_MISSING`` error naming the package to install.
    """
    wanted = headers_package(os_family, uname_r)
    names = [line.strip() for line in installed if line and line.strip()]
    if wanted in names:
        return []
    others = ", ".join(sorted(n for n in names if n.startswith(_PREFIX[os_family]))) or "none"
    return [problem(
        "KERNEL_DEVEL_MISSING", "error", "kernel %s" % uname_r,
        "no %s for the running kernel %s (installed: %s): DKMS cannot build the NVIDIA module"
        % (wanted.rsplit("-" + uname_r, 1)[0], uname_r, others),
        "install %s before the driver (or update the kernel, reboot into it, then install its headers)" % wanted)]
