"""tcp_probe's mesh mode with real sockets: every 'node' is a loopback address (127.0.0.x) on one port."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster.peermesh import mesh_plan
from ansible_collections.ddp.cluster.plugins.modules import tcp_probe as mod


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_mesh(n, window, skip=(), late=None, port=None, measure_bytes=0):
    """Run the mesh of n loopback nodes at once; ``skip`` never start, ``late`` = (node, seconds)."""
    port = port or free_port()
    hosts = [("node%d" % i, "127.0.0.%d" % (10 + i)) for i in range(n)]
    plan = mesh_plan(hosts, forks=n)
    out = {}

    def node(name, address):
        if late and late[0] == name:
            time.sleep(late[1])
        out[name] = mod.mesh(name, plan["nodes"][name], port, 1.0, window, address, measure_bytes)

    threads = [threading.Thread(target=node, args=h) for h in hosts if h[0] not in skip]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(window + 5)
    return out, time.time() - start, port


@pytest.mark.parametrize("n", [3, 8])
def test_healthy_mesh_ends_at_once(n):
    out, took, _port = run_mesh(n, window=10)
    assert took < 3, "a healthy mesh does not wait for its window (took %.1f s)" % took
    for name, (pairs, seen, missing) in out.items():
        assert [p["verdict"] for p in pairs] == ["open"] * (n - 1)
        assert missing == [] and len(seen) == n - 1 and name not in seen


def test_late_starter_is_retried():
    out, took, _port = run_mesh(3, window=6, late=("node2", 1.0))
    attempts = [p["attempts"] for p in out["node0"][0] if p["dst"] == "node2"]
    assert attempts[0] > 1 and out["node0"][0][-1]["verdict"] == "open"
    assert took < 4


def test_node_that_never_listens_is_refused_within_the_window():
    out, took, _port = run_mesh(4, window=2, skip=("node3",))
    assert 1.5 < took < 5
    for name in ("node0", "node1", "node2"):
        pairs, seen, missing = out[name]
        by_dst = dict((p["dst"], p["verdict"]) for p in pairs)
        assert by_dst.pop("node3") == "refused" and set(by_dst.values()) == {"open"}
        assert missing == ["node3"]


def test_port_in_use_is_an_error(monkeypatch):
    monkeypatch.setattr(mod, "BIND_PATIENCE_S", 0.6)
    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.10", port))
    holder.listen(1)
    try:
        with pytest.raises(OSError):
            mod.mesh("node0", [{"name": "node1", "host": "127.0.0.11"}], port, 1.0, 1.0, "127.0.0.10")
    finally:
        holder.close()


def test_port_held_for_a_moment_is_waited_for(monkeypatch):
    """A port another program holds briefly (an outgoing connection in the ephemeral range) is tried again."""
    monkeypatch.setattr(mod, "BIND_PATIENCE_S", 5.0)
    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.10", port))
    holder.listen(1)
    threading.Timer(1.0, holder.close).start()
    start = time.time()
    pairs, _seen, _missing = mod.mesh("node0", [{"name": "node1", "host": "127.0.0.11"}], port, 0.5, 1.0,
                                      "127.0.0.10")
    assert 0.9 <= time.time() - start < 4.5
    assert [p["dst"] for p in pairs] == ["node1"]


@pytest.mark.parametrize("n", [2, 3])
def test_measured_transfer_around_the_ring(n):
    out, took, _port = run_mesh(n, window=10, measure_bytes=8 << 20)
    assert took < 5, "the measured transfers do not wait for the window (took %.1f s)" % took
    for name, (pairs, seen, missing) in out.items():
        first = pairs[0]
        assert first["throughput_error"] is None and first["throughput_bytes"] == 8 << 20
        assert first["throughput_gbps"] > 0.01, first  # 8 MiB over loopback
        assert "throughput_gbps" not in pairs[-1] or n == 2
        # the measured connection is not taken for a peer's greeting
        assert missing == [] and sorted(seen) == sorted(p["dst"] for p in pairs)


def test_measured_transfer_to_a_node_that_never_listens():
    out, took, _port = run_mesh(3, window=2, skip=("node1",), measure_bytes=1 << 20)
    first = out["node0"][0][0]
    assert first["dst"] == "node1" and first["throughput_gbps"] is None and first["throughput_error"] == "not reached"
    # node2's predecessor (node1) never sends, so node2 waits out its window for it, and no longer
    assert 1.5 < took < 5
