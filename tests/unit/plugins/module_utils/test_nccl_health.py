"""Table-driven tests for plugins/module_utils/nccl/health.py: fixtures in, problem codes out."""
from __future__ import annotations

import ast
import os

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.nccl import health as nh
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import SEVERITIES, should_fail

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "fixtures", "nccl")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(ROOT, "roles", "pytorch_env", "files", "ddp_nccl_allreduce.py")
SUBJECT = "node gpu1"


def read(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def codes(problems):
    return sorted((p["code"], p["severity"]) for p in problems)


def assert_shape(problems):
    for p in problems:
        assert set(p) == {"code", "severity", "subject", "message", "fix"}
        assert p["code"] in nh.PROBLEM_CODES and p["severity"] in SEVERITIES and p["message"] and p["fix"]


A100 = "nccl-tests_all_reduce_perf_1node-8xA100-SXM4-40GB_NVLink_g8__ocitutorials.txt"
H200_SOCKET = "nccl-tests_all_reduce_perf_2node-8xH200_NCCL_IB_DISABLE-socket_single-NIC__schmaustech-nvidia-tools-image.txt"
DGX2 = "nccl-tests_all_reduce_perf_2node-DGX-A100_IB-8xHDR200_k8s__deepops.txt"
H100_ROCE = "nccl-tests_all_reduce_perf_2node-H100_RoCEv2-16x200G_OCI__ocitutorials.txt"
SRIOV = "nccl-tests_all_reduce_perf_2node_RoCE-100GbE-SRIOV_k8s__deepops.txt"
DGX4 = "nccl-tests_all_reduce_perf_4node-DGX-A100_IB-8xHDR_32gpu__deepops.txt"
NET_LINES = "nccl_debug_INFO_NET-Using-lines_IB-RoCE-bond-Socket-FastSocket__ml-engineering.txt"
OFFICIAL = "nccl_debug_INFO_official-doc-excerpts_WARN-INIT-GRAPH-SHM-NET-P2P-TUNING__NVIDIA-nccl-userguide.txt"
REFUSED = "nccl_pytorch_unhandled-system-error_+_WARN_socket-connect-refused__ml-engineering.txt"
MEMLOCK = "nccl_warn_error-lines_memlock-and-RoCE-wrong-GID__NVIDIA-nccl-userguide.txt"

# nccl-tests fixture, min busbw floor, expected transport, rdma devices,
# -> avg busbw, sizes, world size, nccl version, expected (code, severity) list
NCCL_TESTS_ROWS = [
    (A100, 200.0, None, [], 81.112, 28, 8, None, []),
    (A100, 440.0, None, [], 81.112, 28, 8, None, [("NCCL_BUSBW_LOW", "error")]),
    (H200_SOCKET, None, None, [], 36.2205, 32, 16, "2.27.3", []),
    # the socket run on a RoCE cluster: 92 GB/s where 8 rails give ~190 (C07 story) + no NCCL log to prove IB
    (H200_SOCKET, 180.0, "IB", ["mlx5_0"], 36.2205, 32, 16, "2.27.3",
     [("NCCL_BUSBW_LOW", "error"), ("NCCL_TRANSPORT_UNEXPECTED", "warning")]),
    (DGX2, 180.0, None, [], 53.7098, 30, None, None, []),
    (H100_ROCE, 440.0, None, [], 458.452, 5, 16, None, []),
    (SRIOV, 21.0, None, [], 7.76739, 29, None, None, []),
    (SRIOV, 85.0, None, [], 7.76739, 29, None, None, [("NCCL_BUSBW_LOW", "error")]),
    (DGX4, 185.0, None, [], 113.289, 13, None, None, []),
]


@pytest.mark.parametrize("name,floor,expected,rdma,avg,nsizes,world,version,expect", NCCL_TESTS_ROWS)
def test_diagnose_nccl_tests(name, floor, expected, rdma, avg, nsizes, world, version, expect):
    problems, facts = nh.diagnose_nccl_tests(0, read(name), SUBJECT, min_busbw_gbps=floor,
                                             expected_transport=expected, rdma_devices=rdma)
    assert_shape(problems)
    assert codes(problems) == sorted(expect)
    assert facts["avg_busbw_gbps"] == pytest.approx(avg)
    assert len(facts["busbw"]) == nsizes
    assert facts["world_size"] == world
    assert facts["nccl_version"] == version
    assert facts["backend"] == "nccl" and facts["transport"] is None
    assert set(facts["busbw"][0]) == {"bytes", "algbw_gbps", "busbw_gbps", "time_us"}


def test_nccl_tests_busbw_computed_when_missing():
    rows = nh.busbw_rows([{"bytes": 8, "out_of_place": {"algbw_gbps": 10.0, "busbw_gbps": None, "time_us": 1.0}}],
                         nranks=4)
    assert rows[0]["busbw_gbps"] == pytest.approx(15.0)


def test_nccl_tests_failure_and_wrong_results():
    text = read(A100).replace("      0    32.01    0.00    0.00      0    31.82", "      0    32.01    0.00    0.00     12    31.82")
    text = text.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 12 FAILED")
    problems, _facts = nh.diagnose_nccl_tests(1, text, SUBJECT)
    assert codes(problems) == [("NCCL_RESULTS_WRONG", "error"), ("NCCL_RUN_FAILED", "error")]
    problems, facts = nh.diagnose_nccl_tests(127, "all_reduce_perf: command not found\n", SUBJECT)
    assert codes(problems) == [("NCCL_RUN_FAILED", "error")] and facts["busbw"] == []
    assert "command not found" in problems[0]["message"]


# NCCL log fixture + a successful NCCL result, rdma devices, expected transport -> transport, codes
def ok_data(backend="nccl", versions=None):
    return {
        "backend": backend, "world_size": 2, "torch_version": "2.3.1", "avg_busbw_gbps": 1.5,
        "results": [{"bytes": 1048576, "count": 262144, "time_us": 1000.0, "algbw_gbps": 1.0, "busbw_gbps": 1.0,
                     "wrong": 0},
                    {"bytes": 4194304, "count": 1048576, "time_us": 2000.0, "algbw_gbps": 2.0, "busbw_gbps": 2.0,
                     "wrong": 0}],
        "nccl_versions": versions if versions is not None else {"gpu1": "2.18.3", "gpu2": "2.18.3"},
        "hosts": {"gpu1": [0], "gpu2": [1]},
    }


LOG_ROWS = [
    (OFFICIAL, ["mlx5_0"], None, "Socket", [("NCCL_SOCKET_FALLBACK", "warning"), ("NCCL_WARN", "warning")]),
    (OFFICIAL, ["mlx5_0"], "IB", "Socket", [("NCCL_TRANSPORT_UNEXPECTED", "error"), ("NCCL_WARN", "warning")]),
    (OFFICIAL, [], None, "Socket", [("NCCL_WARN", "warning")]),
    (OFFICIAL, [], "Socket", "Socket", [("NCCL_WARN", "warning")]),
    (NET_LINES, ["mlx5_0"], None, None, []),
    (NET_LINES, [], "IB", None, [("NCCL_TRANSPORT_UNEXPECTED", "warning")]),
    (MEMLOCK, [], None, None, [("NCCL_WARN", "warning")] * 3),
]


@pytest.mark.parametrize("name,rdma,expected,transport,expect", LOG_ROWS)
def test_diagnose_torch_log(name, rdma, expected, transport, expect):
    problems, facts = nh.diagnose_torch_run(0, read(name), ok_data(), SUBJECT, "gpu1:29510",
                                            expected_transport=expected, rdma_devices=rdma)
    assert_shape(problems)
    assert codes(problems) == sorted(expect)
    assert facts["transport"] == transport
    assert facts["world_size"] == 2 and facts["backend"] == "nccl"
    assert facts["nccl_version"] == "2.18.3"  # from the per-host versions torch reported


def test_warn_hints():
    problems = nh.warn_problems(nh.parse_nccl_debug(read(MEMLOCK))["warnings"], SUBJECT)
    fixes = [p["fix"] for p in problems]
    assert "memlock" in fixes[0] and "memlock" in fixes[1]
    assert "NCCL_IB_GID_INDEX" in fixes[2]
    assert problems[2]["message"] == "NCCL WARN Call to ibv_modify_qp failed with error Invalid argument"


def test_failed_run_connection_refused():
    problems, facts = nh.diagnose_torch_run(1, read(REFUSED), None, SUBJECT, "node0:29510")
    assert codes(problems) == [("NCCL_RENDEZVOUS_FAILED", "error"), ("NCCL_WARN", "warning")]
    rdzv = problems[0] if problems[0]["code"] == "NCCL_RENDEZVOUS_FAILED" else problems[1]
    assert "connection refused" in rdzv["message"] and "ncclSystemError" in rdzv["message"]
    assert "NCCL 2.7.8" in rdzv["message"] and "Connection refused" in rdzv["message"]
    assert facts["busbw"] == [] and facts["avg_busbw_gbps"] is None
    assert should_fail(problems, "error")


# C03: the firewall rejects rank-to-rank ports; torchrun output -> verdict
FAILURE_ROWS = [
    ("torch.distributed.DistNetworkError: The client socket has failed to connect to [node0]:29510 "
     "(errno: 113 - No route to host).", False, "firewall_reject"),
    ("r1:1:1 [0] include/socket.h:403 NCCL WARN Connect to 192.0.2.10<40000> failed : No route to host",
     False, "firewall_reject"),
    ("The client socket has failed to connect to [node0]:29510 (errno: 111 - Connection refused).", False, "refused"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", False, "timeout"),
    ("", True, "timeout"),
    ("socket.gaierror: [Errno -2] Name or service not known", False, "unresolved"),
    ("ValueError: something else", False, "error"),
]


@pytest.mark.parametrize("text,timed_out,verdict", FAILURE_ROWS)
def test_classify_failure(text, timed_out, verdict):
    assert nh.classify_failure(text, timed_out=timed_out)["verdict"] == verdict
    problems, _facts = nh.diagnose_torch_run(None if timed_out else 1, text, None, SUBJECT, "node0:29510",
                                             timed_out=timed_out)
    assert ("NCCL_RENDEZVOUS_FAILED", "error") in codes(problems)
    assert set(codes(problems)) <= {("NCCL_RENDEZVOUS_FAILED", "error"), ("NCCL_WARN", "warning")}


def test_firewall_reject_fix_names_ephemeral_ports():
    problem, cause = nh.rendezvous_problem(1, FAILURE_ROWS[0][0], SUBJECT, "node0:29510")
    assert cause["verdict"] == "firewall_reject" and "ephemeral" in problem["fix"]


def test_script_refusal_is_run_failed():
    out = "ddp_nccl_allreduce.py: error: backend nccl needs CUDA, but torch.cuda.is_available() is False\n"
    problems, _facts = nh.diagnose_torch_run(1, out, None, SUBJECT, "node0:29510")
    assert codes(problems) == [("NCCL_RUN_FAILED", "error")]


def test_gloo_run_reports_no_gpu_and_wrong_elements():
    data = ok_data(backend="gloo", versions={"n1": None, "n2": None})
    problems, facts = nh.diagnose_torch_run(0, "", data, SUBJECT, "n1:29510", expected_transport="IB",
                                            min_busbw_gbps=2.5)
    assert codes(problems) == [("NCCL_BUSBW_LOW", "error"), ("NO_GPU", "info")]
    assert facts["transport"] == "gloo" and facts["nccl_version"] is None
    data["results"][0]["wrong"] = 5
    problems, _facts = nh.diagnose_torch_run(0, "", data, SUBJECT, "n1:29510")
    assert ("NCCL_RESULTS_WRONG", "error") in codes(problems)


# versions per host -> codes
VERSION_ROWS = [
    ({"a": "2.18.3", "b": "2.18.3+cuda12.2", "c": (2, 18, 3)}, []),
    ({"a": "2.18.3", "b": "2.19.3"}, [("NCCL_VERSION_MISMATCH", "error")]),
    ({"a": "2.18.3", "b": None}, []),
    ({}, []),
]


@pytest.mark.parametrize("versions,expect", VERSION_ROWS)
def test_compare_nccl_versions(versions, expect):
    problems = nh.compare_nccl_versions(versions)
    assert codes(problems) == expect
    if problems:
        assert "2.18.3 on a" in problems[0]["message"] and "2.19.3 on b" in problems[0]["message"]


def test_version_mismatch_from_run():
    problems, _facts = nh.diagnose_torch_run(0, "", ok_data(versions={"gpu1": "2.18.3", "gpu2": "2.21.5"}),
                                             SUBJECT, "gpu1:29510")
    assert codes(problems) == [("NCCL_VERSION_MISMATCH", "error")]


# C09 and neighbours: env, torch version -> (subject suffix, severity) problems
ENV_ROWS = [
    ({"NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_TIMEOUT": "300"}, "2.3.1",
     ["NCCL_ASYNC_ERROR_HANDLING", "NCCL_TIMEOUT"]),
    ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, "2.3.1", []),
    ({"NCCL_ASYNC_ERROR_HANDLING": "1"}, "2.1.0", []),
    ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, "2.1.0+cu121", ["TORCH_NCCL_ASYNC_ERROR_HANDLING"]),
    ({"NCCL_BLOCKING_WAIT": "1", "NCCL_DEBUG": "INFO"}, "2.13.0+cpu", ["NCCL_BLOCKING_WAIT"]),
    ({"NCCL_ASYNC_ERROR_HANDLING": "1"}, None, ["NCCL_ASYNC_ERROR_HANDLING"]),
    ({"NCCL_TIMEOUT": "300"}, "1.13.1", ["NCCL_TIMEOUT"]),
    ({"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0"}, "2.3.1", []),
]


@pytest.mark.parametrize("env,torch_version,names", ENV_ROWS)
def test_check_nccl_env(env, torch_version, names):
    problems = nh.check_nccl_env(env, torch_version, subject="env")
    assert_shape(problems)
    assert [p["subject"] for p in problems] == ["env %s" % n for n in names]
    assert all(p["code"] == "NCCL_ENV_UNKNOWN_VAR" and p["severity"] == "warning" for p in problems)


def test_c09_fix_texts():
    problems = nh.check_nccl_env({"NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_TIMEOUT": "300"}, "2.3.1")
    fixes = {p["subject"].split()[-1]: p["fix"] for p in problems}
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in fixes["NCCL_ASYNC_ERROR_HANDLING"]
    assert "init_process_group" in fixes["NCCL_TIMEOUT"]


def test_env_checked_in_failed_run_too():
    problems, _facts = nh.diagnose_torch_run(1, "boom", None, SUBJECT, "n:1", env={"NCCL_TIMEOUT": "300"},
                                             torch_version="2.3.1")
    assert codes(problems) == [("NCCL_ENV_UNKNOWN_VAR", "warning"), ("NCCL_RENDEZVOUS_FAILED", "error")]


# C04: interface selection values
IFNAME_ROWS = [
    ({"NCCL_SOCKET_IFNAME": "^docker0"}, ["eth0", "docker0", "lo"], [("NCCL_ENV_IFNAME", "warning")]),
    ({"NCCL_SOCKET_IFNAME": "^docker0,lo"}, ["eth0", "docker0", "lo"], []),
    ({"NCCL_SOCKET_IFNAME": "eth2"}, ["eth0", "lo"], [("NCCL_ENV_IFNAME", "error")]),
    ({"GLOO_SOCKET_IFNAME": "^lo,docker"}, ["eth0", "lo"], [("NCCL_ENV_IFNAME", "error")]),
    ({"GLOO_SOCKET_IFNAME": "eth0"}, ["eth0", "lo"], []),
    ({"NCCL_SOCKET_IFNAME": "eth"}, ["eth0", "lo"], []),
    ({"NCCL_SOCKET_IFNAME": "=eth"}, ["eth0", "lo"], [("NCCL_ENV_IFNAME", "error")]),
    ({"GLOO_SOCKET_IFNAME": "eth1"}, ["eth0", "lo"], [("NCCL_ENV_IFNAME", "error")]),
]


@pytest.mark.parametrize("env,interfaces,expect", IFNAME_ROWS)
def test_check_socket_ifname(env, interfaces, expect):
    problems = nh.check_socket_ifname(env, interfaces)
    assert_shape(problems)
    assert codes(problems) == expect


def test_select_interfaces():
    assert nh.select_interfaces("^docker,lo", ["eth0", "docker0", "lo"]) == ["eth0"]
    assert nh.select_interfaces("=eth0", ["eth0", "eth01"]) == ["eth0"]
    assert nh.select_interfaces("eth0", ["eth0", "eth01"]) == ["eth0", "eth01"]


def test_torchrun_argv_and_script_args():
    argv = nh.torchrun_argv(["/v/bin/torchrun"], 3, 4, "head:29510", "run1", 60, "/t/s.py",
                            nh.script_argv([1024, 2048], 10, 2, "auto", 300, "/t/r.json"))
    assert argv[:13] == ["/v/bin/torchrun", "--nnodes", "3", "--nproc-per-node", "4", "--rdzv-backend", "c10d",
                         "--rdzv-endpoint", "head:29510", "--rdzv-id", "run1", "--rdzv-conf", "join_timeout=60"]
    assert argv[argv.index("/t/s.py") + 1:] == ["--sizes", "1024,2048", "--iters", "10", "--warmup", "2",
                                                "--backend", "auto", "--timeout", "300", "--output", "/t/r.json"]


TCPSTORE = os.path.join(os.path.dirname(FIXTURES), "tcpstore")


def read_store(name):
    with open(os.path.join(TCPSTORE, name)) as handle:
        return handle.read()


def test_launcher_choice():
    assert nh.choose_launcher("auto", 1, 2) == "direct"
    assert nh.choose_launcher("auto", 1, None) == "torchrun"  # no rank given: torchrun ranks the nodes
    assert nh.choose_launcher("auto", 4, 0) == "torchrun"  # one process per GPU: torchrun starts them
    assert nh.choose_launcher("torchrun", 1, 0) == "torchrun"
    assert nh.choose_launcher("direct", 1, 0) == "direct"


def test_direct_argv_and_env_are_what_torchrun_would_give_the_one_rank():
    argv = nh.direct_argv("/v/bin/python", "/t/s.py", nh.script_argv([1024], 10, 2, "auto", 300, "/t/r.json"), 60)
    assert argv == ["/v/bin/python", "/t/s.py", "--sizes", "1024", "--iters", "10", "--warmup", "2", "--backend",
                    "auto", "--timeout", "300", "--output", "/t/r.json", "--join-timeout", "60"]
    assert nh.direct_env(2, 3, "head:29510") == {
        "RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "2",
        "MASTER_ADDR": "head", "MASTER_PORT": "29510"}
    assert nh.split_endpoint("[fd00::1]:29510") == ("fd00::1", 29510)


@pytest.mark.parametrize("name, words", [
    # rank 0 hosted the store and waited: the other ranks never connected
    ("rank0_timed-out-waiting-for-clients__torch-2.13.0-cpu.txt", "not every rank connected to rank 0's store "
                                                                  "within join_timeout (1 of 3 joined after 6 s)"),
    # another rank never reached rank 0's store
    ("rank1_client-connect-timeout__torch-2.13.0-cpu.txt", "could not connect to rank 0's store at 127.0.0.1:29557 "
                                                           "within join_timeout (5 s)"),
])
def test_direct_launch_store_failures_are_named(name, words):
    output = read_store(name)
    problems, facts = nh.diagnose_torch_run(1, output, None, SUBJECT, "127.0.0.1:29556", launcher="direct")
    assert codes(problems) == [("NCCL_RENDEZVOUS_FAILED", "error")]
    assert_shape(problems)
    message = problems[0]["message"]
    assert message.startswith("the all-reduce rank (rank 0's store 127.0.0.1:29556) exited with 1: ")
    assert words in message and "torchrun" not in message
    assert "timeout" in problems[0]["fix"] or "join_timeout" in problems[0]["fix"]
    assert facts["busbw"] == []
    # the same text under torchrun's name keeps torchrun's wording
    torchrun_problems, _facts = nh.diagnose_torch_run(1, output, None, SUBJECT, "127.0.0.1:29556")
    assert torchrun_problems[0]["message"].startswith("torchrun (rendezvous 127.0.0.1:29556) exited with 1: ")


def _imports(path):
    with open(path) as handle:
        source = handle.read()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    return source, imported


def test_shipped_script_is_stdlib_and_torch_only():
    source, imported = _imports(SCRIPT)
    # ddp_dist: the gathering and writing it shares with ddp_bench.py, installed beside it
    assert imported <= {"__future__", "argparse", "datetime", "os", "socket", "sys", "time", "torch", "ddp_dist"}
    _shared, shared_imports = _imports(os.path.join(os.path.dirname(SCRIPT), "ddp_dist.py"))
    assert shared_imports <= {"__future__", "json", "os", "pickle", "sys", "tempfile"}
    assert "dist.all_gather_object" not in source  # needs NumPy on the CPU wheel
    assert 'PROG = "%s"' % nh.SCRIPT_PROG in source
    assert os.path.basename(SCRIPT) == nh.SCRIPT_NAME


def test_default_script_is_where_pytorch_env_installs_it():
    assert nh.default_script("/opt/ddp/venv") == "/opt/ddp/venv/share/ddp-cluster/ddp_nccl_allreduce.py"
    assert nh.default_script("/opt/ddp/venv/") == "/opt/ddp/venv/share/ddp-cluster/ddp_nccl_allreduce.py"
    role = os.path.join(ROOT, "roles", "pytorch_env")
    with open(os.path.join(role, "vars", "main.yml")) as handle:
        role_vars = yaml.safe_load(handle)
    with open(os.path.join(role, "tasks", "files.yml")) as handle:
        tasks = yaml.safe_load(handle)
    # the copy loops over the paths of the shipped programs that differ on the node (a find call reads them first)
    copy = [t for t in tasks if "__pytorch_env_programs_wanted" in str(t.get("loop", ""))]
    assert len(copy) == 1, "pytorch_env installs the script once"
    assert "ddp_nccl_allreduce.py" in role_vars["__pytorch_env_programs"]
    assert "ddp_dist.py" in role_vars["__pytorch_env_programs"], "and the module it imports, beside it"
    assert copy[0]["ansible.builtin.copy"]["dest"] == "{{ item }}"
    # into the stack's own folder, which pytorch_env_path is a link to (switch.yml): <env>/share/ddp-cluster through it
    assert "__pytorch_env_target ~ '/share/ddp-cluster/'" in role_vars["__pytorch_env_programs_wanted"]
    with open(os.path.join(role, "tasks", "main.yml")) as handle:
        include = [t for t in yaml.safe_load(handle) if t.get("ansible.builtin.include_tasks") == "files.yml"]
    assert include and "__pytorch_env_files_todo" in include[0]["when"]
    assert "__pytorch_env_programs_wanted" in role_vars["__pytorch_env_files_todo"]
    with open(os.path.join(role, "tasks", "switch.yml")) as handle:
        link = [t for t in yaml.safe_load(handle) if "ansible.builtin.file" in t and t["ansible.builtin.file"].get("state") == "link"]
    assert link and link[0]["ansible.builtin.file"]["dest"] == "{{ pytorch_env_path }}"
    assert link[0]["ansible.builtin.file"]["src"] == "{{ __pytorch_env_target }}"
