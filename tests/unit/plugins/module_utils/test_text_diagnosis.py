"""One entry point for a command's or a log's text (``ddp-health --diagnose``, ``diagnose_output``), on real outputs
of every family (sources in each fixture folder's SOURCES.md)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import text_diagnosis as td

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def read(path):
    with open(os.path.join(FIXTURES, path)) as handle:
        return handle.read()


# (fixture, kind detected, verdict, an error/warning code that must be among the findings or None)
ROWS = [
    ("slurm/scontrol_show_node_IDLE+DRAIN_gres-gpu-count-lower__awsome-distributed-ai-195.txt", "scontrol", "FAIL",
     "SLURM_GRES_MISMATCH"),
    ("slurm/sinfo_default_3-drain__clusterinthecloud-terraform-11.txt", "sinfo", "FAIL", "SLURM_NODE_DRAINED"),
    ("slurm/sinfo_list-reasons_Format-reason40-nodelist_Low-RealMemory__clusterinthecloud-terraform-11.txt", "sinfo",
     "FAIL", "SLURM_NODE_LOW_RESOURCES"),
    ("slurm/sinfo_lNe_down-not-responding__elasticluster-272.txt", "sinfo", "FAIL", "SLURM_NODE_NOT_RESPONDING"),
    ("slurm/sinfo_R_headerless_Kill-task-failed__awsome-distributed-ai-185.txt", "sinfo", "FAIL",
     "SLURM_KILL_TASK_FAILED"),
    ("slurm/sinfo_N_drained-ours_draining-operator.txt", "sinfo", "WARN", "SLURM_NODE_DRAINED"),
    ("slurm/slurmctld_log_low-real-memory-drain__aws-parallelcluster-1517.txt", "slurm_log", "FAIL",
     "SLURM_NODE_LOW_RESOURCES"),
    ("slurm/slurmctld_journal_munge-invalid-credential__trinity-759.txt", "slurm_log", "FAIL",
     "SLURM_MUNGE_KEY_MISMATCH"),
    ("slurm/slurmctld_log_munge-expired-credential_clock-skew__ansible-slurm-appliance-114.txt", "slurm_log", "FAIL",
     "SLURM_MUNGE_CLOCK_SKEW"),
    ("slurm/slurmctld_journal_gres-count-lower-INVAL__puppet-magic_castle-361.txt", "slurm_log", "FAIL",
     "SLURM_GRES_MISMATCH"),
    ("runtime/torch_watchdog_timeout_ALLREDUCE_SeqNum1580_8ranks__LlamaFactory-7396.txt", "training_log", "FAIL",
     "TORCH_NCCL_WATCHDOG_TIMEOUT"),
    ("runtime/torch_nccl_async_error_ncclRemoteError_IB-error12__stanford_alpaca-207.txt", "training_log", "FAIL",
     "TORCH_NCCL_ASYNC_ERROR"),
    ("runtime/torch_dist_store_timeout_1of3_clients__OpenRLHF-1040.txt", "training_log", "FAIL", "TORCH_STORE_ERROR"),
    ("runtime/gloo_recv_timeout_unbound_buffer__gloo-511.txt", "training_log", "FAIL", "GLOO_TIMEOUT"),
    ("runtime/torchrun_ChildFailedError_rank0_SIGKILL__CPPO-6.txt", "training_log", "FAIL", "TORCHRUN_WORKER_FAILED"),
    ("nccl/nccl-tests_failure_IB-completion-error4__nccl-tests-252.txt", "nccl_debug",
     "WARN", "NCCL_WARN"),
    ("nccl/nccl-tests_failure_internal-error_bootstrap__nccl-tests-204.txt", "nccl_tests", "FAIL", "NCCL_PEER_EXITED"),
    ("nccl/nccl-tests_all_reduce_perf_2node-DGX-A100_IB-8xHDR200_k8s__deepops.txt", "nccl_tests", "PASS", None),
    ("nccl/nccl_info_NET-IB-SHARP_IBext_plugin-v6-fallback__nccl-1357.txt", "nccl_debug", "PASS", None),
    ("rdma/ibstat_mlx5_7_State-Down_Physical-LinkUp_lid65535__network-operator-249.txt", "ibstat", "FAIL",
     "ROCE_PORT_DOWN"),
    ("rdma/ibstat_2xConnectX3-mlx4_FDR56_all-Active__Heioy-Books.txt", "ibstat", "PASS", None),
    ("rdma/ibv_devinfo_2xConnectX3-mlx4_IB_port1-ACTIVE_port2-DOWN__Heioy-Books.txt", "ibv_devinfo", "WARN",
     "ROCE_PORT_DOWN"),
    ("rdma/rdma_link_10xmlx5_IB-DOWN-DISABLED-lid65535-sm_lid0_and-ACTIVE__sriov-network-operator-635.txt",
     "rdma_link", "WARN", "ROCE_PORT_DOWN"),
    ("pcie/lspci_vvv_h100_pex890xx_switch_cx7__gpud.txt", "lspci", "PASS", None),
    ("pcie/dmesg_aer_uncorrected_fatal_nvidia__returnn-1500.txt", "kernel_log", "FAIL", "PCIE_AER_UNCORRECTED"),
    ("gpu/dmesg_NVRM_xid63_row-remapper__ml-engineering.txt", "kernel_log", None, "GPU_XID"),
    ("node_stack/torch_import_error_undefined-symbol-ncclCommRegister__pytorch-120186.txt", "ldconfig", "FAIL",
     "STACK_LIBRARY_SHADOWED"),
    ("node_stack/ldconfig-p_debian12-controller.txt", "ldconfig", "PASS", None),
    ("gpu/nvidia-smi_q_excerpt_A100-SXM4-80GB_xid63_dram-correctable_row-remap-pending__ml-engineering.txt",
     "nvidia_smi", "FAIL", "GPU_ROW_REMAP_PENDING"),
    ("gpu/nvidia-smi_q_x_A100-SXM4-80GB_driver535__telegraf.xml", "nvidia_smi", "WARN", "GPU_PERSISTENCE_OFF"),
    ("gpu/nvidia-smi_query-gpu_csv_all-fields_1xH100_driver590_idle__nvidia_gpu_exporter-captures.txt", "nvidia_smi",
     "PASS", None),
    ("rdma/sysfs-ib-learned-state_bad-rate__facebookresearch-gcm.json", "sysfs_ib", "PASS", None),
]


@pytest.mark.parametrize("path, kind, verdict, code", ROWS, ids=[r[0].split("/")[1][:60] for r in ROWS])
def test_every_family_is_recognised_and_judged(path, kind, verdict, code):
    out = td.diagnose_text(read(path))
    assert out["kind"] == kind
    if verdict:
        assert out["verdict"] == verdict, out["problems"]
    if code:
        assert code in [p["code"] for p in out["problems"]]


def test_nccl_tests_failure_with_its_exit_status_is_a_transport_error():
    out = td.diagnose_text(read("nccl/nccl-tests_failure_IB-completion-error4__nccl-tests-252.txt"), "nccl_tests",
                           {"rc": 1})
    assert out["verdict"] == "FAIL" and out["problems"][0]["code"] == "NCCL_TRANSPORT_ERROR"


def test_context_the_text_cannot_give():
    text = read("pcie/dmesg_pcie_bw_limited_mlx5_oldformat__l2fwd-nv-6.txt")
    assert td.diagnose_text(text, context={"line_rates": {"*": 100}})["errors"] == ["PCIE_LINK_BELOW_LINE_RATE"]
    assert td.diagnose_text(text)["verdict"] in ("WARN", "PASS")
    ports = read("rdma/ibstat_excerpt_mlx4_port1-Down-Disabled_port2-Active__rdma-core-847.txt")
    assert td.diagnose_text(ports, context={"nccl_ib_hca": "mlx4_0:1"})["errors"] == ["ROCE_PORT_DOWN"]
    scontrol = "NodeName=n1 State=IDLE Gres=gpu:h100:8\n"
    assert td.diagnose_text(scontrol, context={"gpus": {"n1": 6}})["errors"] == ["SLURM_GRES_MISMATCH"]


def test_unknown_text_and_kind():
    out = td.diagnose_text("hello world\n")
    assert out["kind"] is None and out["verdict"] == "UNKNOWN"
    assert out["problems"][0]["code"] == "DIAGNOSE_UNKNOWN_INPUT"
    with pytest.raises(ValueError, match="kind must be"):
        td.diagnose_text("x", "nvidia-smi")


def test_a_sysfs_tree_with_a_port_down():
    import json
    tree = json.loads(read("rdma/sysfs-ib-learned-state_bad-rate__facebookresearch-gcm.json"))
    # derived: mlx5_3's port 1 down and polling (its cable pulled) among 7 ACTIVE rails
    keys = [k for k in tree if "/mlx5_3/ports/1/" in k]
    tree.update((k, {"state": "1: DOWN\n", "phys_state": "2: Polling\n"}[k.rsplit("/", 1)[1]]) for k in keys
                if k.endswith(("/state", "/phys_state")))
    out = td.diagnose_text(json.dumps(tree))
    assert out["kind"] == "sysfs_ib" and out["errors"] == ["ROCE_PORT_DOWN"]
    assert "port 1 of the node's other InfiniBand HCAs" in out["problems"][0]["message"]
    refused = td.diagnose_text("{}", "sysfs_ib")
    assert refused["verdict"] == "UNKNOWN" and "sysfs_ib takes" in refused["problems"][0]["message"]
    assert td.diagnose_text("hello", "scontrol")["problems"][0]["code"] == "DIAGNOSE_UNKNOWN_INPUT"
