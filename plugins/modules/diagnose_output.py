#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: diagnose_output
short_description: Diagnose a command's or a log's text with the collection's readers
version_added: 0.3.0
description:
  - Reads the text of a command or a log (given as O(text), or read from the file O(src) on the node) and runs the
    reader and diagnosis the health modules and the health stage use on live nodes, for outputs kept from a failure
    or pasted from another cluster. The same entry point as C(ddp-health --diagnose).
  - "What it reads (O(kind), detected when V(auto)): V(scontrol) (C(scontrol show node)), V(sinfo) (the default
    table, C(-N), C(-l), C(-R)/C(--list-reasons), C(-o '%N|%T|%E')), V(slurm_log) (slurmctld/slurmd lines: low
    memory, GRES, registration, munge key mismatch told apart from clock skew), V(training_log) (NCCL watchdog
    timeouts, NCCL errors during the run, c10d store, Gloo and torchrun failures), V(nccl_tests) (the table or its
    failure, classified transport / peer exited / CUDA / set-up), V(nccl_debug) (NCCL INFO/WARN lines, net plugins),
    V(ibstat), V(ibstatus), V(ibv_devinfo), V(rdma_link) (port state, LID, subnet manager), V(lspci) (C(-vv) link
    width and speed, a NIC below its line rate), V(kernel_log) (Xids, PCIe limited-by and AER lines), V(ldconfig)
    (C(ldconfig -p), C(LD_LIBRARY_PATH=...) and a library load error: a library the torch wheel brings, shadowed),
    V(nvidia_smi) (C(nvidia-smi -q), C(-q -x) or C(--query-gpu) CSV: ECC, row remapping, PCIe, NVLink, as gpu_health),
    V(sysfs_ib) (a JSON object of C(/sys/class/infiniband) paths and their contents, as roce_health reads them)."
  - Problem codes and their fixes are in the collection's troubleshooting guide; the logic is in
    C(plugins/module_utils/cluster/text_diagnosis.py).
  - Changes nothing; C(changed) is always false.
options:
  text:
    description: The text to read. Mutually exclusive with O(src).
    type: str
  src:
    description: A file on the node whose text to read (a log). Mutually exclusive with O(text).
    type: path
  kind:
    description: What the text is; V(auto) detects it.
    type: str
    choices: [auto, scontrol, sinfo, slurm_log, training_log, nccl_tests, nccl_debug, ibstat, ibstatus, ibv_devinfo,
              rdma_link, lspci, kernel_log, ldconfig, nvidia_smi, sysfs_ib]
    default: auto
  context:
    description:
      - "What the text alone cannot say: C(rc) (nccl-tests' exit status), C(min_busbw_gbps), C(expected_transport),
        C(world_size), C(gpus) (Slurm node -> GPUs it has), C(nodes) (Slurm nodes to judge), C(clock_offsets)
        (node -> seconds), C(nccl_ib_hca), C(line_rates) (NIC PCI address or C(*) -> Gb/s), C(busy) (GPUs busy when
        lspci ran), C(ld_library_path), C(wheel_lib_dirs), C(expected_gpus), C(subject)."
    type: dict
    default: {}
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health
  - ddp.cluster.health.read_only
"""

EXAMPLES = r"""
- name: Read Slurm's view of the nodes
  ansible.builtin.command:
    argv: [scontrol, show, node]
  register: scontrol_nodes
  changed_when: false

- name: Name what Slurm itself found
  ddp.cluster.diagnose_output:
    text: "{{ scontrol_nodes.stdout }}"
    kind: scontrol
    fail_on: never
  register: slurm_view

- name: Diagnose a failed training job's log
  ddp.cluster.diagnose_output:
    src: /shared/jobs/42/train.log
    context:
      world_size: 16
"""

RETURN = r"""
kind:
  description: What the text was read as (null when it is none of the kinds).
  returned: always
  type: str
  sample: training_log
verdict:
  description: PASS, WARN, FAIL, or UNKNOWN (the text is none of the kinds).
  returned: always
  type: str
  sample: FAIL
healthy:
  description: True when no problem has severity C(error).
  returned: always
  type: bool
problems:
  description: Problems found, errors first, each C({code, severity, subject, message, fix}).
  returned: always
  type: list
  elements: dict
  sample: [{"code": "TORCH_NCCL_WATCHDOG_TIMEOUT", "severity": "error", "subject": "job",
            "message": "a collective hung: NCCL watchdog timeout on rank(s) 0, 4 in ALLREDUCE SeqNum=1580 ...",
            "fix": "find the rank that did not enter or finish the collective ..."}]
errors:
  description: The codes at severity error, sorted.
  returned: always
  type: list
  elements: str
warnings:
  description: The codes at severity warning, sorted.
  returned: always
  type: list
  elements: str
facts:
  description: What the reader parsed (node states, log events, ports, links ...), by kind.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import FAIL_ON_CHOICES, result, should_fail, summary
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.text_diagnosis import KINDS, diagnose_text


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            text=dict(type="str"),
            src=dict(type="path"),
            kind=dict(type="str", choices=["auto"] + list(KINDS), default="auto"),
            context=dict(type="dict", default={}),
            fail_on=dict(type="str", choices=list(FAIL_ON_CHOICES), default="error"),
        ),
        mutually_exclusive=[("text", "src")],
        required_one_of=[("text", "src")],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    text = params["text"]
    if params["src"] is not None:
        try:
            with open(params["src"], errors="replace") as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read %s: %s" % (params["src"], exc))
    context = dict(params["context"] or {})
    if params["src"] and not context.get("subject"):
        context["subject"] = params["src"]
    found = diagnose_text(text, params["kind"], context)
    res = result(found["problems"], kind=found["kind"], verdict=found["verdict"], errors=found["errors"],
                 warnings=found["warnings"], facts=found["facts"])
    if should_fail(found["problems"], params["fail_on"]):
        module.fail_json(msg=summary(res["problems"]), changed=False, **res)
    module.exit_json(changed=False, **res)


if __name__ == "__main__":
    main()
