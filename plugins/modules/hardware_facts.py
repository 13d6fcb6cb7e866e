#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: hardware_facts
short_description: Find NVIDIA GPUs, Mellanox NICs and RDMA devices from sysfs
version_added: 0.1.0
description:
  - Reads C(/sys/bus/pci/devices/*/vendor), C(device) and C(class), and lists C(/sys/class/infiniband).
  - Sets the fact C(ddp_hardware). Needs no driver. A GPU is found by its PCI vendor ID (0x10de) even
    when no NVIDIA driver is loaded, which is what the GPU roles need before they install one.
  - Read-only; always reports C(changed=false).
options:
  sysfs_root:
    description:
      - Root of the sysfs tree to read; tests point it at a copy.
    type: path
    default: /sys
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health.read_only
"""

EXAMPLES = r"""
- name: Find GPUs and RDMA devices
  ddp.cluster.hardware_facts:

- name: Say whether this node has a GPU
  ansible.builtin.debug:
    msg: "{{ ansible_facts.ddp_hardware.nvidia_gpus | length }} NVIDIA GPU(s)"
"""

RETURN = r"""
ansible_facts:
  description: Facts set by this module.
  returned: always
  type: dict
  contains:
    ddp_hardware:
      description: What was found.
      type: dict
      returned: always
      contains:
        nvidia_gpus:
          description: NVIDIA display/3D controllers, sorted by PCI address.
          type: list
          elements: dict
          sample: [{"address": "0000:41:00.0", "device_id": "0x20b2", "class": "0x030200"}]
        mellanox_nics:
          description: Mellanox (NVIDIA networking) network functions, sorted by PCI address.
          type: list
          elements: dict
          sample: [{"address": "0000:3b:00.0", "device_id": "0x101b", "class": "0x020000"}]
        rdma_devices:
          description: Names under C(/sys/class/infiniband).
          type: list
          elements: str
          sample: ["mlx5_0", "mlx5_1"]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.health_io import read_pci
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import classify_pci


def read_rdma(sysfs_root):
    """I/O edge: names of RDMA devices."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    if not os.path.isdir(base):
        return []
    return sorted(os.listdir(base))


def build_module():
    return AnsibleModule(
        argument_spec=dict(sysfs_root=dict(type="path", default="/sys")),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    root = module.params["sysfs_root"]
    facts = classify_pci(read_pci(root))
    facts["rdma_devices"] = read_rdma(root)
    module.exit_json(changed=False, ansible_facts={"ddp_hardware": facts})


if __name__ == "__main__":
    main()
