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


# The CUDA libraries the torch wheels bring (pip packages nvidia-nccl-cu12, nvidia-cudnn-cu12, nvidia-cublas-cu12,
# nvidia-cuda-runtime-cu12 ... install them under site-packages/nvidia/<pkg>/lib), by soname.
WHEEL_SONAMES = re.compile(
    r"^lib(?:nccl|cudnn(?:_\w+)?|cublas(?:Lt)?|cudart|nvrtc(?:-builtins)?|cufft|curand|cusolver|cusparse(?:Lt)?|"
    r"nvJitLink|cupti|nvToolsExt)\.so\.\d+(?:\.\d+)*$")
_FAMILY = (("libnccl", "NCCL"), ("libcudnn", "cuDNN"), ("libcublas", "cuBLAS"), ("libcudart", "the CUDA runtime"),
           ("libnvrtc", "NVRTC"), ("libcusparse", "cuSPARSE"), ("libcufft", "cuFFT"), ("libcurand", "cuRAND"),
           ("libcusolver", "cuSOLVER"), ("libnvJitLink", "nvJitLink"), ("libcupti", "CUPTI"))
# Symbols of an undefined-symbol error -> the library that should have defined them.
_SYMBOL_LIBS = ((r"^nccl", "libnccl.so.2"), (r"^cudnn|nvrtcHelper", "libcudnn"), (r"^cublas", "libcublas"),
                (r"^cuda[A-Z]", "libcudart"))
_LOAD_ERROR_PATH = re.compile(r"(/[^\s:'\"]+?/(lib[\w.+-]+?\.so(?:\.\d+)*))\b")
_UNDEFINED = re.compile(r"undefined symbol: (?P<symbol>\w+)(?:, version (?P<version>[\w.]+))?")
_VERSION_NOT_FOUND = re.compile(r"version `(?P<version>[^']+)' not (?:found|defined)")
_LDLP = re.compile(r"^\s*(?:export\s+)?LD_LIBRARY_PATH=(?P<value>\S*)", re.M)


def soname(name):
    """``libcudnn_ops_infer.so.8.9.2`` -> ``libcudnn_ops_infer.so.8``; ``libnccl.so.2.19.3`` -> ``libnccl.so.2``."""
    match = re.match(r"^(lib[\w.+-]*?\.so\.\d+)", os.path.basename(name or ""))
    return match.group(1) if match else None


def family(name):
    base = os.path.basename(name or "")
    for prefix, label in _FAMILY:
        if base.startswith(prefix):
            return prefix, label
    return None, None


def wheel_sonames(wheel_lib_dirs):
    """``{soname: wheel path}`` of the libraries the environment's wheels ship (``site-packages/nvidia/*/lib``)."""
    out = {}
    for folder in sorted(wheel_lib_dirs or {}):
        for name in sorted(wheel_lib_dirs[folder]):
            key = soname(name)
            if key and WHEEL_SONAMES.match(key) and key not in out:
                out[key] = os.path.join(folder, name)
    return out


def parse_ld_library_path(text):
    """The folders of ``LD_LIBRARY_PATH`` given as the value (``/a:/b``) or in text (``LD_LIBRARY_PATH=/a:/b``,
    ``export ...``); empty items (which mean the current directory to the loader) are kept as ``.``."""
    value = text or ""
    match = _LDLP.search(value)
    if match:
        value = match.group("value")
    value = value.strip().strip("'\"")
    return [item or "." for item in value.split(":")] if value else []


def shadowing_problems(ld_library_path, ld_path_libs=None, ldconfig_text="", wheel_lib_dirs=None, load_error=None):
    """``STACK_LIBRARY_SHADOWED``: a copy of a library the torch wheel brings (NCCL, cuDNN, cuBLAS, the CUDA runtime)
    that the dynamic loader can find before the wheel's, named even when torch does not import.

    Order of the loader (ld.so(8)): DT_RPATH, **LD_LIBRARY_PATH**, DT_RUNPATH (where torch finds the wheel's
    ``nvidia/*/lib``), the ld.so.cache (``/etc/ld.so.conf``), the default folders. So:

    * the same soname in an ``LD_LIBRARY_PATH`` folder (not the wheel's) wins over the wheel: **error**;
    * the same soname in the linker cache is taken by a library loaded without RUNPATH of its own (cuDNN 8 loads its
      sub-libraries with dlopen; a program that links the system copy first): **warning** when the wheel ships that
      soname (``wheel_lib_dirs`` given), an **error** when the load error names it;
    * a load error (``undefined symbol: ncclCommRegister``, ``version `libcudnn_ops_infer.so.8' not defined``,
      ``Could not load library ...``) names the library that is not the one torch was built with: **error**.

    :param ld_library_path: its value (``/usr/local/cuda/lib64:/opt/nccl/lib``) or text with ``LD_LIBRARY_PATH=``.
    :param ld_path_libs: ``{folder: [file names]}`` of those folders, where read; None: the folders of the cached
        libraries (``ldconfig -p``) that lie on LD_LIBRARY_PATH are used.
    :param ldconfig_text: ``ldconfig -p`` output.
    :param wheel_lib_dirs: ``{folder: [file names]}`` of ``site-packages/nvidia/*/lib``; None: every soname of
        :data:`WHEEL_SONAMES` counts as one the wheel brings.
    :param load_error: the text of a failed ``import torch`` (or a job's log).
    """
    wheels = wheel_sonames(wheel_lib_dirs) if wheel_lib_dirs else None
    wheel_dirs = set(os.path.normpath(d) for d in (wheel_lib_dirs or {}))
    found, errors = _shadowing_copies(ld_library_path, ld_path_libs, ldconfig_text, wheels, wheel_dirs, load_error)
    problems, named_families = _shadowed_family_problems(found, wheels)
    problems.extend(_load_error_problems(errors, named_families))
    return problems


def _brought(key, wheels):
    """Whether the soname ``key`` is one the torch wheel brings (any of :data:`WHEEL_SONAMES` when ``wheels`` is None).

    :returns: a true value when it is (``key`` itself may be returned), else a false one.
    """
    return key and (wheels is None and WHEEL_SONAMES.match(key) or wheels is not None and key in wheels)


def _shadowing_copies(ld_library_path, ld_path_libs, ldconfig_text, wheels, wheel_dirs, load_error):
    """Find the copies of the wheel's libraries the loader can take first (see :func:`shadowing_problems`).

    :returns: ``(found, errors)``: ``{soname: (severity, path, "LD_LIBRARY_PATH" or "ld.so.conf")}`` and the
        libraries the load error points at (:func:`load_error_libraries`).
    """
    folders = [os.path.normpath(f) for f in parse_ld_library_path(ld_library_path)]
    cached = {}
    for name, path in parse_ldconfig(ldconfig_text or "", "lib").items():
        key = soname(name)
        if key == name and _brought(key, wheels):
            cached.setdefault(key, path)
    listing = dict((os.path.normpath(k), v) for k, v in (ld_path_libs or {}).items())
    if ld_path_libs is None:
        for key, path in cached.items():
            listing.setdefault(os.path.dirname(os.path.normpath(path)), []).append(os.path.basename(path))
    found = {}
    for folder in folders:
        if folder in wheel_dirs:
            continue
        for name in sorted(listing.get(folder) or []):
            key = soname(name)
            if _brought(key, wheels) and key not in found:
                found[key] = ("error", os.path.join(folder, name), "LD_LIBRARY_PATH")
    errors = load_error_libraries(load_error or "")
    for key, path in sorted(cached.items()):
        if key in found or os.path.dirname(os.path.normpath(path)) in wheel_dirs:
            continue
        named = any(key == lib or key.startswith(lib) for lib, _why in errors)
        if wheels is None and not named:
            continue  # which CUDA the wheel brings is unknown: a system CUDA in the cache is not a finding by itself
        found[key] = ("error" if named else "warning", path, "ld.so.conf")
    return found, errors


def _shadowed_family_problems(found, wheels):
    """One ``STACK_LIBRARY_SHADOWED`` per library family and place (LD_LIBRARY_PATH or the linker cache) of ``found``.

    :returns: ``(problems, named_families)``: the problems and the set of the family prefixes they name.
    """
    problems = []
    by_family = {}
    for key in sorted(found):
        severity, path, where = found[key]
        prefix, label = family(key)
        entry = by_family.setdefault((prefix, where), {"severity": severity, "label": label, "paths": []})
        entry["paths"].append(path)
        if severity == "error":
            entry["severity"] = "error"
    named_families = set()
    for (prefix, where), entry in sorted(by_family.items()):
        named_families.add(prefix)
        wheel = (wheels or {}).get(soname(entry["paths"][0]))
        problems.append(problem(
            "STACK_LIBRARY_SHADOWED", entry["severity"], "%s (%s)" % (entry["label"], prefix),
            "%s %s: the loader finds %s before the copy the torch wheel brings%s"
            % ("LD_LIBRARY_PATH holds" if where == "LD_LIBRARY_PATH" else "the linker cache (/etc/ld.so.conf) holds",
               ", ".join(entry["paths"][:3]) + (" ..." if len(entry["paths"]) > 3 else ""),
               "it" if where == "LD_LIBRARY_PATH" else "it for libraries loaded without a RUNPATH (cuDNN's "
               "sub-libraries, a program linked against it)", " (%s)" % wheel if wheel else ""),
            "remove %s from %s in the environment jobs run with (ddp-env, /etc/ddp/torch-nccl.env, the job "
            "script, module files), or install the matching wheel; check with `ddp-env python -c 'import torch; "
            "print(torch.cuda.nccl.version(), torch.backends.cudnn.version())'`"
            % (os.path.dirname(entry["paths"][0]), "LD_LIBRARY_PATH" if where == "LD_LIBRARY_PATH" else
               "/etc/ld.so.conf.d (then ldconfig), or keep it off the jobs' path")))
    return problems, named_families


def _load_error_problems(errors, named_families):
    """One ``STACK_LIBRARY_SHADOWED`` per library the load error points at whose family is not named yet.

    :returns: the problems (``named_families`` is updated in place).
    """
    problems = []
    for lib, why in errors:
        prefix, label = family(lib)
        if prefix in named_families:
            continue
        named_families.add(prefix)
        problems.append(problem(
            "STACK_LIBRARY_SHADOWED", "error", "%s (%s)" % (label or lib, prefix or lib),
            "torch failed to load because %s is not the version it was built with: %s" % (lib, why),
            "find the other copy (`ldconfig -p | grep %s`, every folder of LD_LIBRARY_PATH, LD_PRELOAD) and take it "
            "off the jobs' library path, or pip-install the torch build that matches it" % (prefix or lib)))
    return problems


def load_error_libraries(text):
    """``[(library, evidence line)]`` a library load error points at: the symbol's owner for ``undefined symbol:``
    (``ncclCommRegister`` -> ``libnccl.so.2``), the version for ``version `libcudnn_ops_infer.so.8' not
    defined``, the path a ``Could not load library`` names."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        match = _UNDEFINED.search(line)
        if match:
            if match.group("version") and WHEEL_SONAMES.match(match.group("version")):
                out.append((match.group("version"), line))
                continue
            for pattern, lib in _SYMBOL_LIBS:
                if re.search(pattern, match.group("symbol")):
                    out.append((lib, line))
                    break
            continue
        match = _VERSION_NOT_FOUND.search(line)
        if match and WHEEL_SONAMES.match(match.group("version")):
            out.append((match.group("version"), line))
            continue
        if "Could not load library" in line or "cannot open shared object" in line:
            for path, name in _LOAD_ERROR_PATH.findall(line):
                if soname(name) and WHEEL_SONAMES.match(soname(name)):
                    out.append((soname(name), line))
                    break
    seen, unique = set(), []
    for lib, why in out:
        if lib not in seen:
            seen.add(lib)
            unique.append((lib, why))
    return unique


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
