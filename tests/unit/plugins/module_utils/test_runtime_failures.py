"""The runtime failure reader on real logs (tests/unit/fixtures/runtime and nccl; SOURCES.md there)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.nccl import health as nh
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import runtime_failures as rf

HERE = os.path.dirname(__file__)
RUNTIME = os.path.join(HERE, "..", "..", "fixtures", "runtime")
NCCL = os.path.join(HERE, "..", "..", "fixtures", "nccl")


def read(name, folder=RUNTIME):
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


def test_every_fixture_is_listed_in_sources():
    sources = read("SOURCES.md")
    for name in os.listdir(RUNTIME):
        if name != "SOURCES.md":
            assert name in sources, name


@pytest.mark.parametrize("name, first", [
    ("torch_watchdog_timeout_ALLREDUCE_SeqNum1580_8ranks__LlamaFactory-7396.txt", "TORCH_NCCL_WATCHDOG_TIMEOUT"),
    ("torch_watchdog_timeout_old-format_1800000ms__OFA-271.txt", "TORCH_NCCL_WATCHDOG_TIMEOUT"),
    ("torch_watchdog_timeout_BROADCAST-vs-ALLREDUCE_desync__nccl-1409.txt", "TORCH_NCCL_WATCHDOG_TIMEOUT"),
    ("torch_nccl_async_error_ncclRemoteError_IB-error12__stanford_alpaca-207.txt", "TORCH_NCCL_ASYNC_ERROR"),
    ("torch_dist_store_timeout_1of3_clients__OpenRLHF-1040.txt", "TORCH_STORE_ERROR"),
    ("torch_client_socket_timeout_connect__vllm-19670.txt", "TORCH_STORE_ERROR"),
    ("gloo_recv_timeout_unbound_buffer__gloo-511.txt", "GLOO_TIMEOUT"),
    ("torchrun_ChildFailedError_rank0_SIGKILL__CPPO-6.txt", "TORCHRUN_WORKER_FAILED"),
])
def test_each_failure_has_its_own_code(name, first):
    problems = rf.runtime_problems(read(name), "job 7")
    assert problems[0]["code"] == first and problems[0]["severity"] == "error"
    assert problems[0]["subject"] == "job 7"


def test_watchdog_timeout_names_collective_sequence_time_and_ranks():
    text = read("torch_watchdog_timeout_ALLREDUCE_SeqNum1580_8ranks__LlamaFactory-7396.txt")
    parsed = rf.parse_runtime_log(text)
    assert [(w["rank"], w["op"], w["seq"], w["timeout_ms"], w["ran_ms"]) for w in parsed["watchdog"]] == [
        (0, "ALLREDUCE", 1580, 600000, 600060), (4, "ALLREDUCE", 1580, 600000, 600067)]
    assert parsed["last_work"][0] == {"at": 1580, "enqueued": 1582, "completed": 1579}
    message = rf.runtime_problems(text, "job", world_size=8)[0]["message"]
    assert "ALLREDUCE SeqNum=1580" in message and "600000 ms" in message and "rank(s) 0, 4" in message
    assert "ranks 1, 2, 3, 5, 6, 7 reported no timeout" in message
    assert "Not a rendezvous or firewall problem" in message


def test_the_same_sequence_number_in_two_collectives_is_a_desync():
    message = rf.runtime_problems(read("torch_watchdog_timeout_BROADCAST-vs-ALLREDUCE_desync__nccl-1409.txt"))[0]["message"]
    assert "different collectives at the same sequence number (80078)" in message


def test_async_error_keeps_the_nccl_text_and_classifies_it():
    problem = rf.runtime_problems(read("torch_nccl_async_error_ncclRemoteError_IB-error12__stanford_alpaca-207.txt"))[0]
    assert "(transport failure)" in problem["message"] and "NCCL 2.14.3" in problem["message"]
    assert "with error 12" in problem["message"] and "ACS" in problem["fix"]


def test_store_errors_say_who_did_not_join_and_where():
    assert "1/3 joined" in rf.runtime_problems(read("torch_dist_store_timeout_1of3_clients__OpenRLHF-1040.txt"))[0]["message"]
    assert "172.17.0.9:46229" in rf.runtime_problems(read("torch_client_socket_timeout_connect__vllm-19670.txt"))[0]["message"]


def test_sigkill_points_at_the_oom_killer():
    problem = rf.runtime_problems(read("torchrun_ChildFailedError_rank0_SIGKILL__CPPO-6.txt"))[0]
    assert "rank 0" in problem["message"] and "SIGKILL" in problem["message"] and "oom" in problem["fix"]


@pytest.mark.parametrize("name, cls", [
    ("nccl-tests_failure_IB-completion-error4__nccl-tests-252.txt", "transport"),
    ("nccl-tests_failure_internal-error_socket-closed-by-peer__nccl-tests-166.txt", "process"),
    ("nccl-tests_failure_internal-error_bootstrap__nccl-tests-204.txt", "process"),
    ("nccl_warn_error-lines_memlock-and-RoCE-wrong-GID__NVIDIA-nccl-userguide.txt", "transport"),
])
def test_nccl_error_classes(name, cls):
    assert rf.classify_nccl_error(read(name, NCCL))["class"] == cls


@pytest.mark.parametrize("text, cls", [
    ("host: Test CUDA failure common.cu:892 'out of memory'", "cuda"),
    ("NCCL WARN Bootstrap : no socket interface found", "system"),
    ("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", "usage"),
    ("all fine", "unknown"),
])
def test_nccl_error_classes_of_single_lines(text, cls):
    assert rf.classify_nccl_error(text)["class"] == cls


@pytest.mark.parametrize("name, code", [
    ("nccl-tests_failure_IB-completion-error4__nccl-tests-252.txt", "NCCL_TRANSPORT_ERROR"),
    ("nccl-tests_failure_internal-error_socket-closed-by-peer__nccl-tests-166.txt", "NCCL_PEER_EXITED"),
    ("nccl-tests_failure_internal-error_bootstrap__nccl-tests-204.txt", "NCCL_PEER_EXITED"),
])
def test_a_failed_nccl_tests_run_keeps_nccls_text_and_is_classified(name, code):
    problems, facts = nh.diagnose_nccl_tests(1, read(name, NCCL), "node n1")
    assert problems[0]["code"] == code and problems[0]["severity"] == "error"
    assert facts["failure"]["class"] in ("transport", "process")
    if "204" in name:
        assert "internal error - please report this issue to the NCCL developers" in problems[0]["message"]
        assert "common.cu:844" not in problems[0]["message"]


def test_a_hang_in_a_collective_is_not_called_a_rendezvous_failure():
    text = read("torch_watchdog_timeout_ALLREDUCE_SeqNum1580_8ranks__LlamaFactory-7396.txt")
    problems, _facts = nh.diagnose_torch_run(1, text, None, "node n1", "n1:29500")
    found = [p["code"] for p in problems]
    assert "TORCH_NCCL_WATCHDOG_TIMEOUT" in found and "NCCL_RENDEZVOUS_FAILED" not in found
    assert "firewall" not in problems[0]["fix"].split(";")[0]


def test_a_refused_connection_at_init_stays_a_rendezvous_failure():
    text = read("nccl_pytorch_unhandled-system-error_+_WARN_socket-connect-refused__ml-engineering.txt", NCCL)
    problems, _facts = nh.diagnose_torch_run(1, text, None, "node n1", "n1:29500")
    assert problems[0]["code"] == "NCCL_RENDEZVOUS_FAILED"


def test_the_store_get_of_ncclUniqueId_is_a_store_error():
    problems = rf.runtime_problems(read("torch_store_get_socket_timeout_ncclUniqueId__LlamaFactory-3698.txt"))
    assert [p["code"] for p in problems] == ["TORCH_STORE_ERROR"] and "Socket Timeout" in problems[0]["message"]


def test_watchdog_lines_with_the_process_group_prefix():
    parsed = rf.parse_runtime_log(read("torch_watchdog_timeout_PG-ID-form_last-work__BasicSR-737.txt"))
    assert sorted(w["rank"] for w in parsed["watchdog"]) == [0, 1, 2]
    assert parsed["last_work"] == {0: {"at": 808, "enqueued": 811, "completed": 807},
                                   1: {"at": 808, "enqueued": 811, "completed": 807}}


def test_an_nccl_error_reported_by_the_watchdog_with_its_last_error_and_memlock_is_set_up():
    entry = rf.parse_runtime_log(read("torch_nccl_error_remote-exited_IB-error5__DeepEP-106.txt"))["async_errors"][0]
    assert entry["last_error"].startswith("NET/IB : Got completion from peer 172.21.17.89<38536> with error 5")
    assert entry["version"] == "2.20.5"
    memlock = "n1:1:2 [0] misc/ibvwrap.cc:100 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory"
    assert rf.classify_nccl_error(memlock)["class"] == "system"


def test_the_torch_modes_own_classifiers_name_a_hung_collective():
    text = read("torch_watchdog_timeout_old-format_1800000ms__OFA-271.txt")
    assert nh.classify_failure(text)["verdict"] == "collective_hang"
    prob, cause = nh.rendezvous_problem(1, text, "node n1", "n1:29500")
    assert prob["code"] == "TORCH_NCCL_WATCHDOG_TIMEOUT" and cause["verdict"] == "collective_hang"
    refused = read("nccl_pytorch_unhandled-system-error_+_WARN_socket-connect-refused__ml-engineering.txt", NCCL)
    assert nh.classify_failure(refused)["verdict"] == "refused"
    assert nh.rendezvous_problem(1, refused, "node n1", "n1:29500")[0]["code"] == "NCCL_RENDEZVOUS_FAILED"
    assert nh.classify_failure(read("torch_nccl_async_error_ncclRemoteError_IB-error12__stanford_alpaca-207.txt"))[
        "verdict"] == "nccl_error"
