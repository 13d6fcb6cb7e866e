#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health
short_description: Check the NVIDIA GPUs of a node and say what is wrong, with a fix
version_added: 0.2.0
description:
  - Finds NVIDIA GPUs on the PCI bus (C(/sys/bus/pci/devices/*/vendor) is C(0x10de)), then runs
    C(nvidia-smi -q -x), C(nvidia-smi nvlink --status) and C(nvidia-smi topo -m), reads the kernel log
    (C(journalctl -k), else C(dmesg)) for Xid errors, and reads C(lsmod), C(lspci -k) and C(lspci -vvv)
    where they exist.
  - Returns the facts and a list of problems, each with a stable code, a severity, the GPU or device it
    is about, a message and a fix. The codes are listed in the collection's troubleshooting guide.
  - A node without an NVIDIA GPU is not an error by itself; it gets the problem C(NO_GPU) at
    O(no_gpu_severity) and C(gpus=[]).
  - The exit code of C(nvidia-smi) is read, not only its presence (driver not loaded is exit code 9).
  - Run it as root, since C(lspci) shows ACS control only to root and the kernel log may be restricted.
options:
  expected_gpus:
    description:
      - How many GPUs the node should have. A different count is C(GPU_COUNT_MISMATCH) (error).
      - Not set, only a disagreement between the PCI bus and C(nvidia-smi) is reported.
    type: int
  min_driver:
    description:
      - Oldest acceptable driver version, such as C(530.30.02) (the minimum for CUDA 12.1). An older
        driver is C(GPU_DRIVER_TOO_OLD) (error).
    type: str
  no_gpu_severity:
    description: Severity of C(NO_GPU) on a node without an NVIDIA GPU.
    type: str
    choices: [error, warning, info]
    default: warning
  max_temperature_c:
    description:
      - A GPU at or above this temperature (Celsius) is C(GPU_TEMPERATURE_HIGH) (warning); so is one whose
        reported T.Limit margin is 0 or below.
      - The default is the "GPU Max Operating Temp" that C(nvidia-smi) reports for A100-SXM4-80GB (85 C;
        it slows down at 89 C).
    type: int
    default: 85
  check_xid:
    description:
      - Read the kernel log for C(NVRM Xid) lines and report them as C(GPU_XID).
    type: bool
    default: true
  xid_since:
    description:
      - How far back to read the kernel log. C(boot) is the current boot (C(journalctl -k -b)); any other
        value is given to C(journalctl --since), for example C(-2h) or C(2024-05-01 10:00).
      - When only C(dmesg) can be read, the window is the kernel ring buffer whatever this says.
    type: str
    default: boot
  pcie_check:
    description:
      - Check the PCIe link of each GPU (C(GPU_PCIE_DEGRADED)) and ACS redirection on the bridges above
        the GPUs and Mellanox NICs (C(GPU_ACS_REDIRECT)).
      - Width is always compared; the generation only when the GPU is not idle, because an idle GPU
        drops its link to a lower generation to save power.
      - Also checks every link on the path from the root port down to each GPU and HCA, from C(lspci -vvv)
        (C(PCIE_LINK_DEGRADED)); each link is expected at the lower of its two ends' C(LnkCap) speed and
        width (PCI Express Base Specification, Link Capabilities). A GPU's own link is left to
        C(GPU_PCIE_DEGRADED); an HCA's own link is judged here.
      - And the kernel log's PCIe messages for those devices and the bridges above them (Linux
        C(drivers/pci/pci.c) and C(drivers/pci/pcie/aer.c)), in the window of O(xid_since);
        C(available PCIe bandwidth, limited by) with a narrower link than the device can do
        (C(PCIE_BANDWIDTH_LIMITED), warning; for an HCA a slower one too; GPUs are enumerated at 2.5 GT/s
        before the driver raises the speed), and AER C(PCIe Bus Error) reports (uncorrected
        C(PCIE_AER_UNCORRECTED), error; corrected C(PCIE_AER_CORRECTED), warning).
    type: bool
    default: true
  persistence_required:
    description: Report C(GPU_PERSISTENCE_OFF) (warning) for a GPU whose persistence mode is off.
    type: bool
    default: true
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health
  - ddp.cluster.health.read_only
seealso:
  - name: NVIDIA Xid errors
    description: What each Xid code means and what to do about it.
    link: https://docs.nvidia.com/deploy/xid-errors/
"""

EXAMPLES = r"""
- name: Check the GPUs of every node
  ddp.cluster.gpu_health:
    expected_gpus: 4
    min_driver: "530.30.02"
  become: true
  register: gpu_health

- name: Report only, never fail (for the cluster report)
  ddp.cluster.gpu_health:
    fail_on: never
    xid_since: "-2h"
  become: true
  register: gpu_report

- name: Show the problems
  ansible.builtin.debug:
    msg: "{{ gpu_report.problems | map(attribute='code') | list }}"
"""

RETURN = r"""
healthy:
  description: True when no problem has severity C(error).
  returned: always
  type: bool
  sample: false
problems:
  description: What is wrong, errors first.
  returned: always
  type: list
  elements: dict
  contains:
    code:
      description: Stable identifier, documented in the troubleshooting guide.
      type: str
      sample: GPU_ROW_REMAP_PENDING
    severity:
      description: C(error), C(warning) or C(info).
      type: str
      sample: error
    subject:
      description: The GPU, bridge or node the problem is about.
      type: str
      sample: GPU 0 (0000:10:1c.0)
    message:
      description: What is wrong.
      type: str
      sample: a memory row is marked for remapping; the remap only takes effect after a GPU reset
    fix:
      description: What to do.
      type: str
      sample: Drain the node and reset the GPU (`nvidia-smi -r -i <index>`) or reboot.
gpus:
  description:
    - One entry per GPU that C(nvidia-smi) sees, in its index order; empty without a GPU or a working driver.
    - Unknown values are null.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H100 80GB HBM3
      bus_id: "0000:00:09.0"
      uuid: GPU-00000000-0000-0000-0000-000000000000
      persistence_mode: true
      mig_mode: false
      ecc: {volatile_uncorrectable: 0, aggregate_uncorrectable: 0, volatile_correctable: 0, aggregate_correctable: 0}
      retired_pages: {single_bit: null, double_bit: null, pending: null}
      remapped_rows: {correctable: 0, uncorrectable: 0, pending: false, failure: false}
      pcie: {gen_current: 5, gen_max: 5, width_current: 16, width_max: 16}
      clock_event_reasons: [gpu_idle]
      utilization_gpu: 0
      temperature_c: 41
      temperature_tlimit_c: 46
      nvlinks: {links: [{link: 0, active: true, speed_gbps: 26.562}], all_inactive: false}
driver_version:
  description: NVIDIA driver version, null when C(nvidia-smi) did not run.
  returned: always
  type: str
  sample: "535.54.03"
cuda_version:
  description: Highest CUDA version the driver supports, as C(nvidia-smi) reports it.
  returned: always
  type: str
  sample: "12.2"
xids:
  description: Xid events found in the kernel log (C(pci) has no function number).
  returned: always
  type: list
  elements: dict
  sample: [{pci: "0000:10:1c", xid: 63, pid: "1896", message: "Row Remapper: New row marked for remapping, reset gpu to activate.",
            line: "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."}]
kernel_log_source:
  description: Where the kernel log came from (C(journalctl) or C(dmesg)); null when neither could be read or it was not needed.
  returned: always
  type: str
  sample: journalctl
nvidia_smi:
  description: How C(nvidia-smi) ended.
  returned: always
  type: dict
  contains:
    found:
      description: Whether C(nvidia-smi) is installed.
      type: bool
      sample: true
    rc:
      description: Its exit code.
      type: int
      sample: 9
    failure:
      description: Null when it worked, else C(kind) (such as C(driver_not_loaded), C(library_mismatch)), C(rc) and C(message).
      type: dict
      sample: {kind: driver_not_loaded, rc: 9, message: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}
topology:
  description: The C(nvidia-smi topo -m) matrix (C(devices), C(matrix), C(affinity), C(nics)); null when not read.
  returned: always
  type: dict
  sample: {devices: [GPU0, NIC0], matrix: {GPU0: {GPU0: X, NIC0: PIX}}, affinity: {GPU0: {cpu: "0-19", numa: "0", gpu_numa_id: null}},
           nics: {NIC0: mlx5_0}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import (
    FAIL_ON_CHOICES,
    result,
    should_fail,
    summary,
)
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.health import build_facts, diagnose
from ansible_collections.ddp.cluster.plugins.module_utils.versions import version_tuple_or_none
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.health_io import collect_gpu


def collect(module, params):
    """I/O edge: everything build_facts needs (module_utils.health_io, shared with the node command)."""
    return collect_gpu(module, params)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            expected_gpus=dict(type="int"),
            min_driver=dict(type="str"),
            fail_on=dict(type="str", choices=list(FAIL_ON_CHOICES), default="error"),
            no_gpu_severity=dict(type="str", choices=["error", "warning", "info"], default="warning"),
            max_temperature_c=dict(type="int", default=85),
            check_xid=dict(type="bool", default=True),
            xid_since=dict(type="str", default="boot"),
            pcie_check=dict(type="bool", default=True),
            persistence_required=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    if params["min_driver"] is not None and version_tuple_or_none(params["min_driver"]) is None:
        module.fail_json(msg="min_driver must be a dotted version such as 530.30.02, got %r" % params["min_driver"])
    if params["expected_gpus"] is not None and params["expected_gpus"] < 0:
        module.fail_json(msg="expected_gpus must be 0 or more, got %d" % params["expected_gpus"])
    facts = build_facts(collect(module, params))
    problems = diagnose(facts, params)
    out = result(problems, gpus=facts["gpus"], driver_version=facts["driver_version"],
                 cuda_version=facts["cuda_version"], xids=facts["xids"],
                 kernel_log_source=facts["kernel_log_source"], nvidia_smi=facts["smi"],
                 topology=facts["topology"])
    if should_fail(problems, params["fail_on"]):
        module.fail_json(msg=summary(problems), changed=False, **out)
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
