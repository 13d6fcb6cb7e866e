# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node's software stack, read without any collective, and what is wrong with it (pure, no I/O).

``ddp.cluster.node_stack`` reads the files and commands on the node and the training environment's own view
(``ddp_stack_probe.py`` run with the environment's Python and library path), then calls these functions.
``stack_outliers`` compares every node's stack on the controller before the all-node collective: a node with
another NCCL, net plugin, driver or NCCL configuration than the others is named, instead of the collective
hanging at its rendezvous.

Why each item matters (sources):

* the kernel module's and the user-space driver library's versions must be equal, else NVML and CUDA fail with
  "Driver/library version mismatch" (NVIDIA's driver README, "Installing the NVIDIA Driver": kernel module and
  libraries come from one release);
* NCCL requires the same version on every rank (NCCL user guide, "Troubleshooting"); a system ``libnccl.so``
  found before the wheel's own (``LD_LIBRARY_PATH``, ``LD_PRELOAD``) replaces the NCCL that torch was built and
  tested with (PyTorch's ``nvidia-nccl-cu12`` wheel dependency; torch loads it from ``site-packages/nvidia``);
* the NCCL net plugin (``NCCL_NET_PLUGIN``, ``libnccl-net*.so`` on the library path) chooses the transport
  between nodes; a node that loads another plugin talks another protocol (NCCL user guide, "NCCL_NET_PLUGIN");
* ``/etc/nccl.conf`` sets NCCL variables for every process on the node (NCCL user guide, "NCCL Knobs"): two nodes
  with different settings (GID index, socket interface, IB HCA list) can hang at the first collective;
* Slurm requires the same ``slurm.conf`` on every node (slurm.conf(5): "should be consistent across all nodes").
"""
from __future__ import annotations

import os
import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

# Keys compared across nodes: severity of a difference. Errors take the odd node out of the all-node collective.
COMPARED = (
    ("driver_kernel", "error"), ("driver_user", "error"), ("torch", "error"), ("torch_cuda", "error"),
    ("cudnn", "error"), ("nccl", "error"), ("nccl_net_plugin", "error"), ("file:/etc/nccl.conf", "error"),
    ("file:/etc/slurm/slurm.conf", "error"), ("kernel", "warning"), ("cuda_toolkit", "warning"),
    ("rdma_core", "warning"), ("ofed", "warning"), ("hca_firmware", "warning"), ("hpcx", "warning"),
)
# Libraries whose copy torch loads is checked against the wheel's own (site-packages/nvidia/<pkg>/lib).
LIBRARIES = ("libnccl", "libcudnn", "libcudart", "libcublas")

_PROC_VERSION = re.compile(r"^NVRM version: NVIDIA UNIX .*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)\s", re.M)
_NVML_FILE = re.compile(r"^libnvidia-ml\.so\.(\d+(?:\.\d+)+)$")
_OFED = re.compile(r"^((?:MLNX_OFED_LINUX|OFED-internal|DOCA_OFED)[^\s:]*)", re.M)
_LDCONFIG = re.compile(r"^\s*(\S+) \(([^)]*)\) => (\S+)\s*$")


def parse_proc_driver_version(text):
    """The kernel module's version from ``/proc/driver/nvidia/version`` (proprietary or open module), or None.

    Format (NVIDIA's ``nv-procfs.c``): ``NVRM version: NVIDIA UNIX [Open ]...Kernel Module[ for <arch>]  <version>  ...``.
    """
    found = _PROC_VERSION.search(text or "")
    return found.group(1) if found else None


def nvml_library_version(path):
    """The user-space driver's version from the real file name of ``libnvidia-ml.so.1`` (``libnvidia-ml.so.580.95.05``)."""
    found = _NVML_FILE.match(os.path.basename(path or ""))
    return found.group(1) if found else None


def parse_ldconfig(text, prefix):
    """``{name: path}`` of the libraries named ``<prefix>*`` in ``ldconfig -p`` output (the first of each name).

    Lines look like ``\\tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so.1``.
    """
    out = {}
    for line in (text or "").splitlines():
        found = _LDCONFIG.match(line)
        if found and found.group(1).startswith(prefix) and found.group(1) not in out:
            out[found.group(1)] = found.group(3)
    return out


def parse_ofed_info(text):
    """The MLNX/DOCA OFED release from ``ofed_info -s`` (``MLNX_OFED_LINUX-5.8-1.0.1.1:``), or None."""
    found = _OFED.search(text or "")
    return found.group(1) if found else None


def cuda_toolkit_version(version_json):
    """The CUDA toolkit's version from ``/usr/local/cuda/version.json`` (parsed), e.g. ``12.6.3``; None without it."""
    try:
        return str(version_json["cuda"]["version"])
    except (KeyError, TypeError):
        return None


def loaded_libraries(mapped, wheel_lib_dirs):
    """Which copy of each library torch loaded, and whether the environment's wheel ships its own.

    :param mapped: absolute paths of the shared objects mapped into the probe's process (``/proc/self/maps``).
    :param wheel_lib_dirs: ``{dir: [file names]}`` of the environment's ``site-packages/nvidia/*/lib`` folders.
    :returns: ``{lib: {"loaded": path or None, "wheel": path of the wheel's copy or None}}`` for each of
        :data:`LIBRARIES` that is loaded or shipped.
    """
    out = {}
    for lib in LIBRARIES:
        loaded = next((p for p in mapped or () if os.path.basename(p).startswith(lib + ".so")), None)
        wheel = None
        for folder in sorted(wheel_lib_dirs or {}):
            name = next((n for n in sorted(wheel_lib_dirs[folder]) if n.startswith(lib + ".so")), None)
            if name:
                wheel = os.path.join(folder, name)
                break
        if loaded or wheel:
            out[lib] = {"loaded": loaded, "wheel": wheel}
    return out


def library_problems(libraries):
    """``STACK_LIBRARY_SHADOWED`` for each library loaded from outside the wheel folder that ships it."""
    problems = []
    for lib, where in sorted(libraries.items()):
        loaded, wheel = where.get("loaded"), where.get("wheel")
        if loaded and wheel and os.path.dirname(os.path.realpath(loaded)) != os.path.dirname(os.path.realpath(wheel)):
            problems.append(problem(
                "STACK_LIBRARY_SHADOWED", "error", lib,
                "torch loaded %s, not its wheel's own %s: a library on the library path (LD_LIBRARY_PATH, "
                "LD_PRELOAD, /etc/ld.so.conf) shadows the version torch was built with" % (loaded, wheel),
                "remove that folder from LD_LIBRARY_PATH in the environment the jobs run with (ddp-env, "
                "/etc/ddp/torch-nccl.env, the job script), or install the matching wheel; then check with "
                "`ddp-env python -c 'import torch; print(torch.cuda.nccl.version())'`"))
    return problems


def driver_problems(kernel, user):
    """``STACK_DRIVER_MISMATCH`` when the loaded kernel module and the user-space library differ."""
    if kernel and user and kernel != user:
        return [problem(
            "STACK_DRIVER_MISMATCH", "error", "NVIDIA driver",
            "the loaded kernel module is %s but libnvidia-ml is %s (NVML and CUDA fail with "
            "'Driver/library version mismatch')" % (kernel, user),
            "reboot into the installed driver (or unload and reload the nvidia modules with no GPU process running); "
            "a package update replaced the libraries under a running module")]
    return []


def flatten(stack):
    """``{key: str}`` of the values :func:`stack_outliers` compares (absent and empty values left out)."""
    torch = stack.get("torch") or {}
    values = {
        "kernel": stack.get("kernel"), "driver_kernel": stack.get("driver_kernel"),
        "driver_user": stack.get("driver_user"), "cuda_toolkit": stack.get("cuda_toolkit"),
        "torch": torch.get("version"), "torch_cuda": torch.get("cuda"), "cudnn": torch.get("cudnn"),
        "nccl": torch.get("nccl"), "rdma_core": stack.get("rdma_core"), "ofed": stack.get("ofed"),
        "hpcx": stack.get("hpcx"),
        "nccl_net_plugin": ",".join(filter(None, [stack.get("nccl_net_plugin_env") or ""]
                                           + sorted(stack.get("nccl_net_plugins") or []))),
        "hca_firmware": ",".join("%s=%s" % kv for kv in sorted((stack.get("hca_firmware") or {}).items())),
    }
    for path, digest in sorted((stack.get("files") or {}).items()):
        values["file:" + path] = digest
    return {k: str(v) for k, v in values.items() if v not in (None, "")}


def drift_problems(stack, expected):
    """``STACK_DRIFT`` for each value the roles' manifest expects that the node does not have.

    :param expected: ``{role: {key: value}}`` from ``/etc/ddp/expected/<role>.json`` (keys as in :func:`flatten`).
    """
    have = flatten(stack)
    problems = []
    for role in sorted(expected or {}):
        for key, want in sorted((expected[role] or {}).items()):
            if want in (None, ""):
                continue
            if have.get(key) != str(want):
                problems.append(problem(
                    "STACK_DRIFT", "error", key,
                    "the %s role installed %s %s, the node now has %s" % (role, key, want, have.get(key, "none")),
                    "re-run the %s stage (site.yml --tags %s) to put back the planned version, or find what changed "
                    "it (package updates, a pip install into the training environment)" % (role, role)))
    return problems


def stack_outliers(node_stacks, compared=COMPARED):
    """Compare every node's stack; name the nodes that differ from the others.

    :param node_stacks: ``{node: stack}`` as ``node_stack`` returns it; a node whose stack is None is skipped.
    :returns: ``{"problems": [...], "nodes": {node: [codes]}}``. Per key that differs: when one value is held by
        more nodes than any other, the nodes with another value are named (``STACK_MISMATCH`` with the key's
        severity, see :data:`COMPARED`); without such a majority every node is named. ``nodes`` lists, per node,
        the codes of the error-severity differences only (those take it out of the collective).
    """
    flat = {node: flatten(stack) for node, stack in sorted(node_stacks.items()) if isinstance(stack, dict)}
    problems, nodes = [], {}
    for key, severity in compared:
        by_value = {}
        for node, values in flat.items():
            by_value.setdefault(values.get(key, "none"), []).append(node)
        if len(by_value) <= 1:
            continue
        ranked = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0]))
        majority = ranked[0][0] if len(ranked[0][1]) > len(ranked[1][1]) else None
        odd = [(value, names) for value, names in ranked if value != majority]
        detail = "; ".join("%s on %s" % (value, ", ".join(names)) for value, names in odd)
        if majority is not None:
            message = "%s differs from the other nodes' %s: %s" % (key, majority, detail)
        else:
            message = "%s differs between nodes and no value is held by most of them: %s" % (key, detail)
        problems.append(problem(
            "STACK_MISMATCH", severity, key, message,
            "make %s the same on every node (re-run the stage that installs it on the nodes named; "
            "`ddp.cluster.node_stack` shows each node's value)" % key))
        if severity == "error":
            for _value, names in odd:
                for name in names:
                    nodes.setdefault(name, [])
                    if "STACK_MISMATCH" not in nodes[name]:
                        nodes[name].append("STACK_MISMATCH")
    return {"problems": problems, "nodes": nodes}
