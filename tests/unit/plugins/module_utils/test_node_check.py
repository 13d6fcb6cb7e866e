"""node_check: the node command's settings, the quick tier on real command outputs, exit codes and Slurm actions."""
from __future__ import annotations

import importlib.util
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import health_io
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import node_check
from ansible_collections.ddp.cluster.plugins.module_utils.slurm.nodes import SlurmParseError
from ansible_collections.ddp.cluster.plugins.modules import gpu_health as gpu_module
from ansible_collections.ddp.cluster.plugins.modules import roce_health as roce_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
ROOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..")
A100 = ("0000:01:00.0", "0x10de", "0x20b2", "0x030200")
HOST_BRIDGE = ("0000:00:00.0", "0x8086", "0x09a2", "0x060000")


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


A100_OUTPUTS = {
    "nvidia-smi -q -x": (0, fixture("gpu", "nvidia-smi_q_x_A100-SXM4-80GB_driver535__telegraf.xml"), ""),
    "nvidia-smi nvlink --status": (0, fixture("gpu", "nvidia-smi_nvlink_status_A100_good__azurehpc-health-checks.txt"), ""),
    "nvidia-smi topo -m": (0, fixture("gpu", "nvidia-smi_topo_m_8xA100-SXM4_NV12_no-NICs__ml-engineering.txt"), ""),
    "journalctl -k --no-pager -q -o short -b": (0, "kernel: " + fixture("gpu", "dmesg_NVRM_xid63_row-remapper__ml-engineering.txt"), ""),
}


class ReplayRunner(object):
    """A runner (health_io's interface) that answers from recorded outputs: {argv tail: (rc, out, err)}."""

    def __init__(self, outputs, tools=None, hang=()):
        self.outputs, self.calls, self.hang = outputs, [], hang
        self.tools = set(tools if tools is not None else [k.split()[0] for k in outputs])

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if name in self.tools else None

    def run_command(self, args, environ_update=None, **_kwargs):
        argv = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(args))
        self.calls.append(argv)
        if any(argv.startswith(h) for h in self.hang):
            raise health_io.DeadlineExceeded("%s did not finish before the deadline (killed)" % argv)
        for key, value in self.outputs.items():
            if argv.endswith(key):
                return value
        return (1, "", "not recorded")


def sysfs(tmp_path, *devices):
    for address, vendor, device, klass in devices:
        base = tmp_path / "bus" / "pci" / "devices" / address
        base.mkdir(parents=True)
        for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
            (base / name).write_text(value + "\n")
    return str(tmp_path)


def config(tmp_path, *devices, **sections):
    data = {"roce": dict(sections.pop("roce", {}), sysfs_root=sysfs(tmp_path, *devices))}
    data.update(sections)
    return node_check.load_config(data)


# ------------------------------------------------------------------ settings

def test_defaults_are_the_modules_defaults():
    cfg = node_check.load_config({})
    assert cfg["deadline_s"] == 50.0 and cfg["slurm"] == {"prefix": "ddp-health:"}
    assert cfg["gpu"]["max_temperature_c"] == 85 and cfg["gpu"]["no_gpu_severity"] == "warning"
    assert cfg["roce"]["min_mtu"] == 4096 and cfg["roce"]["sysfs_root"] == "/sys"
    assert cfg["metrics"] == {"textfile_dir": ""}
    assert node_check.load_config({"metrics": {"textfile_dir": "/var/lib/prometheus/node-exporter"}})["metrics"] == {
        "textfile_dir": "/var/lib/prometheus/node-exporter"}


def test_the_options_are_the_modules_options():
    """The settings file takes what the modules take (but fail_on: the command's verdict decides)."""
    def spec(module):
        return set(_spec_keys(module)) - {"fail_on"}
    assert set(node_check.GPU_OPTIONS) == spec(gpu_module)
    assert set(node_check.ROCE_OPTIONS) == spec(roce_module)


def _spec_keys(module):
    captured = {}

    class Capture(object):
        def __init__(self, argument_spec, **_kwargs):
            captured.update(argument_spec)
    original = module.AnsibleModule
    module.AnsibleModule = Capture
    try:
        module.build_module()
    finally:
        module.AnsibleModule = original
    return captured


def test_every_settings_error_is_listed_at_once():
    with pytest.raises(node_check.ConfigError) as err:
        node_check.load_config({"deadline_s": 90, "gpu": {"expected_gpus": "4", "check_xid": 1, "colour": "red"},
                                "roce": {"min_mtu": 0, "no_rdma_severity": "fatal"}, "slurm": {"prefix": "ddp:"},
                                "tier": "burnin"})
    text = "\n".join(err.value.errors)
    for expected in ("tier is not a setting", "deadline_s must be a number of seconds in [1, 55], got 90",
                     "gpu.expected_gpus must be int, got '4'", "gpu.check_xid must be bool, got 1",
                     "gpu.colour is not an option", "roce.min_mtu must be a positive number",
                     "roce.no_rdma_severity must be one of", "slurm.prefix must be a non-empty text other than"):
        assert expected in text, text
    assert len(err.value.errors) == 8


@pytest.mark.parametrize("data, message", [
    ([], "the settings must be a JSON object, got list"),
    ({"gpu": []}, "gpu must be a mapping, got list"),
    ({"gpu": {"min_driver": "latest"}}, "gpu.min_driver must be a dotted version"),
    ({"gpu": {"expected_gpus": -1}}, "gpu.expected_gpus must be 0 or more"),
    ({"deadline_s": True}, "deadline_s must be a number"),
    ({"slurm": {"prefix": "x:", "drain": True}}, "slurm must be a mapping with prefix only"),
    ({"slurm": {"prefix": "ddp"}}, "slurm.prefix must be a non-empty text other than the health stage's ddp:"),
    ({"metrics": {"textfile_dir": "metrics"}}, "metrics.textfile_dir must be empty (no metrics) or an absolute path"),
    ({"metrics": {"textfile_dir": "/m", "port": 9100}}, "metrics must be a mapping with textfile_dir only"),
])
def test_bad_settings(data, message):
    with pytest.raises(node_check.ConfigError) as err:
        node_check.load_config(data)
    assert message in str(err.value)


# ------------------------------------------------------------------ the quick tier

def test_no_gpu_no_rdma_is_warn_and_exit_0(tmp_path):
    runner = ReplayRunner({}, tools=[])
    out = node_check.quick_check(runner, config(tmp_path, HOST_BRIDGE))
    assert (out["verdict"], out["errors"], out["warnings"]) == ("WARN", [], ["NO_GPU", "NO_RDMA"])
    assert out["checks"] == {"gpu": True, "roce": True} and node_check.exit_code(out["verdict"]) == 0
    assert runner.calls == []


def test_a100_with_an_xid_63_is_warn(tmp_path):
    runner = ReplayRunner(A100_OUTPUTS, tools=["nvidia-smi", "journalctl"])
    out = node_check.quick_check(runner, config(tmp_path, HOST_BRIDGE, A100, gpu={"expected_gpus": 1}))
    assert out["verdict"] == "WARN" and out["errors"] == []
    assert {"GPU_XID", "GPU_PERSISTENCE_OFF", "NO_RDMA"} <= set(out["warnings"])
    assert runner.calls[0] == "nvidia-smi -q -x"


def test_a100_missing_gpus_is_fail_and_exit_1(tmp_path):
    out = node_check.quick_check(ReplayRunner(A100_OUTPUTS, tools=["nvidia-smi", "journalctl"]),
                                 config(tmp_path, HOST_BRIDGE, A100, gpu={"expected_gpus": 4}))
    assert out["verdict"] == "FAIL" and out["errors"] == ["GPU_COUNT_MISMATCH"]
    assert out["problems"][0]["code"] == "GPU_COUNT_MISMATCH"  # errors first
    assert node_check.exit_code(out["verdict"]) == 1


def test_wrong_nccl_interface_is_fail_with_this_machines_ip(tmp_path):
    """The real `ip -j addr` of the machine running the tests, through the node command's own runner: no interface
    is called ib0 here."""
    program = os.path.join(ROOT_DIR, "roles", "node_health", "files", "ddp_health.py")
    spec = importlib.util.spec_from_file_location("ddp_health", program)
    ddp_health = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ddp_health)
    runner = ddp_health.CommandRunner(deadline_s=30)
    if not runner.get_bin_path("ip"):
        pytest.skip("iproute2 is not installed here")
    out = node_check.quick_check(runner, config(tmp_path, HOST_BRIDGE, roce={"nccl_socket_ifname": "=ib0"}))
    assert out["verdict"] == "FAIL" and "IFNAME_NOT_FOUND" in out["errors"], out["problems"]


def test_a_hung_nvidia_smi_is_a_fault_of_the_node(tmp_path):
    runner = ReplayRunner(A100_OUTPUTS, tools=["nvidia-smi", "journalctl"], hang=("nvidia-smi -q",))
    out = node_check.quick_check(runner, config(tmp_path, HOST_BRIDGE, A100))
    assert out["verdict"] == "FAIL" and out["errors"] == ["HEALTH_DEADLINE"]
    assert out["checks"] == {"gpu": False, "roce": False}  # nothing more runs once the time is up
    assert node_check.exit_code(out["verdict"]) == 1


def test_a_check_that_crashes_is_unknown_not_pass(tmp_path, monkeypatch):
    def boom(runner, params):
        raise KeyError("ports")
    monkeypatch.setattr(health_io, "gather_roce", boom)
    seen = []
    out = node_check.quick_check(ReplayRunner({}, tools=[]), config(tmp_path, HOST_BRIDGE), on_crash=seen.append)
    assert out["verdict"] == "UNKNOWN" and out["checks"] == {"gpu": True, "roce": False}
    assert "HEALTH_CHECK_CRASHED" in out["errors"] and [type(e) for e in seen] == [KeyError]
    assert "the roce check raised KeyError" in out["problems"][0]["message"]
    assert node_check.exit_code(out["verdict"]) == 2


def test_a_crash_does_not_hide_an_error_the_other_check_found(tmp_path, monkeypatch):
    def boom(runner, params):
        raise ValueError("unexpected output")
    monkeypatch.setattr(health_io, "gather_roce", boom)
    out = node_check.quick_check(ReplayRunner(A100_OUTPUTS, tools=["nvidia-smi", "journalctl"]),
                                 config(tmp_path, HOST_BRIDGE, A100, gpu={"expected_gpus": 4}))
    assert out["verdict"] == "FAIL" and out["errors"] == ["GPU_COUNT_MISMATCH", "HEALTH_CHECK_CRASHED"]


# ------------------------------------------------------------------ Slurm (real sinfo outputs, fixtures/slurm)

SINFO = fixture("slurm", "sinfo_N_drained-ours_draining-operator.txt")


def verdict(name, errors=()):
    return {"verdict": name, "errors": list(errors), "warnings": []}


@pytest.mark.parametrize("node, result, action, reason", [
    ("ddp-node1", verdict("FAIL", ["GPU_XID"]), "drain", "ddp-health:GPU_XID"),
    ("ddp-node1", verdict("WARN"), "none", None),
    ("ddp-node1", verdict("UNKNOWN", ["HEALTH_DEADLINE"]), "none", None),
    # drained by the health stage (ddp:...) or an operator: never resumed nor overwritten by the node command
    ("ddp-node2", verdict("PASS"), "none", None),
    ("ddp-node2", verdict("FAIL", ["GPU_XID"]), "none", None),
    ("ddp-node3", verdict("FAIL", ["GPU_XID"]), "none", None),
    ("ddp-node9", verdict("FAIL", ["GPU_XID"]), "none", None),
])
def test_slurm_plan(node, result, action, reason):
    plan = node_check.slurm_plan(SINFO, node, result)
    assert (plan["action"], plan["reason"]) == (action, reason), plan


def test_slurm_plan_resumes_its_own_drain_only_when_healthy():
    own = fixture("slurm", "sinfo_N_drained-by-ddp-health.txt")  # ddp-mol2 drained by its HealthCheckProgram
    assert node_check.slurm_plan(own, "ddp-mol2", verdict("WARN"))["action"] == "resume"
    assert node_check.slurm_plan(own, "ddp-mol2", verdict("UNKNOWN"))["action"] == "none"
    assert node_check.slurm_plan(own, "ddp-mol2", verdict("FAIL", ["IFNAME_NOT_FOUND"]))["action"] == "none"
    assert node_check.slurm_plan(own, "ddp-mol2", verdict("FAIL", ["GPU_ECC_UNCORRECTABLE"]))["reason"] == \
        "ddp-health:GPU_ECC_UNCORRECTABLE"
    assert node_check.slurm_plan(own, "ddp-mol1", verdict("PASS"))["action"] == "none"


def test_slurm_plan_rejects_other_output():
    with pytest.raises(SlurmParseError):
        node_check.slurm_plan("slurm_load_node error: Unable to contact slurm controller\n", "ddp-node1",
                              verdict("PASS"))


def test_slurm_plan_reads_a_node_list_and_names_what_slurm_set():
    plan = node_check.slurm_plan("NODELIST   NODES PARTITION STATE\nddp-node1 1 ddp* idle\n", "ddp-node1", verdict("PASS"))
    assert plan["action"] == "none" and plan["problems"] == []
    plan = node_check.slurm_plan("ddp-node1|drained|Low RealMemory\n", "ddp-node1", verdict("PASS"))
    assert plan["action"] == "none" and "Slurm itself" in plan["why"]
    assert [(p["code"], p["severity"]) for p in plan["problems"]] == [("SLURM_NODE_LOW_RESOURCES", "error")]
    report = node_check.merge_problems(verdict("PASS"), plan["problems"])
    assert report["verdict"] == "FAIL" and report["errors"] == ["SLURM_NODE_LOW_RESOURCES"]


def test_a_node_an_operator_set_down_is_left_alone():
    """A DOWN node with someone else's reason is not drained over (its reason would be lost) nor resumed later."""
    down = "gpu01|down|RMA ticket 42\ngpu02|down*|Not responding\n"
    assert node_check.slurm_plan(down, "gpu01", verdict("FAIL", ["GPU_XID"]))["action"] == "none"
    assert node_check.slurm_plan(down, "gpu01", verdict("PASS"))["action"] == "none"
    assert node_check.slurm_plan(down, "gpu02", verdict("FAIL", ["GPU_XID"]))["action"] == "drain"
