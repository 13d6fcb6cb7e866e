from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import classify_pci

A100 = {"address": "0000:41:00.0", "vendor": "0x10de\n", "device": "0x20b2\n", "class": "0x030200\n"}
VGA = {"address": "0000:07:00.0", "vendor": "0x10DE", "device": "0x2204", "class": "0x030000"}
NV_AUDIO = {"address": "0000:07:00.1", "vendor": "0x10de", "device": "0x1aef", "class": "0x040300"}
CX6 = {"address": "0000:3b:00.0", "vendor": "0x15b3", "device": "0x101b", "class": "0x020000"}
CX_IB = {"address": "0000:3c:00.0", "vendor": "0x15b3", "device": "0x101b", "class": "0x020700"}
VIRTIO = {"address": "0000:00:03.0", "vendor": "0x1af4", "device": "0x1000", "class": "0x020000"}


@pytest.mark.parametrize("devices, gpus, nics", [
    ([], [], []),
    ([VIRTIO], [], []),
    ([A100], ["0000:41:00.0"], []),
    ([VGA, NV_AUDIO], ["0000:07:00.0"], []),
    ([CX6, A100, CX_IB, VIRTIO], ["0000:41:00.0"], ["0000:3b:00.0", "0000:3c:00.0"]),
])
def test_classify_pci(devices, gpus, nics):
    result = classify_pci(devices)
    assert [g["address"] for g in result["nvidia_gpus"]] == gpus
    assert [n["address"] for n in result["mellanox_nics"]] == nics


def test_classify_pci_normalises_ids():
    gpu = classify_pci([A100])["nvidia_gpus"][0]
    assert gpu == {"address": "0000:41:00.0", "device_id": "0x20b2", "class": "0x030200"}
