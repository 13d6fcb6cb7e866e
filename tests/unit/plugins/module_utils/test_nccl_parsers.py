"""Table-driven tests for plugins/module_utils/nccl/parsers.py on real outputs (tests/unit/fixtures/nccl)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import (
    busbw_from_algbw,
    net_transport,
    normalize_nccl_version,
    parse_log_line,
    parse_nccl_debug,
    parse_nccl_tests,
    parse_pytorch_nccl_error,
    rdma_link_layers,
)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "fixtures", "nccl")


def read(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# file, columns, sizes, avg busbw, largest size, its out-of-place busbw, nranks, hosts, nccl version, wrong total
NCCL_TESTS_ROWS = [
    ("nccl-tests_all_reduce_perf_1node-8xA100-SXM4-40GB_NVLink_g8__ocitutorials.txt",
     "wrong", 28, 81.112, 8589934592, 235.14, 8, 1, None, 0),
    ("nccl-tests_all_reduce_perf_2node-8xH200_NCCL_IB_DISABLE-socket_single-NIC__schmaustech-nvidia-tools-image.txt",
     "wrong", 32, 36.2205, 17179869184, 92.33, 16, 2, "2.27.3", 0),
    ("nccl-tests_all_reduce_perf_2node-DGX-A100_IB-8xHDR200_k8s__deepops.txt",
     "error", 30, 53.7098, 4294967296, 188.53, None, 0, None, None),
    ("nccl-tests_all_reduce_perf_2node-H100_RoCEv2-16x200G_OCI__ocitutorials.txt",
     "wrong", 5, 458.452, 17179869184, 464.57, 16, 2, None, 0),
    ("nccl-tests_all_reduce_perf_2node_RoCE-100GbE-SRIOV_k8s__deepops.txt",
     "error", 29, 7.76739, 2147483648, 22.92, None, 0, None, None),
    ("nccl-tests_all_reduce_perf_4node-DGX-A100_IB-8xHDR_32gpu__deepops.txt",
     "error", 13, 113.289, 4294967296, 191.05, None, 0, None, None),
]


@pytest.mark.parametrize("name,columns,nsizes,avg,largest,busbw,nranks,nhosts,version,wrong", NCCL_TESTS_ROWS)
def test_parse_nccl_tests(name, columns, nsizes, avg, largest, busbw, nranks, nhosts, version, wrong):
    parsed = parse_nccl_tests(read(name))
    assert parsed["columns"] == columns
    assert len(parsed["results"]) == nsizes
    assert parsed["avg_busbw_gbps"] == pytest.approx(avg)
    last = parsed["results"][-1]
    assert last["bytes"] == largest
    assert last["out_of_place"]["busbw_gbps"] == pytest.approx(busbw)
    assert last["count"] == largest // 4 and last["type"] == "float" and last["redop"] == "sum"
    assert parsed["nranks"] == nranks
    assert len(parsed["hosts"]) == nhosts
    assert parsed["nccl_version"] == version
    assert parsed["wrong_total"] == wrong
    assert parsed["out_of_bounds"] == 0 and parsed["out_of_bounds_ok"] is True
    assert parsed["complete"] is True and parsed["failures"] == []
    for row in parsed["results"]:
        assert row["in_place"] is not None
        if columns == "error":
            assert row["root"] is None and row["out_of_place"]["error"] < 1e-5 and row["out_of_place"]["wrong"] is None
        else:
            assert row["root"] == -1 and row["out_of_place"]["wrong"] == 0


def test_nccl_tests_header_and_devices():
    parsed = parse_nccl_tests(read(
        "nccl-tests_all_reduce_perf_2node-8xH200_NCCL_IB_DISABLE-socket_single-NIC__schmaustech-nvidia-tools-image.txt"))
    assert parsed["params"]["nGpus"] == 8 and parsed["params"]["maxBytes"] == 17179869184
    assert parsed["params"]["warmup_iters"] == 5 and parsed["params"]["iters"] == 20
    assert parsed["params"]["step_kind"] == "factor"
    assert parsed["nccl_cuda"] == "12.9"
    dev = parsed["devices"][9]
    assert dev == {"rank": 9, "group": 0, "pid": 9481, "host": "nvidiatools-dgx-9d-workload", "device": 1,
                   "bus_id": "0000:43:00", "name": "NVIDIA H200"}
    first = parse_nccl_tests(read("nccl-tests_all_reduce_perf_1node-8xA100-SXM4-40GB_NVLink_g8__ocitutorials.txt"))
    assert first["devices"][0]["bus_id"] == "0x0f" and first["devices"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert first["results"][0]["in_place"]["time_us"] == pytest.approx(31.82)


# Synthetic lines in the formats newer builds print (nccl-tests >= 2.17): version and test lines,
# launcher prefixes, a failure line (the formats nccl-tests' own README and source print).
NEW_HEADER = """\
0: # nccl-tests version 2.18.3 nccl-headers=23003 nccl-library=23003
0: # Collective test starting: all_reduce_perf
0: # nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
0: #
0: #  Rank  0 Group  0 Pid  11565 on gpu-a device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
0: #  Rank  1 Group  0 Pid  11566 on gpu-b device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
0:         1024           256     float     sum      -1    20.00    0.05    0.05      0    20.00    0.05    0.05      3
0:         2048           512     float     sum      -1    20.00    0.10    0.10    N/A    20.00    0.10    0.10      0
0: gpu-b: Test NCCL failure common.cu:1234 'remote process exited or there was a network error / '
0: # Out of bounds values : 3 FAILED
0: # Avg bus bandwidth    : 0.075 FAILED
"""


def test_nccl_tests_new_header_prefix_and_failures():
    parsed = parse_nccl_tests(NEW_HEADER)
    assert parsed["nccl_tests_version"] == "2.18.3"
    assert parsed["test"] == "all_reduce_perf"
    assert parsed["params"]["unalign"] == 0
    assert parsed["hosts"] == ["gpu-a", "gpu-b"] and parsed["nranks"] == 2
    assert len(parsed["results"]) == 2
    assert parsed["results"][0]["in_place"]["wrong"] == 3
    assert parsed["results"][1]["out_of_place"]["wrong"] is None
    assert parsed["wrong_total"] is None  # one N/A cell: total unknown
    assert parsed["out_of_bounds_ok"] is False and parsed["avg_busbw_status"] == "FAILED"
    assert len(parsed["failures"]) == 1 and "Test NCCL failure" in parsed["failures"][0]


def test_nccl_tests_empty_output():
    parsed = parse_nccl_tests("")
    assert parsed["results"] == [] and parsed["avg_busbw_gbps"] is None and parsed["complete"] is False


# file, transport, net plugins, link layers, channel transports, warnings, networks
DEBUG_ROWS = [
    ("nccl_debug_INFO_NET-Using-lines_IB-RoCE-bond-Socket-FastSocket__ml-engineering.txt",
     None, ["FastSocket", "IB", "Socket"], ["IB", "RoCE"], [], 0, []),
    ("nccl_debug_INFO_official-doc-excerpts_WARN-INIT-GRAPH-SHM-NET-P2P-TUNING__NVIDIA-nccl-userguide.txt",
     "Socket", [], [], ["P2P", "SHM", "Socket"], 1, ["IB", "IB"]),
    ("nccl_pytorch_unhandled-system-error_+_WARN_socket-connect-refused__ml-engineering.txt",
     None, [], [], [], 1, []),
    ("nccl_warn_error-lines_memlock-and-RoCE-wrong-GID__NVIDIA-nccl-userguide.txt",
     None, [], [], [], 3, []),
]


@pytest.mark.parametrize("name,transport,plugins,layers,channels,nwarn,networks", DEBUG_ROWS)
def test_parse_nccl_debug(name, transport, plugins, layers, channels, nwarn, networks):
    parsed = parse_nccl_debug(read(name))
    assert parsed["transport"] == transport
    assert parsed["net_plugins"] == plugins
    assert rdma_link_layers(parsed) == layers
    assert parsed["channel_transports"] == channels
    assert len(parsed["warnings"]) == nwarn
    assert parsed["networks"] == networks


def test_net_using_lines_detail():
    parsed = parse_nccl_debug(read("nccl_debug_INFO_NET-Using-lines_IB-RoCE-bond-Socket-FastSocket__ml-engineering.txt"))
    ib = parsed["net"][3]
    assert ib["plugin"] == "IB" and ib["relaxed_ordering"] is True and ib["oob"] == "ibp25s0:10.0.12.82"
    assert ib["devices"][8] == {"index": 8, "name": "mlx5_bond_0", "port": 1, "link_layer": "RoCE",
                                "address": None, "features": []}
    sock = parsed["net"][2]
    assert sock["devices"] == [{"index": 0, "name": "eth0", "port": None, "link_layer": None, "address": "10.0.0.23",
                                "features": []}]


def test_official_excerpt_warn_and_channels():
    parsed = parse_nccl_debug(read(
        "nccl_debug_INFO_official-doc-excerpts_WARN-INIT-GRAPH-SHM-NET-P2P-TUNING__NVIDIA-nccl-userguide.txt"))
    warn = parsed["warnings"][0]
    assert warn["host"] == "node-01" and warn["location"] == "plugin/net.cc:334"
    assert warn["text"] == "Failed to initialize any NET plugin"
    sends = [c for c in parsed["channels"] if c["kind"] == "Socket"]
    assert [(c["channel"], c["src"], c["dst"], c["direction"], c["via"]) for c in sends] == [
        (0, 0, 1, "send", "NET/Socket/0"), (1, 0, 1, "send", "NET/Socket/0")]
    assert parsed["gdr"] is None


# Synthetic INFO lines in the formats NCCL 2.18 prints (bootstrap, version, IB with RoCE, GDR, channels).
INFO_RUN = """\
gpu1:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
gpu1:100:100 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
gpu1:100:100 [0] NCCL INFO cudaDriverVersion 12020
NCCL version 2.18.3+cuda12.2
gpu1:100:120 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
gpu1:100:120 [0] NCCL INFO Using network IB
gpu1:100:120 [0] NCCL INFO 32 coll channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
gpu1:100:120 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
gpu1:100:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
gpu1:100:120 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1b000 commId 0x1 - Init COMPLETE
"""


def test_info_run_ib_roce_gdr():
    parsed = parse_nccl_debug(INFO_RUN)
    assert parsed["nccl_version"] == "2.18.3" and parsed["nccl_cuda"] == "12.2"
    assert parsed["bootstrap"] == [{"interface": "eth0", "address": "10.0.0.1"}]
    assert parsed["transport"] == "IB" and rdma_link_layers(parsed) == ["RoCE"]
    assert parsed["gdr"] is True and parsed["coll_channels"] == 32 and parsed["nranks"] == 2


def test_socket_fallback_and_gdr_disabled():
    text = ("h:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "h:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)\n"
            "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
            "h:1:1 [0] NCCL INFO Using network Socket\n")
    parsed = parse_nccl_debug(text)
    assert parsed["no_device"] == ["IB"] and parsed["transport"] == "Socket" and parsed["gdr"] is False


def test_net_transport_precedence():
    assert net_transport({"channels": [], "networks": ["IB"], "net_plugins": ["IB", "Socket"]}) == "IB"
    assert net_transport({"channels": [], "networks": [], "net_plugins": ["Socket"]}) == "Socket"
    assert net_transport({"channels": [{"kind": "P2P", "via": "P2P/CUMEM"}], "networks": [], "net_plugins": []}) is None


def test_a_one_rank_communicator_has_no_network_transport():
    # One H200, torch's NCCL 2.28.9: NCCL says "Using network Socket" early in the log, but one rank sends nothing.
    tail = read("nccl-2.28.9_torch-2.11_H200_one-rank_tail.txt")
    parsed = parse_nccl_debug("h:1:1 [0] NCCL INFO Using network Socket\n" + tail)
    assert parsed["nranks"] == 1 and parsed["networks"] == ["Socket"]
    assert parsed["transport"] is None
    two = parse_nccl_debug("h:1:1 [0] NCCL INFO Using network Socket\n" + tail.replace("nranks 1", "nranks 2"))
    assert two["nranks"] == 2 and two["transport"] == "Socket"


def test_parse_log_line():
    rec = parse_log_line("r11i6n2:486514:486651 [1] include/socket.h:403 NCCL WARN Connect to 10.148.3.247<56821> "
                         "failed : Connection refused")
    assert rec["host"] == "r11i6n2" and rec["pid"] == 486514 and rec["tid"] == 486651 and rec["dev"] == 1
    assert rec["location"] == "include/socket.h:403" and rec["level"] == "WARN"
    assert rec["message"].endswith("Connection refused")
    assert parse_log_line("plain text") is None
    assert parse_log_line("NCCL WARN Call to ibv_reg_mr failed")["host"] is None


def test_pytorch_unhandled_system_error():
    err = parse_pytorch_nccl_error(read(
        "nccl_pytorch_unhandled-system-error_+_WARN_socket-connect-refused__ml-engineering.txt"))
    assert err["found"] is True
    assert err["error"] == "unhandled system error"
    assert err["nccl_result"] == "ncclSystemError"
    assert err["nccl_version"] == "2.7.8"
    assert err["location"].endswith("ProcessGroupNCCL.cpp:825")
    assert [w["text"] for w in err["warnings"]] == ["Connect to 10.148.3.247<56821> failed : Connection refused"]


def test_pytorch_error_absent():
    err = parse_pytorch_nccl_error(read("nccl_warn_error-lines_memlock-and-RoCE-wrong-GID__NVIDIA-nccl-userguide.txt"))
    assert err["found"] is False and len(err["warnings"]) == 3


# algbw, nranks, op, expected busbw: factors of nccl-tests doc/PERFORMANCE.md
BUSBW_ROWS = [
    (100.0, 2, "all_reduce", 100.0),
    (100.0, 8, "all_reduce", 175.0),
    (134.37, 8, "all_reduce_perf", 235.1475),   # 8xA100 fixture, 8 GiB row: printed 235.14
    (247.77, 16, "all_reduce", 464.56875),       # 2-node H100 fixture, 16 GiB row: printed 464.57
    (100.55, 16, "allreduce", 188.53125),        # 2-node DGX A100 fixture: printed 188.53
    (10.0, 1, "all_reduce", 0.0),
    (100.0, 4, "all_gather", 75.0),
    (100.0, 4, "reduce_scatter", 75.0),
    (100.0, 4, "alltoall", 75.0),
    (100.0, 4, "broadcast", 100.0),
    (100.0, 4, "reduce", 100.0),
    (100.0, 4, "sendrecv_perf", 100.0),
]


@pytest.mark.parametrize("algbw,nranks,op,expected", BUSBW_ROWS)
def test_busbw_from_algbw(algbw, nranks, op, expected):
    assert busbw_from_algbw(algbw, nranks, op) == pytest.approx(expected)


@pytest.mark.parametrize("args", [(1.0, 0, "all_reduce"), (1.0, 2, "gather_everything")])
def test_busbw_bad_input(args):
    with pytest.raises(ValueError):
        busbw_from_algbw(*args)


@pytest.mark.parametrize("value,expected", [
    ("2.18.3+cuda12.2", "2.18.3"), ((2, 18, 3), "2.18.3"), ("21803", "2.18.3"), (21803, "2.18.3"),
    ("2708", "2.7.8"), (None, None), ("2.7.8", "2.7.8"),
])
def test_normalize_nccl_version(value, expected):
    assert normalize_nccl_version(value) == expected


# ------------------------------------------------------------------ external net plugins (issue 34)

def _nccl_fixture(name):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "nccl", name)) as handle:
        return handle.read()


def test_net_ib_lines_with_a_plugin_suffix_keep_port_and_link_layer():
    log = parse_nccl_debug(_nccl_fixture("nccl_info_NET-IB-SHARP_IBext_plugin-v6-fallback__nccl-1357.txt"))
    devices = log["net"][0]["devices"]
    assert [(d["name"], d["port"], d["link_layer"], d["features"]) for d in devices] == [
        ("mlx5_0", 1, "IB", ["SHARP"]), ("mlx5_1", 1, "IB", ["SHARP"]), ("mlx5_4", 1, "IB", ["SHARP"]),
        ("mlx5_5", 1, "IB", ["SHARP"])]
    assert log["net"][0]["relaxed_ordering"] and log["net"][0]["oob"] == "ibp25s0:10.20.0.119"
    assert log["transport"] == "IB" and log["networks"] == ["IBext", "IBext"]
    assert log["net_plugin"] == {"loaded": "NCCL RDMA Plugin v6", "version": "v6", "collnet": "SHARP",
                                 "path": "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
                                 "missing_versions": ["v8"], "internal": False}


def test_the_internal_plugin_on_roce_after_a_failed_plugin_load():
    log = parse_nccl_debug(_nccl_fixture("nccl_info_NET-IB-RoCE_internal-plugin_dlerror__nccl-tests-185.txt"))
    assert [(d["name"], d["port"], d["link_layer"]) for d in log["net"][0]["devices"]] == [
        ("mlx5_10", 1, "RoCE"), ("mlx5_11", 1, "RoCE")]
    assert log["net_plugin"]["internal"] is True and log["net_plugin"]["loaded"] is None
    assert log["transport"] == "IB" and log["nccl_version"] == "2.19.3"


@pytest.mark.parametrize("name, kind", [("IB", "IB"), ("IBext", "IB"), ("IBext_v8", "IB"), ("Socket", "Socket"),
                                        ("AWS Libfabric", "OFI"), ("FastSocket", "FastSocket")])
def test_net_kind(name, kind):
    from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import net_kind
    assert net_kind(name) == kind
