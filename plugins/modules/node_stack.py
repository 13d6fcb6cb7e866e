#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_stack
short_description: Inventory a node's driver, CUDA, torch, NCCL and fabric stack without any collective
version_added: 0.2.0
description:
  - Reads, on this node alone, what decides whether it can join a collective with the others. The kernel's
    release. The NVIDIA kernel module's version (C(/proc/driver/nvidia/version)) and the user-space driver
    library's (the file that C(libnvidia-ml.so.1) resolves to in C(ldconfig -p)). The CUDA toolkit
    (C(/usr/local/cuda/version.json)). rdma-core (C(dpkg-query) or C(rpm -q)), MLNX/DOCA OFED (C(ofed_info -s)),
    each HCA's firmware (C(/sys/class/infiniband/*/fw_ver)), HPC-X (C(HPCX_DIR) or C(/opt/hpcx)). The NCCL net
    plugins that would load (C(NCCL_NET_PLUGIN), C(libnccl-net*.so) in the environment's C(LD_LIBRARY_PATH) and
    in C(ldconfig -p)). The sha256 of O(files).
  - Runs O(probe) with the training environment's Python (through O(launcher) when it exists, so that the
    library path is the one jobs get) for torch's version and the CUDA, cuDNN and NCCL versions torch really
    loads, and from which file. A library loaded from outside the wheel folder that ships it is
    C(STACK_LIBRARY_SHADOWED); so is a copy of a library the wheel brings (NCCL, cuDNN, cuBLAS, the CUDA runtime) in a
    folder of the environment's C(LD_LIBRARY_PATH) (an error, as the loader finds it first) or in C(ldconfig -p) (a
    warning, an error when torch's load error names it), also when torch does not import (the load error is read, not swallowed).
  - Compares the result with the roles' manifest in O(manifest_dir) (C(<role>.json), written from the plan);
    a value that drifted is C(STACK_DRIFT). A kernel module and driver library of different versions is
    C(STACK_DRIVER_MISMATCH). A probe that cannot run or import torch is C(STACK_PROBE_FAILED).
  - Comparing the nodes is the controller's job (C(ddp.cluster.stack_outliers) over every node's RV(stack)), before
    any collective.
options:
  python_env:
    description: The training environment (a venv or conda prefix).
    type: path
    default: /opt/ddp/venv
  probe:
    description:
      - The probe program. Default C(<python_env>/share/ddp-cluster/ddp_stack_probe.py), installed by the pytorch_env
        role. Must be an absolute path.
    type: path
  launcher:
    description:
      - Runs the probe in the environment as jobs run (ddp-env reads C(/etc/ddp/env.conf) and
        C(/etc/ddp/torch-nccl.env)). When the file does not exist the environment's C(bin/python) runs the probe
        directly.
    type: path
    default: /opt/ddp/bin/ddp-env
  probe_user:
    description:
      - Run O(probe) as this user (C(runuser -u), with the user's home) when the module runs as root - the account
        that runs jobs, so that importing torch and the libraries it loads never runs as root. Empty runs it as the
        module's user.
    type: str
    default: ""
  probe_output:
    description:
      - What O(probe) printed (its JSON object) when a task earlier in the same run ran it, through O(launcher), in
        O(python_env). It is used instead of running the probe again (importing torch costs seconds of CPU per
        node). The pytorch_env role keeps it as C(pytorch_env_stack_probe) for the health stage of the same run.
      - Pass only output of the same run, since the stack can change between runs. Every other read (driver, files,
        manifests) is made by this call.
      - Must hold the probe's key C(torch), or C(error) where torch did not import.
    type: dict
  files:
    description: Files whose sha256 is returned and compared across nodes (a missing file gives null).
    type: list
    elements: path
    default: [/etc/nccl.conf, /etc/slurm/slurm.conf]
  manifest_dir:
    description: Folder of the roles' expected-versions manifests (C(<role>.json), keys as in RV(flat)).
    type: path
    default: /etc/ddp/expected
  timeout:
    description: Seconds the probe may take (1-600; importing torch with CUDA takes a few seconds).
    type: int
    default: 120
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health
  - ddp.cluster.health.read_only
"""

EXAMPLES = r"""
- name: Inventory this node's stack
  ddp.cluster.node_stack:
  register: stack

- name: Compare every node before any collective
  ansible.builtin.debug:
    msg: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['stack', 'stack'])))
         | ddp.cluster.stack_outliers }}
  run_once: true
"""

RETURN = r"""
healthy:
  description: True when no problem has severity C(error).
  returned: always
  type: bool
problems:
  description: Problems found, errors first (C(STACK_PROBE_FAILED), C(STACK_LIBRARY_SHADOWED), C(STACK_DRIVER_MISMATCH),
    C(STACK_DRIFT)); codes are listed in docs/troubleshooting.md.
  returned: always
  type: list
  elements: dict
stack:
  description:
    - What was found. Versions are strings; a component that is not there is null.
    - "C(torch) is C({version, cuda, cudnn, nccl, cuda_available}) (C(cudnn) as torch reports it, e.g. C(90100))."
    - "C(libraries) is C({lib: {loaded, wheel}}) for libnccl, libcudnn, libcudart and libcublas (absolute paths)."
    - "C(files) is C({path: sha256 or null})."
  returned: always
  type: dict
  sample: {"kernel": "6.1.0-28-amd64", "driver_kernel": "580.95.05", "driver_user": "580.95.05",
           "cuda_toolkit": "12.6.3", "rdma_core": "44.0-2", "ofed": null, "hca_firmware": {"mlx5_0": "28.39.1002"},
           "hpcx": null, "nccl_net_plugin_env": null, "nccl_net_plugins": [],
           "torch": {"version": "2.13.0", "cuda": "12.6", "cudnn": "91002", "nccl": "2.27.5", "cuda_available": true},
           "libraries": {"libnccl": {"loaded": "/opt/ddp/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                     "wheel": "/opt/ddp/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"}},
           "files": {"/etc/nccl.conf": "5f1c0e...", "/etc/slurm/slurm.conf": null}}
flat:
  description: "The compared values as strings (keys C(kernel), C(driver_kernel), C(torch), C(nccl), C(file:<path>) ...)."
  returned: always
  type: dict
expected:
  description: "The manifests read from O(manifest_dir), C({role: {key: value}})."
  returned: always
  type: dict
probe_ran:
  description: True when this call ran O(probe); false when it used O(probe_output).
  returned: always
  type: bool
"""

import glob
import hashlib
import json
import os
import platform
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import (
    FAIL_ON_CHOICES, problem, result, should_fail, summary)
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.health_io import C_LOCALE, read_text
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.node_stack import (
    cuda_toolkit_version, driver_problems, drift_problems, flatten, library_problems, loaded_libraries,
    nvml_library_version, parse_ldconfig, parse_ofed_info, parse_proc_driver_version, shadowing_problems)

# ------------------------------------------------------------------ I/O edge


def _sha256(path):
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except (IOError, OSError):
        return None
    return digest.hexdigest()


def _run(module, argv):
    """(rc, stdout) of a command that may not be installed (then (None, ''))."""
    if not module.get_bin_path(argv[0]):
        return None, ""
    rc, out, _err = module.run_command(argv, environ_update=C_LOCALE)
    return rc, out


def package_version(module, name):
    """The installed version of a distribution package (Debian/Ubuntu or EL), or None."""
    rc, out = _run(module, ["dpkg-query", "-W", "-f", "${Version}", name])
    if rc == 0 and out.strip():
        return out.strip()
    rc, out = _run(module, ["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", name])
    if rc == 0 and out.strip() and "not installed" not in out:
        return out.strip()
    return None


def run_probe(module, params):
    """The probe's JSON, or (None, message); O(probe_output) when given, without running anything."""
    given = params["probe_output"]
    if given is not None:
        if "torch" not in given and "error" not in given:
            module.fail_json(msg="probe_output is not what the probe prints (no key 'torch' or 'error'): keys %s"
                                 % (", ".join(sorted(given)) or "none"))
        return given, None
    python = os.path.join(params["python_env"], "bin", "python")
    probe = params["probe"] or os.path.join(params["python_env"], "share", "ddp-cluster", "ddp_stack_probe.py")
    if not os.path.isabs(probe):
        module.fail_json(msg="probe must be an absolute path, got %r" % probe)
    if not os.path.exists(python):
        return None, "no Python in %s (python_env)" % params["python_env"]
    if not os.path.exists(probe):
        return None, "the probe %s is not installed (the pytorch_env role installs it)" % probe
    argv = [python, probe]
    if params["launcher"] and os.access(params["launcher"], os.X_OK):
        argv = [params["launcher"]] + argv
    environ = dict(C_LOCALE)
    if params["probe_user"] and os.geteuid() == 0:
        try:
            environ["HOME"] = pwd.getpwnam(params["probe_user"]).pw_dir
        except KeyError:
            return None, "probe_user %s does not exist on this node (the access stage creates it)" % params["probe_user"]
        argv = ["runuser", "-u", params["probe_user"], "--"] + argv
    rc, out, err = module.run_command(["timeout", str(params["timeout"])] + argv, environ_update=environ)
    if rc != 0:
        return None, "%s exited %d: %s" % (" ".join(argv), rc, (err or out).strip()[-400:])
    try:
        return json.loads(out.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "%s printed no JSON: %s" % (" ".join(argv), out.strip()[-400:])


def net_plugins(ld_library_path, ldconfig):
    """``libnccl-net*.so`` files NCCL could load: in LD_LIBRARY_PATH's folders, then in the linker cache."""
    found = []
    for folder in (ld_library_path or "").split(":"):
        if folder:
            found.extend(sorted(glob.glob(os.path.join(folder, "libnccl-net*.so*"))))
    found.extend(parse_ldconfig(ldconfig, "libnccl-net").values())
    return sorted(set(found))


def gather(module, params):
    stack = {"kernel": platform.release()}
    stack["driver_kernel"] = parse_proc_driver_version(read_text("/proc/driver/nvidia/version"))
    _rc, ldconfig = _run(module, ["ldconfig", "-p"])
    nvml = parse_ldconfig(ldconfig, "libnvidia-ml.so.1").get("libnvidia-ml.so.1")
    stack["driver_user"] = nvml_library_version(os.path.realpath(nvml)) if nvml else None
    version_json = read_text("/usr/local/cuda/version.json")
    try:
        stack["cuda_toolkit"] = cuda_toolkit_version(json.loads(version_json)) if version_json else None
    except ValueError:
        stack["cuda_toolkit"] = None
    stack["rdma_core"] = package_version(module, "rdma-core")
    _rc, ofed = _run(module, ["ofed_info", "-s"])
    stack["ofed"] = parse_ofed_info(ofed)
    stack["hca_firmware"] = {}
    for path in sorted(glob.glob("/sys/class/infiniband/*/fw_ver")):
        stack["hca_firmware"][os.path.basename(os.path.dirname(path))] = (read_text(path) or "").strip() or None
    stack["files"] = {path: _sha256(path) for path in params["files"]}

    problems = []
    probe, error = run_probe(module, params)
    if error is None and probe.get("error"):
        error = "torch does not import in %s: %s" % (params["python_env"], probe["error"])
    if error:
        problems.append(problem(
            "STACK_PROBE_FAILED", "error", "training environment", error,
            "run the pytorch_env stage (it installs torch and the probe), then "
            "`/opt/ddp/bin/ddp-env python -c 'import torch'` on this node"))
        probe = probe or {}
    env = probe.get("env") or {}
    stack["torch"] = probe.get("torch")
    stack["libraries"] = loaded_libraries(probe.get("mapped"), probe.get("wheel_lib_dirs"))
    stack["nccl_net_plugin_env"] = env.get("NCCL_NET_PLUGIN")
    stack["nccl_net_plugins"] = net_plugins(env.get("LD_LIBRARY_PATH"), ldconfig)
    hpcx = env.get("HPCX_DIR") or ("/opt/hpcx" if os.path.isdir("/opt/hpcx") else None)
    stack["hpcx"] = hpcx

    expected = {}
    for path in sorted(glob.glob(os.path.join(params["manifest_dir"], "*.json"))):
        try:
            expected[os.path.basename(path)[:-len(".json")]] = json.loads(read_text(path) or "")
        except ValueError:
            problems.append(problem(
                "STACK_DRIFT", "warning", path, "the manifest %s is not JSON" % path,
                "re-run the stage of the role that writes it"))
    loaded = library_problems(stack["libraries"])
    problems += loaded
    # A copy on LD_LIBRARY_PATH or in ld.so.conf that shadows the wheel's, named even when torch does not import
    # (the probe's load error says which library); only where the environment has the wheels' libraries or failed.
    if probe.get("wheel_lib_dirs") or probe.get("error"):
        named = set(p["subject"] for p in loaded)
        problems += [p for p in shadowing_problems(env.get("LD_LIBRARY_PATH"), probe.get("ld_path_libs"), ldconfig,
                                                   probe.get("wheel_lib_dirs") or None, probe.get("error"))
                     if p["subject"].split("(")[-1].rstrip(")") not in named]
    problems += driver_problems(stack["driver_kernel"], stack["driver_user"])
    problems += drift_problems(stack, expected)
    return stack, expected, problems


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            python_env=dict(type="path", default="/opt/ddp/venv"),
            probe=dict(type="path"),
            launcher=dict(type="path", default="/opt/ddp/bin/ddp-env"),
            probe_user=dict(type="str", default=""),
            probe_output=dict(type="dict"),
            files=dict(type="list", elements="path", default=["/etc/nccl.conf", "/etc/slurm/slurm.conf"]),
            manifest_dir=dict(type="path", default="/etc/ddp/expected"),
            timeout=dict(type="int", default=120),
            fail_on=dict(type="str", choices=list(FAIL_ON_CHOICES), default="error"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    if not 1 <= params["timeout"] <= 600:
        module.fail_json(msg="timeout must be 1-600 seconds, got %d" % params["timeout"])
    stack, expected, problems = gather(module, params)
    res = result(problems, stack=stack, flat=flatten(stack), expected=expected,
                 probe_ran=params["probe_output"] is None)
    if should_fail(problems, params["fail_on"]):
        module.fail_json(msg=summary(res["problems"]), changed=False, **res)
    module.exit_json(changed=False, **res)


if __name__ == "__main__":
    main()
