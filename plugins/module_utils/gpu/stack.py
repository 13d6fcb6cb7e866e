# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure planning of the system GPU stack: NVIDIA driver, CUDA toolkit, cuDNN and NCCL packages.

No I/O here. The caller (the ``ddp.cluster.gpu_stack_plan`` filter, then the nvidia_driver,
cuda_toolkit, cudnn and nccl roles) passes in the parsed compatibility matrix, the stack that
``compat.resolve_stack`` resolved, facts, and the text of package-manager commands; these functions
return plain data: package names and versions to install, what to hold, and problems.

Problems have the shape of ``compat.py``: ``{code, variable, message, fix}``; ``variable`` is the
role variable to change. Codes are listed in :data:`PROBLEM_CODES` and documented in
docs/troubleshooting.md.

Vocabulary
    driver branch   first field of an NVIDIA driver version, as a string: ``"580"`` for 580.95.05.
    flavor          ``"open"`` (NVIDIA open GPU kernel modules) or ``"proprietary"``.
    device id       PCI device id of an NVIDIA function, as sysfs prints it (``"0x20b2"``),
                    bare hex (``"20b2"``), ``lspci -n`` style (``"10de:20b2"``) or an int.
    os_family       ``ansible_facts.os_family``: ``RedHat`` or ``Debian``.
    distribution    ``ansible_facts.distribution``: ``Ubuntu``, ``Debian``, ``Rocky``, ``RedHat`` ...

Sources of the rules (each function names the ones it uses):
    [open-readme]   NVIDIA/open-gpu-kernel-modules README, "Compatible GPUs": the open kernel
                    modules "can be used on any Turing or later GPU"; its table starts at 1E02.
    [open-blog]     NVIDIA Technical Blog, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel
                    Modules" (2024): open modules first released with R515 (May 2022); the default
                    from R560; Grace Hopper and Blackwell require them; Maxwell, Pascal and Volta
                    cannot use them; mixed old/new systems stay on the proprietary modules.
                    https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/
    [deprecation]   NVIDIA forum, "Unix Graphics Feature Deprecation Schedule": from the 560 series
                    the installer picks the open flavor when every GPU in the system can use it.
    [pci-ids]       PCI device id ranges per chip family: https://pci-ids.ucw.cz/read/PC/10de and the
                    nouveau CodeNames page (https://nouveau.freedesktop.org/CodeNames.html).
    [yum-dkms]      NVIDIA/yum-packaging-dkms-nvidia README: streams ``latest``, ``latest-dkms``,
                    ``XXX`` (precompiled), ``XXX-dkms`` (XXX = the branch); the NVIDIA Driver
                    Installation Guide adds ``open-dkms`` and ``XXX-open`` (DKMS-built open modules,
                    kmod-nvidia-open-dkms); ``dnf module list nvidia-driver`` output in
                    NVIDIA/yum-packaging-precompiled-kmod issues 50, 55 and 63 shows them.
    [dc-drivers]    NVIDIA Data Center Drivers, "Driver Lifecycle" and "Supported Drivers and CUDA
                    Toolkit Versions": R535 and R580 are Long Term Support Branches.
                    https://docs.nvidia.com/datacenter/tesla/drivers/index.html
    [cudnn-install] cuDNN installation guides: 8.9 (``libcudnn8=${v}-1+cuda12.1``,
                    ``libcudnn8-${v}-1.cuda12.1``) and 9.x (``libcudnn9-cuda-12``,
                    ``libcudnn9-dev-cuda-12`` / ``libcudnn9-devel-cuda-12``).
                    https://docs.nvidia.com/deeplearning/cudnn/installation/latest/linux.html
    [nccl-install]  NCCL installation guide: ``libnccl2`` / ``libnccl-dev`` (apt), ``libnccl`` /
                    ``libnccl-devel`` (rpm); versions ``2.18.3-1+cuda12.1``.
                    https://docs.nvidia.com/deeplearning/nccl/install-guide/index.html
    [cuda-compat]   CUDA Compatibility guide, minor version compatibility: a program built with any
                    CUDA 12.y runs on a driver that supports CUDA 12.x (with documented limits).
                    https://docs.nvidia.com/deploy/cuda-compatibility/index.html
    [nouveau]       CUDA Installation Guide for Linux, "Disabling Nouveau": blacklist, regenerate
                    the initramfs, reboot.
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.compat import normalize_cuda
from ansible_collections.ddp.cluster.plugins.module_utils.versions import compare_versions, version_tuple

__all__ = [
    "PROBLEM_CODES",
    "cuda_home",
    "cuda_toolkit_package",
    "cudnn_packages",
    "driver_packages",
    "el_module_stream",
    "gpu_generation",
    "nccl_package_names",
    "nouveau_actions",
    "parse_apt_madison",
    "parse_dnf_module_enabled",
    "parse_dnf_showduplicates",
    "parse_nvcc_version",
    "repo_distro",
    "select_driver_flavor",
    "select_nccl_build",
    "stream_conflict_problems",
    "system_stack_plan",
]

# Stable problem codes (documented in docs/troubleshooting.md).
PROBLEM_CODES = (
    "GPU_STACK_NO_CUDA",
    "GPU_STACK_BRANCH_TOO_OLD",
    "GPU_STACK_OPEN_REQUIRED",
    "GPU_STACK_OPEN_UNSUPPORTED",
    "GPU_STACK_BAD_VALUE",
    "GPU_STACK_UNKNOWN_VERSION",
    "NCCL_BUILD_NOT_FOUND",
    "DNF_STREAM_CONFLICT",
)

VAR_CUDA = "ddp_cuda_version"
VAR_BRANCH = "nvidia_driver_branch"
VAR_FLAVOR = "nvidia_driver_flavor"
VAR_SOURCE = "nvidia_driver_source"
VAR_CUDNN = "cudnn_version"
VAR_NCCL = "nccl_version"
VAR_DEVICES = "device_ids"

FLAVORS = ("open", "proprietary")
SOURCES = ("nvidia", "distribution")

# Branch thresholds, with their sources.
OPEN_MIN_BRANCH = 515        # [open-blog]: open modules first shipped with R515
OPEN_DEFAULT_BRANCH = 560    # [open-blog], [deprecation]: open is the default from R560
BLACKWELL_MIN_BRANCH = 570   # first production branch with Blackwell support (CUDA 12.8 GA ships 570.26)

EL_LOCK_GLOBS = ["nvidia-driver*", "kmod-nvidia*", "nvidia-open*", "cuda-drivers*", "nvidia-persistenced*"]


def _problem(code, variable, message, fix):
    return {"code": code, "variable": variable, "message": message, "fix": fix}


# --------------------------------------------------------------------------- GPU generations
# PCI device-id ranges (inclusive) of NVIDIA chip families, low to high, from [pci-ids]. Data
# center examples in the comments. Ids from 0x1E00 up that are not listed are Turing or newer:
# the open-modules table [open-readme] starts at 0x1E02 and no earlier family uses higher ids.
_GENERATIONS = (
    (0x0FC0, 0x0FFF, "Kepler"),         # GK107
    (0x1000, 0x103F, "Kepler"),         # GK110, GK110B, GK210 (Tesla K40 0x1024, K80 0x102D)
    (0x1180, 0x11FF, "Kepler"),         # GK104, GK106 (Tesla K10 0x118F)
    (0x1280, 0x12BF, "Kepler"),         # GK208
    (0x1340, 0x143F, "Maxwell"),        # GM108, GM107 (Tesla M10 0x13BD), GM204 (M60 0x13F2), GM206
    (0x15F0, 0x15FF, "Pascal"),         # GP100 (Tesla P100 0x15F7, 0x15F8, 0x15F9)
    (0x17C0, 0x17FF, "Maxwell"),        # GM200 (Tesla M40 0x17FD)
    (0x1B00, 0x1D7F, "Pascal"),         # GP102 (P40 0x1B38), GP104 (P4 0x1BB3), GP106, GP107, GP108
    (0x1D80, 0x1DFF, "Volta"),          # GV100 (V100 SXM2 0x1DB1, PCIe 0x1DB4, V100S 0x1DF6)
    (0x1E00, 0x1FFF, "Turing"),         # TU102, TU104 (T4 0x1EB8), TU106, TU117
    (0x2080, 0x20FF, "Ampere"),         # GA100 (A100 0x20B0, 0x20B2, 0x20B5, 0x20F1; A30 0x20B7)
    (0x2180, 0x21FF, "Turing"),         # TU116
    (0x2200, 0x223F, "Ampere"),         # GA102 (A40 0x2235, A10 0x2236)
    (0x2300, 0x237F, "Hopper"),         # GH100 (H100 SXM5 0x2330, PCIe 0x2331, H200 0x2335, GH200 0x2342)
    (0x2400, 0x25FF, "Ampere"),         # GA103, GA104, GA106, GA107 (A16 / A2 0x25B6)
    (0x2680, 0x28FF, "Ada Lovelace"),   # AD102 (L40 0x26B5, L40S 0x26B9), AD103, AD104 (L4 0x27B8), AD106, AD107
    (0x2900, 0x2FFF, "Blackwell"),      # GB100/GB102 (B200 0x2901, GB200 0x2941), GB202, GB203, GB205-GB207
)
TURING_OR_NEWER = ("Turing", "Ampere", "Hopper", "Ada Lovelace", "Blackwell")
UNLISTED_NEW = "Turing or newer (not in table)"
UNLISTED_NEWEST = "Blackwell or newer (not in table)"
_TURING_FIRST_ID = 0x1E00
_NEWEST_FIRST_ID = 0x3000

_HEX_RE = re.compile(r"^(?:(?:0x)?10de:)?(?:0x)?([0-9a-f]{1,4})$")


def _device_int(device_id):
    if isinstance(device_id, bool):
        raise ValueError("not a PCI device id: %r" % (device_id,))
    if isinstance(device_id, int):
        if not 0 <= device_id <= 0xFFFF:
            raise ValueError("PCI device id out of range: %r" % (device_id,))
        return device_id
    match = _HEX_RE.match(str(device_id).strip().lower())
    if not match:
        raise ValueError("not a PCI device id (expected e.g. 0x20b2, 20b2 or 10de:20b2): %r" % (device_id,))
    return int(match.group(1), 16)


def gpu_generation(device_id):
    """Return the chip family of an NVIDIA PCI device id.

    :param device_id: ``"0x20b2"``, ``"20b2"``, ``"10de:20b2"`` (case-insensitive) or ``0x20b2``.
    :returns: ``"Kepler"``, ``"Maxwell"``, ``"Pascal"``, ``"Volta"``, ``"Turing"``, ``"Ampere"``,
        ``"Hopper"``, ``"Ada Lovelace"`` or ``"Blackwell"`` for ids in the table; for ids not in the
        table, ``"Turing or newer (not in table)"`` from 0x1E00 (the first id of [open-readme]'s
        table is 0x1E02), ``"Blackwell or newer (not in table)"`` from 0x3000 (above every
        Blackwell range: an inference, NVIDIA ships new GPUs for the open modules only), and
        None below 0x1E00 (an older or unlisted chip: not known to be Turing or newer).
    :raises ValueError: when the id is not a 16-bit hex number.

    Ranges are per chip from [pci-ids]; the table keeps data center parts (Tesla K80 0x102D,
    P100 0x15F8, V100 0x1DB1, T4 0x1EB8, A100 0x20B2, H100 0x2330, L40 0x26B5, B200 0x2901).
    Grace Hopper (GH200) reads as Hopper here although [open-blog] says it needs the open modules.
    """
    value = _device_int(device_id)
    for low, high, name in _GENERATIONS:
        if low <= value <= high:
            return name
    if value >= _NEWEST_FIRST_ID:
        return UNLISTED_NEWEST
    if value >= _TURING_FIRST_ID:
        return UNLISTED_NEW
    return None


def _is_turing_or_newer(generation):
    return generation in TURING_OR_NEWER or generation in (UNLISTED_NEW, UNLISTED_NEWEST)


def _needs_open(generation):
    return generation in ("Blackwell", UNLISTED_NEWEST)


def _branch_int(branch):
    """``"580"`` / ``580`` -> 580; raises ValueError otherwise (a full version is not a branch)."""
    if isinstance(branch, bool):
        raise ValueError("not a driver branch: %r" % (branch,))
    if isinstance(branch, int):
        value = branch
    else:
        text = str(branch).strip()
        if not text.isdigit():
            raise ValueError("not a driver branch (expected the first field, e.g. 580): %r" % (branch,))
        value = int(text)
    if value <= 0:
        raise ValueError("not a driver branch: %r" % (branch,))
    return value


def _hex(value):
    return "0x%04x" % value


def select_driver_flavor(branch, device_ids, requested="auto"):
    """Choose the kernel-module flavor: NVIDIA open GPU kernel modules or proprietary.

    :param branch: driver branch, ``"580"`` or ``580``.
    :param device_ids: PCI device ids of the node's NVIDIA GPUs (see :func:`gpu_generation`);
        an empty list or None means no GPU was seen (a container, a node before passthrough).
    :param requested: ``"auto"`` (default), ``"open"`` or ``"proprietary"`` (nvidia_driver_flavor).
    :returns: ``{"flavor": "open"|"proprietary", "reason": str, "problems": [...]}``. With an
        explicit request the flavor is the request, and problems say why it cannot work.

    Rules and sources:
      * open modules need Turing or newer [open-readme] and branch >= 515 [open-blog];
        ``open`` with an older GPU or branch -> GPU_STACK_OPEN_UNSUPPORTED.
      * Blackwell needs the open modules [open-blog] and branch >= 570:
        ``proprietary`` with a Blackwell GPU -> GPU_STACK_OPEN_REQUIRED; branch < 570 ->
        GPU_STACK_BRANCH_TOO_OLD.
      * ``auto``: open when every GPU is Turing or newer (or none is seen) and branch >= 560, where
        NVIDIA made open the default [open-blog], [deprecation]; proprietary otherwise (mixed
        old/new systems stay proprietary [open-blog]); open when a Blackwell GPU is present.
    """
    problems = []
    try:
        branch_num = _branch_int(branch)
    except ValueError as exc:
        problems.append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_BRANCH, str(exc),
            "Set %s to auto or to a branch number such as 580." % VAR_BRANCH))
        return {"flavor": "proprietary", "reason": "driver branch unreadable", "problems": problems}

    wanted = str(requested if requested is not None else "auto").strip().lower() or "auto"
    if wanted not in ("auto",) + FLAVORS:
        problems.append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_FLAVOR,
            "%s is %r; it must be auto, open or proprietary" % (VAR_FLAVOR, requested),
            "Set %s to auto (open where every GPU is Turing or newer, from R560), open or proprietary."
            % VAR_FLAVOR))
        wanted = "auto"

    if isinstance(device_ids, (str, int)):
        device_ids = [device_ids]
    old, newest = _gpu_groups(device_ids, problems)

    if newest and branch_num < BLACKWELL_MIN_BRANCH:
        problems.append(_problem(
            "GPU_STACK_BRANCH_TOO_OLD", VAR_BRANCH,
            "driver branch %d does not support GPU %s: Blackwell needs branch %d or newer"
            % (branch_num, ", ".join(newest), BLACKWELL_MIN_BRANCH),
            "Set %s to auto or to %d or newer (the R580 long term support branch covers Blackwell)."
            % (VAR_BRANCH, BLACKWELL_MIN_BRANCH)))

    if wanted == "open":
        return _open_requested(branch_num, old, problems)

    if wanted == "proprietary":
        return _proprietary_requested(newest, problems)

    return _auto_flavor(branch_num, device_ids, old, newest, problems)


def _gpu_groups(device_ids, problems):
    """Sort the node's GPUs by what they allow; an unreadable id is added to ``problems``.

    :returns: ``(old, newest)``: the GPUs older than Turing (or not in the table) and the GPUs that need the open
        modules, each as ``"0x20b2 (Ampere)"``.
    """
    old, newest = [], []
    for device in device_ids or []:
        try:
            value = _device_int(device)
        except ValueError as exc:
            problems.append(_problem(
                "GPU_STACK_BAD_VALUE", VAR_DEVICES, str(exc),
                "Pass the PCI device ids as hardware_facts reports them (nvidia_gpus[].device_id, e.g. 0x20b2)."))
            continue
        generation = gpu_generation(value)
        if not _is_turing_or_newer(generation):
            old.append("%s (%s)" % (_hex(value), generation or "older than Turing or not in the table"))
        elif _needs_open(generation):
            newest.append("%s (%s)" % (_hex(value), generation))
    return old, newest


def _open_requested(branch_num, old, problems):
    """The result for an explicit ``open``, with a problem when an old GPU or the branch cannot use it.

    :returns: the ``select_driver_flavor`` result dict.
    """
    if old:
        problems.append(_problem(
            "GPU_STACK_OPEN_UNSUPPORTED", VAR_FLAVOR,
            "the open GPU kernel modules need Turing or newer; GPU %s cannot use them" % ", ".join(old),
            "Set %s to proprietary (or auto) on nodes with these GPUs." % VAR_FLAVOR))
    if branch_num < OPEN_MIN_BRANCH:
        problems.append(_problem(
            "GPU_STACK_OPEN_UNSUPPORTED", VAR_FLAVOR,
            "driver branch %d has no open GPU kernel modules (they start with R%d)" % (branch_num, OPEN_MIN_BRANCH),
            "Set %s to proprietary, or %s to %d or newer." % (VAR_FLAVOR, VAR_BRANCH, OPEN_MIN_BRANCH)))
    return {"flavor": "open", "reason": "requested (%s: open)" % VAR_FLAVOR, "problems": problems}


def _proprietary_requested(newest, problems):
    """The result for an explicit ``proprietary``, with a problem when a GPU needs the open modules.

    :returns: the ``select_driver_flavor`` result dict.
    """
    if newest:
        problems.append(_problem(
            "GPU_STACK_OPEN_REQUIRED", VAR_FLAVOR,
            "GPU %s is only supported by the open GPU kernel modules; the proprietary modules do not "
            "drive it" % ", ".join(newest),
            "Set %s to open (or auto)." % VAR_FLAVOR))
    return {"flavor": "proprietary", "reason": "requested (%s: proprietary)" % VAR_FLAVOR, "problems": problems}


def _auto_flavor(branch_num, device_ids, old, newest, problems):
    """The result for ``auto``: open for a GPU that needs it, proprietary for an old GPU, else by branch.

    :returns: the ``select_driver_flavor`` result dict.
    """
    if newest:
        if old:
            problems.append(_problem(
                "GPU_STACK_OPEN_UNSUPPORTED", VAR_FLAVOR,
                "this node mixes GPU %s, which needs the open modules, with GPU %s, which cannot use them"
                % (", ".join(newest), ", ".join(old)),
                "Put the older GPUs in other nodes: one driver flavor drives every GPU of a node."))
        return {"flavor": "open", "reason": "GPU %s needs the open GPU kernel modules" % ", ".join(newest),
                "problems": problems}
    if old:
        return {"flavor": "proprietary",
                "reason": "GPU %s is not Turing or newer: the open modules cannot drive it" % ", ".join(old),
                "problems": problems}
    seen = "every GPU is Turing or newer" if device_ids else "no GPU seen"
    if branch_num >= OPEN_DEFAULT_BRANCH:
        return {"flavor": "open",
                "reason": "%s and branch %d >= %d, where NVIDIA made the open modules the default"
                          % (seen, branch_num, OPEN_DEFAULT_BRANCH),
                "problems": problems}
    return {"flavor": "proprietary",
            "reason": "%s but branch %d < %d: proprietary is the default before R%d"
                      % (seen, branch_num, OPEN_DEFAULT_BRANCH, OPEN_DEFAULT_BRANCH),
            "problems": problems}


# --------------------------------------------------------------------------- packages
def _flavor(flavor):
    text = str(flavor).strip().lower()
    if text not in FLAVORS:
        raise ValueError("flavor must be open or proprietary, got %r" % (flavor,))
    return text


def el_module_stream(branch, flavor):
    """The ``nvidia-driver`` dnf module stream for a branch and flavor (EL 8 / 9).

    ``("580", "proprietary")`` -> ``"580-dkms"``; ``("580", "open")`` -> ``"580-open"``.
    Both build the module with DKMS (``XXX-open`` installs kmod-nvidia-open-dkms); the precompiled
    ``XXX`` stream is not used because it lags new kernels (NVIDIA/yum-packaging-precompiled-kmod
    issues 35, 55). Source: [yum-dkms].
    :raises ValueError: on a branch that is not an integer or an unknown flavor.
    """
    branch_num = _branch_int(branch)
    return "%d-%s" % (branch_num, "open" if _flavor(flavor) == "open" else "dkms")


def driver_packages(os_family, distribution, source, branch, flavor):
    """Packages that install the NVIDIA driver, the version-lock globs and the pin.

    :param os_family: ``RedHat`` or ``Debian``.
    :param distribution: ``ansible_facts.distribution`` (``Ubuntu``, ``Debian``, ``Rocky`` ...).
    :param source: ``nvidia`` (NVIDIA's CUDA repository) or ``distribution`` (Ubuntu's
        ``nvidia-driver-<branch>-server[-open]`` packages; Ubuntu only).
    :param branch: driver branch, ``"580"``.
    :param flavor: ``open`` or ``proprietary``.
    :returns: ``{"install": [...], "lock": [...], "pin_glob": "580.*", "problems": [...]}``.
        RedHat: install ``@nvidia-driver:<stream>/default`` (see :func:`el_module_stream`), lock the
        globs of :data:`EL_LOCK_GLOBS` (dnf versionlock). Debian family with source nvidia: install
        ``nvidia-open`` (open) or ``cuda-drivers`` (proprietary), the branch held by an apt pin on
        ``pin_glob``; lock (apt-mark hold) = install + ``nvidia-persistenced``. Ubuntu with source
        distribution: ``nvidia-driver-<branch>-server-open`` / ``nvidia-driver-<branch>-server``.
        A bad combination returns empty lists and a GPU_STACK_BAD_VALUE problem.
    Sources: NVIDIA Driver Installation Guide (package names per distribution), [yum-dkms].
    """
    out = {"install": [], "lock": [], "pin_glob": None, "problems": []}
    try:
        branch_num = _branch_int(branch)
        flavor = _flavor(flavor)
    except ValueError as exc:
        out["problems"].append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_BRANCH if "branch" in str(exc) else VAR_FLAVOR, str(exc),
            "Set %s to a branch number (e.g. 580) and %s to open or proprietary." % (VAR_BRANCH, VAR_FLAVOR)))
        return out
    src = str(source).strip().lower()
    if src not in SOURCES:
        out["problems"].append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_SOURCE, "%s is %r; it must be nvidia or distribution" % (VAR_SOURCE, source),
            "Set %s to nvidia (NVIDIA's CUDA repository) or, on Ubuntu, distribution." % VAR_SOURCE))
        return out
    out["pin_glob"] = "%d.*" % branch_num
    if os_family == "RedHat":
        if src != "nvidia":
            out["problems"].append(_problem(
                "GPU_STACK_BAD_VALUE", VAR_SOURCE,
                "%s: distribution is for Ubuntu; %s does not ship NVIDIA driver branches" % (VAR_SOURCE, distribution),
                "Set %s to nvidia on EL nodes." % VAR_SOURCE))
            return out
        out["install"] = ["@nvidia-driver:%s/default" % el_module_stream(branch_num, flavor)]
        out["lock"] = list(EL_LOCK_GLOBS)
        return out
    if os_family == "Debian":
        if src == "nvidia":
            out["install"] = ["nvidia-open" if flavor == "open" else "cuda-drivers"]
            out["lock"] = out["install"] + ["nvidia-persistenced"]
            return out
        if distribution != "Ubuntu":
            out["problems"].append(_problem(
                "GPU_STACK_BAD_VALUE", VAR_SOURCE,
                "%s: distribution needs Ubuntu's nvidia-driver-<branch>-server packages; %s has no per-branch "
                "driver packages" % (VAR_SOURCE, distribution),
                "Set %s to nvidia on %s nodes." % (VAR_SOURCE, distribution)))
            return out
        out["install"] = ["nvidia-driver-%d-server%s" % (branch_num, "-open" if flavor == "open" else "")]
        out["lock"] = list(out["install"])
        return out
    out["pin_glob"] = None
    out["problems"].append(_problem(
        "GPU_STACK_BAD_VALUE", VAR_SOURCE,
        "os_family %r is not supported by the GPU roles (RedHat or Debian)" % (os_family,),
        "Run the GPU roles on EL 8/9, Debian 12 or Ubuntu 22.04/24.04 nodes."))
    return out


def cuda_toolkit_package(cuda):
    """``"12.6"`` -> ``"cuda-toolkit-12-6"`` (the same name in NVIDIA's apt and rpm repositories).

    :raises ValueError: for ``cpu``, auto/None or an unreadable build.
    """
    return "cuda-toolkit-%s" % _cuda_build(cuda).replace(".", "-")


def cuda_home(cuda):
    """``"12.6"`` -> ``"/usr/local/cuda-12.6"`` (where the toolkit packages install).

    :raises ValueError: for ``cpu``, auto/None or an unreadable build.
    """
    return "/usr/local/cuda-%s" % _cuda_build(cuda)


def _cuda_build(cuda):
    norm = normalize_cuda(cuda)
    if norm is None or norm == "cpu":
        raise ValueError("a CUDA build such as 12.6 is needed, got %r" % (cuda,))
    return norm


def cudnn_packages(os_family, cudnn_version, cuda, devel=True):
    """cuDNN package names and install specs for a cuDNN version and CUDA build. Source: [cudnn-install].

    :param os_family: ``Debian`` or ``RedHat``.
    :param cudnn_version: four-field cuDNN version, ``"8.9.2.26"`` or ``"9.10.2.21"``.
    :param cuda: CUDA build (``"12.1"``, ``"cu121"``).
    :param devel: include the headers package (``-dev`` / ``-devel``).
    :returns: ``{"major": 8|9, "names": [...], "specs": [...], "package_version": str}``.
        cuDNN 8 packages are per CUDA major.minor: Debian ``libcudnn8=8.9.2.26-1+cuda12.1``,
        ``libcudnn8-dev=<same>``; RedHat ``libcudnn8-8.9.2.26-1.cuda12.1``, ``libcudnn8-devel-<same>``.
        cuDNN 9 packages are per CUDA major: Debian ``libcudnn9-cuda-12=9.10.2.21-1``,
        ``libcudnn9-dev-cuda-12=9.10.2.21-1``; RedHat ``libcudnn9-cuda-12-9.10.2.21-1``,
        ``libcudnn9-devel-cuda-12-9.10.2.21-1``. ``names`` carry no version; ``specs`` do (apt
        ``name=version``, dnf ``name-version``).
    :raises ValueError: for another os_family, an unreadable version or build, or cuDNN < 8 / > 9.
    """
    if os_family not in ("Debian", "RedHat"):
        raise ValueError("os_family must be Debian or RedHat, got %r" % (os_family,))
    fields = version_tuple(cudnn_version)
    build = _cuda_build(cuda)
    major = fields[0]
    debian = os_family == "Debian"
    if major == 8:
        runtime = "libcudnn8"
        headers = "libcudnn8-dev" if debian else "libcudnn8-devel"
        package_version = "%s-1%scuda%s" % (cudnn_version, "+" if debian else ".", build)
    elif major == 9:
        cuda_major = build.split(".")[0]
        runtime = "libcudnn9-cuda-%s" % cuda_major
        headers = ("libcudnn9-dev-cuda-%s" if debian else "libcudnn9-devel-cuda-%s") % cuda_major
        package_version = "%s-1" % cudnn_version
    else:
        raise ValueError("cuDNN %s: only cuDNN 8 and 9 packages are named here" % (cudnn_version,))
    names = [runtime] + ([headers] if devel else [])
    sep = "=" if debian else "-"
    return {"major": major, "names": names, "specs": ["%s%s%s" % (n, sep, package_version) for n in names],
            "package_version": package_version}


def nccl_package_names(os_family, devel=True):
    """``Debian`` -> ``["libnccl2", "libnccl-dev"]``; ``RedHat`` -> ``["libnccl", "libnccl-devel"]``.

    Source: [nccl-install]. :raises ValueError: for another os_family.
    """
    if os_family == "Debian":
        names = ["libnccl2", "libnccl-dev"]
    elif os_family == "RedHat":
        names = ["libnccl", "libnccl-devel"]
    else:
        raise ValueError("os_family must be Debian or RedHat, got %r" % (os_family,))
    return names if devel else names[:1]


def repo_distro(os_family, distribution, os_major):
    """Directory name of NVIDIA's CUDA repository for a distribution, or None when not published.

    ``("Debian", "Ubuntu", "22")`` -> ``"ubuntu2204"``; ``("Debian", "Debian", "12")`` ->
    ``"debian12"``; ``("RedHat", "Rocky", "9")`` -> ``"rhel9"``. Only the releases the roles
    support are named (debian12, ubuntu2204, ubuntu2404, rhel8, rhel9); others give None.
    Source: https://developer.download.nvidia.com/compute/cuda/repos/ (directory listing).
    """
    major = str(os_major).strip().split(".", maxsplit=1)[0]
    if os_family == "RedHat" and major in ("8", "9"):
        return "rhel%s" % major
    if os_family == "Debian" and distribution == "Ubuntu" and major in ("22", "24"):
        return "ubuntu%s04" % major
    if os_family == "Debian" and distribution == "Debian" and major == "12":
        return "debian12"
    return None


# --------------------------------------------------------------------------- parsers
def parse_apt_madison(text):
    """Parse ``apt-cache madison <package>...`` output.

    Each line is ``package | version | source`` (``libnccl2 | 2.25.1-1+cuda12.8 |
    https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  Packages``).
    :returns: list of ``{"package", "version", "source"}`` in the order printed; other lines
        (warnings, blank lines) are skipped.
    """
    rows = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not all(parts[:2]) or " " in parts[0] or " " in parts[1]:
            continue
        rows.append({"package": parts[0], "version": parts[1], "source": parts[2]})
    return rows


_ARCHES = ("x86_64", "aarch64", "noarch", "ppc64le", "i686", "s390x", "src")
_DNF_SKIP = ("last metadata expiration check", "available packages", "installed packages",
             "updating subscription management", "error:", "extra packages", "upgradable packages")


def _split_arch(name):
    base, dot, arch = name.rpartition(".")
    if dot and arch in _ARCHES:
        return base, arch
    return name, None


def parse_dnf_showduplicates(text):
    """Parse ``dnf --showduplicates list <package>`` (or ``yum``) output.

    Lines are ``name.arch  version-release  repo`` (``libnccl.x86_64  2.18.3-1+cuda12.1
    cuda-rhel8-x86_64``) under "Installed Packages" (repo ``@...``) / "Available Packages"; dnf
    moves the version to the next line when ``name.arch`` is too long, which is handled.
    :returns: list of ``{"package", "arch", "version", "repo"}`` in the order printed.
    """
    rows = []
    pending = None
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.lower().startswith(_DNF_SKIP):
            pending = None
            continue
        tokens = stripped.split()
        if pending is not None and len(tokens) == 2 and not line[:1].isalnum():
            tokens = [pending] + tokens
        pending = None
        if len(tokens) == 1 and _split_arch(tokens[0])[1]:
            pending = tokens[0]
            continue
        if len(tokens) != 3 or not tokens[1][:1].isdigit():
            continue
        package, arch = _split_arch(tokens[0])
        if arch is None:
            continue
        rows.append({"package": package, "arch": arch, "version": tokens[1], "repo": tokens[2]})
    return rows


_NVCC_RE = re.compile(r"release (\d+)\.(\d+), V(\d+(?:\.\d+)+)")


def parse_nvcc_version(text):
    """Parse ``nvcc --version``: ``Cuda compilation tools, release 12.6, V12.6.77``.

    :returns: ``{"release": "12.6", "version": "12.6.77"}``, or None when the line is absent
        (nvcc missing, or another program's output).
    """
    match = _NVCC_RE.search(text or "")
    if not match:
        return None
    return {"release": "%s.%s" % (match.group(1), match.group(2)), "version": match.group(3)}


def parse_dnf_module_enabled(text, module="nvidia-driver"):
    """The enabled stream of ``module`` in ``dnf module list [--enabled] <module>`` output, or None.

    Rows are ``name  stream [flags]  profiles  summary``; the stream flags are ``[d]`` default,
    ``[e]`` enabled, ``[x]`` disabled, ``[i]`` installed, possibly joined (``[d][e]``). The
    "Hint:" legend, headers and repository names are skipped. Source: dnf output quoted in
    NVIDIA/yum-packaging-precompiled-kmod issues 50 and 55.
    """
    for line in (text or "").splitlines():
        tokens = line.split()
        if len(tokens) >= 3 and tokens[0] == module and tokens[2].startswith("[") and "[e]" in tokens[2]:
            return tokens[1]
    return None


# --------------------------------------------------------------------------- NCCL build
_NCCL_BUILD_RE = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)+)-(\d+)\+cuda(\d+)\.(\d+)$")


def _nccl_builds(versions):
    builds = []
    for item in versions or []:
        text = item.get("version") if isinstance(item, dict) else item
        match = _NCCL_BUILD_RE.match(str(text or "").strip())
        if not match:
            continue
        builds.append({
            "text": str(text).strip(), "nccl": match.group(1), "release": int(match.group(2)),
            "cuda_major": int(match.group(3)), "cuda_minor": int(match.group(4)),
        })
    return builds


def _nccl_key(build):
    return (version_tuple(build["nccl"]), build["release"], build["cuda_minor"])


def select_nccl_build(versions, nccl_version, cuda):
    """Pick the NCCL package version for an NCCL release and CUDA build from a repository listing.

    :param versions: package versions as the repository lists them (strings such as
        ``"2.18.3-1+cuda12.1"``, or the dicts of :func:`parse_apt_madison` /
        :func:`parse_dnf_showduplicates`); other strings are ignored.
    :param nccl_version: ``"2.18.3"`` (any packaging release) or ``"2.18.3-1"``.
    :param cuda: the stack's CUDA build, ``"12.1"``.
    :returns: ``{"version", "cuda", "exact", "note", "problems"}``. First choice: the build for
        exactly that CUDA (``+cuda12.1``), highest packaging release. Otherwise the newest build of
        the same NCCL release for the same CUDA major (``+cuda12.2``): NVIDIA publishes each NCCL
        release for a few CUDA minors only (NVIDIA/nccl issue 2281), and a build for 12.y runs on
        drivers for 12.x by [cuda-compat]; ``note`` says so. Otherwise ``version`` is None and
        NCCL_BUILD_NOT_FOUND lists what the repository has.
    """
    out = {"version": None, "cuda": None, "exact": False, "note": "", "problems": []}
    build = _cuda_build(cuda)
    cuda_major, cuda_minor = (int(x) for x in build.split("."))
    want, _sep, want_release = str(nccl_version or "").strip().partition("-")
    try:
        version_tuple(want)
        if want_release and not want_release.isdigit():
            raise ValueError(nccl_version)
    except ValueError:
        out["problems"].append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_NCCL, "NCCL version %r cannot be read" % (nccl_version,),
            "Set %s to auto or to an NCCL release such as 2.18.3." % VAR_NCCL))
        return out
    builds = _nccl_builds(versions)
    same = [b for b in builds if compare_versions(b["nccl"], want) == 0
            and (not want_release or b["release"] == int(want_release))]
    exact = [b for b in same if (b["cuda_major"], b["cuda_minor"]) == (cuda_major, cuda_minor)]
    if exact:
        best = max(exact, key=_nccl_key)
        out.update(version=best["text"], cuda=build, exact=True,
                   note="NCCL %s built for CUDA %s" % (want, build))
        return out
    major_builds = [b for b in same if b["cuda_major"] == cuda_major]
    if major_builds:
        best = max(major_builds, key=_nccl_key)
        other = "%d.%d" % (best["cuda_major"], best["cuda_minor"])
        out.update(version=best["text"], cuda=other, exact=False,
                   note="NCCL %s has no +cuda%s build in the repository; using %s, the newest CUDA %d.x build "
                        "(CUDA minor version compatibility)" % (want, build, best["text"], cuda_major))
        return out
    others = sorted((b for b in builds if b["cuda_major"] == cuda_major), key=_nccl_key, reverse=True)
    releases = []
    for b in others:
        if b["nccl"] not in releases:
            releases.append(b["nccl"])
    listed = ", ".join(sorted(set(b["text"] for b in same))) or "none"
    if not builds:
        message = "the repository lists no NCCL package builds (is NVIDIA's CUDA repository configured?)"
    else:
        message = "NCCL %s has no CUDA %d build in the repository (builds of %s: %s; NCCL releases with a CUDA %d " \
                  "build: %s)" % (nccl_version, cuda_major, want, listed, cuda_major, ", ".join(releases[:6]) or "none")
    out["problems"].append(_problem(
        "NCCL_BUILD_NOT_FOUND", VAR_NCCL, message,
        "Set %s to a release the repository has for CUDA %d (%s), or to auto."
        % (VAR_NCCL, cuda_major, ", ".join(releases[:3]) or "none listed")))
    return out


# --------------------------------------------------------------------------- dnf streams
def stream_conflict_problems(enabled, wanted):
    """``[]`` when the enabled ``nvidia-driver`` stream is none or the wanted one, else DNF_STREAM_CONFLICT.

    dnf refuses to switch an enabled module stream ("It is not possible to switch enabled streams
    of a module unless explicitly enabled via configuration option module_stream_switch"), so a
    node that has, say, ``latest`` enabled cannot take ``580-open`` until the module is reset.
    """
    if not enabled or enabled == wanted:
        return []
    return [_problem(
        "DNF_STREAM_CONFLICT", VAR_BRANCH,
        "the nvidia-driver module stream %s is enabled on this node; the plan needs %s and dnf does not "
        "switch enabled streams" % (enabled, wanted),
        "Run 'dnf module reset -y nvidia-driver' on the node (the role then enables nvidia-driver:%s), or set "
        "%s / %s to what the node already runs." % (wanted, VAR_BRANCH, VAR_FLAVOR))]


# --------------------------------------------------------------------------- nouveau (C12)
def nouveau_actions(conf_changed, nouveau_loaded, initramfs_has_conf):
    """Decide the initramfs rebuild and the reboot after writing the nouveau blacklist (case C12).

    :param conf_changed: the blacklist file (``blacklist nouveau`` / ``options nouveau
        modeset=0``) was written or changed in this run.
    :param nouveau_loaded: nouveau is in ``lsmod`` now.
    :param initramfs_has_conf: the current initramfs carries the blacklist (``lsinitrd`` /
        ``lsinitramfs`` lists it): True, False, or None when it could not be checked.
    :returns: ``{"rebuild_initramfs": bool, "reboot": bool, "reasons": [str, ...]}``.

    The initramfs loads nouveau before the root filesystem's ``/etc/modprobe.d`` is read, so a
    blacklist only on disk does not stop it: rebuild when the file changed or the initramfs lacks
    it; reboot when nouveau is loaded (it holds the GPU and cannot be unloaded under a console).
    Source: [nouveau]; NVIDIA/ansible-role-nvidia-driver PR 51.
    """
    reasons = []
    rebuild = False
    if conf_changed:
        rebuild = True
        reasons.append("the nouveau blacklist changed: rebuild the initramfs so early boot reads it")
    elif initramfs_has_conf is False:
        rebuild = True
        reasons.append("the nouveau blacklist is in /etc/modprobe.d but not in the initramfs, which loads nouveau "
                       "first: rebuild the initramfs")
    reboot = bool(nouveau_loaded)
    if reboot:
        reasons.append("nouveau is loaded and owns the GPU: reboot so the NVIDIA driver can bind it")
    return {"rebuild_initramfs": rebuild, "reboot": reboot, "reasons": reasons}


# --------------------------------------------------------------------------- the plan
def _system_row(matrix, cuda):
    for row in matrix.get("system_stacks") or []:
        if row.get("cuda") == cuda:
            return row
    return None


def _auto_or(value):
    """None for auto / empty, else the stripped string."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in ("", "auto") else text


def system_stack_plan(matrix, stack, os_family, distribution, os_major, device_ids, branch="auto",
                      flavor="auto", cudnn="auto", nccl="auto", source="nvidia"):
    """Plan the system GPU stack (driver, CUDA toolkit, cuDNN, NCCL) for a resolved torch stack.

    :param matrix: parsed compatibility matrix (``system_stacks``, ``cuda_drivers``,
        ``minor_version_compat`` are read).
    :param stack: ``compat.resolve_stack(...)["stack"]`` (keys cuda, min_driver,
        driver_minor_compat_floor, cudnn, nccl are read).
    :param os_family: ``RedHat`` or ``Debian``; ``distribution`` / ``os_major`` from facts.
    :param device_ids: PCI device ids of the node's NVIDIA GPUs (empty: none seen).
    :param branch: ``auto`` or a branch (``"580"``); ``flavor``: ``auto``, ``open``, ``proprietary``.
    :param cudnn: ``auto`` or a cuDNN version; ``nccl``: ``auto`` or an NCCL release.
    :param source: ``nvidia`` or ``distribution`` (see :func:`driver_packages`).
    :returns: ``{"ok", "problems", "repo_distro", "driver", "cuda", "cudnn", "nccl"}`` where
        driver = ``{branch, flavor, flavor_reason, branch_reason, stream (RedHat, else None),
        packages, lock, pin_glob, min_driver}``; cuda = ``{version, package, home}``;
        cudnn = ``{version, major, names, specs}``; nccl = ``{version, cuda, names}``. Parts that
        cannot be planned are None; every reason is a problem.

    Branch ``auto``: the ``system_stacks`` row for the CUDA build ([dc-drivers] long term support
    branches), else the branch of the CUDA build's minimum driver (12.8 -> 570), else of the CUDA
    major's minor-version-compatibility floor; ``branch_reason`` says which. A branch below the
    minimum driver's branch -> GPU_STACK_BRANCH_TOO_OLD. cuDNN / NCCL ``auto``: the row's value,
    else the torch row's (``stack``); none known -> GPU_STACK_UNKNOWN_VERSION.
    """
    problems = []
    plan = {"ok": False, "problems": problems, "repo_distro": repo_distro(os_family, distribution, os_major),
            "driver": None, "cuda": None, "cudnn": None, "nccl": None}
    stack = stack or {}
    cuda = stack.get("cuda")
    if cuda in (None, "cpu"):
        problems.append(_problem(
            "GPU_STACK_NO_CUDA", VAR_CUDA,
            "the torch stack has no CUDA build (%s): there is no driver, CUDA, cuDNN or NCCL to install"
            % ("CPU-only" if cuda == "cpu" else "the torch request did not resolve"),
            "Set %s to a CUDA build (auto picks the torch row's default), or disable the GPU roles on CPU nodes."
            % VAR_CUDA))
        return plan
    if os_family not in ("RedHat", "Debian"):
        problems.append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_SOURCE,
            "os_family %r is not supported by the GPU roles (RedHat or Debian)" % (os_family,),
            "Run the GPU roles on EL 8/9, Debian 12 or Ubuntu 22.04/24.04 nodes."))
        return plan

    row = _system_row(matrix, cuda)
    min_driver = stack.get("min_driver")
    floor = stack.get("driver_minor_compat_floor")
    driver = _plan_driver(row, cuda, min_driver, floor, branch, problems)
    if driver is not None:
        chosen = select_driver_flavor(driver["branch"], device_ids, flavor)
        problems.extend(chosen["problems"])
        packages = driver_packages(os_family, distribution, source, driver["branch"], chosen["flavor"])
        problems.extend(packages["problems"])
        driver.update(
            flavor=chosen["flavor"], flavor_reason=chosen["reason"],
            stream=el_module_stream(driver["branch"], chosen["flavor"]) if os_family == "RedHat" else None,
            packages=packages["install"], lock=packages["lock"], pin_glob=packages["pin_glob"])
    plan["driver"] = driver
    plan["cuda"] = {"version": cuda, "package": cuda_toolkit_package(cuda), "home": cuda_home(cuda)}
    plan["cudnn"] = _plan_cudnn(os_family, row, stack, cuda, cudnn, problems)
    plan["nccl"] = _plan_nccl(os_family, row, stack, cuda, nccl, problems)
    plan["ok"] = not problems
    return plan


def _plan_driver(row, cuda, min_driver, floor, branch, problems):
    wanted = _auto_or(branch)
    required = None
    if min_driver:
        required = version_tuple(min_driver)[0]
    elif floor:
        required = version_tuple(floor)[0]
    if wanted is None:
        if row is not None:
            chosen = int(row["driver_branch"])
            reason = "system_stacks row for CUDA %s (data/compat_matrix.yml): branch %d" % (cuda, chosen)
        elif min_driver:
            chosen = required
            reason = "no system_stacks row for CUDA %s: the branch of its minimum driver %s" % (cuda, min_driver)
        elif floor:
            chosen = required
            reason = "no system_stacks row and no recorded minimum driver for CUDA %s: the branch of the CUDA %s.x " \
                     "minor-version-compatibility floor %s" % (cuda, cuda.split(".")[0], floor)
        else:
            problems.append(_problem(
                "GPU_STACK_UNKNOWN_VERSION", VAR_BRANCH,
                "no driver branch is known for CUDA %s (no system_stacks row, no minimum driver)" % cuda,
                "Set %s to a driver branch that supports CUDA %s, or add it to data/compat_matrix.yml with sources."
                % (VAR_BRANCH, cuda)))
            return None
    else:
        try:
            chosen = _branch_int(wanted)
        except ValueError as exc:
            problems.append(_problem(
                "GPU_STACK_BAD_VALUE", VAR_BRANCH, str(exc),
                "Set %s to auto or to a branch number such as 580." % VAR_BRANCH))
            return None
        reason = "requested (%s: %d)" % (VAR_BRANCH, chosen)
    if required is not None and chosen < required:
        problems.append(_problem(
            "GPU_STACK_BRANCH_TOO_OLD", VAR_BRANCH,
            "driver branch %d is older than CUDA %s needs (driver >= %s, branch %d)"
            % (chosen, cuda, min_driver or floor, required),
            "Set %s to auto or to %d or newer, or choose an older CUDA build with %s." % (VAR_BRANCH, required, VAR_CUDA)))
    return {"branch": str(chosen), "branch_reason": reason, "min_driver": min_driver, "flavor": None,
            "flavor_reason": None, "stream": None, "packages": [], "lock": [], "pin_glob": None}


def _library_version(key, variable, label, fix, row, stack, cuda, requested, problems):
    """The cuDNN / NCCL version: the request, else the system_stacks row, else the torch row.

    None (unconfirmed in the matrix) appends GPU_STACK_UNKNOWN_VERSION with ``fix``.
    """
    version = _auto_or(requested) or (row or {}).get(key) or stack.get(key)
    if version is None:
        problems.append(_problem(
            "GPU_STACK_UNKNOWN_VERSION", variable,
            "no %s version is known for torch %s with CUDA %s (the matrix has null there: unconfirmed)"
            % (label, stack.get("torch"), cuda), fix))
    return version


def _plan_cudnn(os_family, row, stack, cuda, requested, problems):
    version = _library_version(
        "cudnn", VAR_CUDNN, "cuDNN",
        "Set %s to the cuDNN that torch %s+%s uses (PyTorch RELEASE.md), or add it to data/compat_matrix.yml "
        "with its source." % (VAR_CUDNN, stack.get("torch"), stack.get("cuda_tag") or cuda),
        row, stack, cuda, requested, problems)
    if version is None:
        return {"version": None, "major": None, "names": [], "specs": []}
    try:
        packages = cudnn_packages(os_family, version, cuda)
    except ValueError as exc:
        problems.append(_problem(
            "GPU_STACK_BAD_VALUE", VAR_CUDNN, "cuDNN %s: %s" % (version, exc),
            "Set %s to auto or to a cuDNN 8 or 9 version such as 9.10.2.21." % VAR_CUDNN))
        return {"version": version, "major": None, "names": [], "specs": []}
    return {"version": version, "major": packages["major"], "names": packages["names"], "specs": packages["specs"]}


def _plan_nccl(os_family, row, stack, cuda, requested, problems):
    version = _library_version(
        "nccl", VAR_NCCL, "NCCL",
        "Set %s to an NCCL release with a CUDA %s build, or add it to data/compat_matrix.yml with its source."
        % (VAR_NCCL, cuda.split(".")[0]),
        row, stack, cuda, requested, problems)
    if version is not None:
        try:
            version_tuple(version)
        except ValueError:
            problems.append(_problem(
                "GPU_STACK_BAD_VALUE", VAR_NCCL, "NCCL version %r cannot be read" % (version,),
                "Set %s to auto or to an NCCL release such as 2.18.3." % VAR_NCCL))
    return {"version": version, "cuda": cuda, "names": nccl_package_names(os_family)}
