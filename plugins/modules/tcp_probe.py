#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: tcp_probe
short_description: Listen on, or connect to, a TCP port and classify what stops a connection
version_added: 0.1.0
description:
  - C(mode=connect) opens one TCP connection to O(host):O(port) and classifies the outcome as
    C(open), C(refused) (nothing listens), C(firewall_reject) (ICMP reject, read by Linux as
    "No route to host", firewalld's default), C(timeout) (DROP or no route), C(unreachable),
    C(unresolved) or C(error).
  - A port already in use is tried again for 5 seconds before the module fails; the failure message
    then names what holds the port, as C(ss -tanp) shows it.
  - C(mode=listen) binds O(port) on O(bind_address), accepts up to O(count) connections, and
    returns when it has them or after O(timeout) seconds. Run it with C(async) on the rendezvous
    host while the other nodes connect.
  - C(mode=mesh) is the node-to-node check of a whole cluster in one call per node. It listens on
    O(port) and, at the same time, connects to O(port) on every one of O(peers) concurrently, then
    returns when every peer is reached and has reached it, or after O(window) seconds. Run it with
    C(async) and C(poll=0) on every node together, then collect it with
    C(ansible.builtin.async_status). Its length does not grow with the node count; a connection that
    is refused is retried until the window ends (the peer's listener may start later), a firewall
    reject, an unreachable network or an unresolved name is final at once. Peers are probed in a
    rotated order (node I(i) starts with node I(i+1)) so that no node receives every connection at
    once. The C(ddp.cluster.cluster_problems) filter turns every node's result into problems that
    name one bad node, a network-wide block, or single pairs.
  - Changes nothing on the host; C(changed) is always false.
options:
  mode:
    description: Connect to a port, listen on one, or check every peer both ways (mesh).
    type: str
    choices: [connect, listen, mesh]
    default: connect
  host:
    description: Name or address to connect to. Required with O(mode=connect).
    type: str
  port:
    description: TCP port (1-65535).
    type: int
    required: true
  timeout:
    description:
      - Seconds to wait for the connection (connect, and each connection attempt of mesh) or for
        all O(count) peers (listen).
    type: float
    default: 5
  name:
    description:
      - With O(mode=mesh), this node's name as the peers know it (the inventory name). Sent to each
        peer on connect so that the peer's listener can name who reached it.
    type: str
  peers:
    description:
      - With O(mode=mesh), every other node, in the order to probe them
        (C(ddp.cluster.mesh_plan) gives the rotated order).
    type: list
    elements: dict
    suboptions:
      name:
        description: The peer's inventory name.
        type: str
        required: true
      host:
        description: The peer's address or resolvable name.
        type: str
        required: true
  window:
    description:
      - With O(mode=mesh), seconds the whole check may last on this node (listening and every
        attempt). C(ddp.cluster.mesh_plan) derives it from the node count and forks.
    type: float
    default: 20
  measure_mib:
    description:
      - With O(mode=mesh), after reaching its first peer (the next node of the ring that
        C(ddp.cluster.mesh_plan) orders), send it this many MiB over a second connection and time it
        until that peer has read them all, giving C(throughput_gbps) in the first entry of RV(pairs).
        The listener then also waits for the one transfer its predecessor in the ring sends. 0 measures
        nothing.
      - Plain TCP between the nodes, measured in the same run as the collective, is what the health
        stage's Gloo floor is bounded by (C(ddp.cluster.busbw_floor)).
    type: int
    default: 0
  count:
    description: With O(mode=listen), return after this many connections.
    type: int
    default: 1
  bind_address:
    description: With O(mode=listen), the address to bind.
    type: str
    default: 0.0.0.0
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health.read_only
"""

EXAMPLES = r"""
- name: Listen on the rendezvous port of the head node
  ddp.cluster.tcp_probe:
    mode: listen
    port: 29400
    count: 3
    timeout: 30
  async: 40
  poll: 0
  register: listener

- name: Connect to the head node's rendezvous port
  ddp.cluster.tcp_probe:
    host: node0
    port: 29400
  register: probe

- name: Every node listens and connects to every other node, all at once
  ddp.cluster.tcp_probe:
    mode: mesh
    port: 40000
    name: "{{ inventory_hostname }}"
    peers: "{{ (ansible_play_hosts | ddp.cluster.mesh_plan(hostvars)).nodes[inventory_hostname] }}"
    window: 22
  async: 40
  poll: 0
  register: mesh
"""

RETURN = r"""
verdict:
  description: With O(mode=connect), the outcome.
  returned: mode is connect
  type: str
  sample: firewall_reject
message:
  description: What the verdict means, in words.
  returned: always
  type: str
  sample: rejected ("No route to host" is how a firewalld reject reads)
address:
  description: With O(mode=connect), the IPv4/IPv6 address the name resolved to.
  returned: mode is connect and the name resolved
  type: str
  sample: 10.89.0.2
elapsed_s:
  description: Seconds the probe took.
  returned: always
  type: float
  sample: 0.004
peers:
  description:
    - With O(mode=listen), addresses of the peers that connected.
    - With O(mode=mesh), names of the peers that connected to this node (their greeting), or the
      address of a connection that sent none.
  returned: mode is listen or mesh
  type: list
  elements: str
  sample: ["10.89.0.3", "10.89.0.4"]
pairs:
  description:
    - With O(mode=mesh), one entry per peer this node connected to, in probe order.
    - C(verdict) as in O(mode=connect); C(attempts) counts connection attempts; C(elapsed_s) is the
      time from the start to the last attempt, in seconds.
    - With O(measure_mib), the first entry also has C(throughput_gbps) (GB/s, 1e9 bytes per second, from the
      first byte sent to the peer's acknowledgement that it read them all; null when the transfer failed),
      C(throughput_bytes) and C(throughput_error) (why it failed, or null).
  returned: mode is mesh
  type: list
  elements: dict
  sample: [{"src": "node0", "dst": "node1", "host": "10.89.0.3", "verdict": "open", "message": "connected",
            "attempts": 1, "elapsed_s": 0.003}]
missing:
  description: With O(mode=mesh), the peers that did not connect to this node within the window.
  returned: mode is mesh
  type: list
  elements: str
  sample: []
"""

import errno
import socket
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.netprobe import classify_connect
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.peermesh import BULK, BULK_ACK, GREETING

# Verdicts worth another attempt inside the mesh window: the peer's listener may not be up yet
# (refused); everything else (a firewall reject, no route, no name) is final.
_RETRY = ("refused",)
# Seconds a port in use is tried again before the probe gives up on listening (see bound_server).
BIND_PATIENCE_S = 5.0


def connect_once(host, port, timeout, greeting=None):
    """I/O edge: one TCP connect (sending ``greeting`` when connected).

    Returns (address, errno, timed_out, resolve_failed).
    """
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
    except socket.gaierror:
        return None, None, False, True
    family, socktype, proto, _canon, sockaddr = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.settimeout(timeout)
    try:
        sock.connect(sockaddr)
        if greeting:
            try:
                sock.sendall(greeting.encode("utf-8"))
            except OSError:
                pass
        return sockaddr[0], None, False, False
    except socket.timeout:
        return sockaddr[0], None, True, False
    except OSError as exc:
        return sockaddr[0], exc.errno, False, False
    finally:
        sock.close()


def bound_server(bind_address, port, backlog, patience=None):
    """I/O edge: a listening TCP socket on ``bind_address:port``.

    A port in use is tried again every 0.5 s for up to ``patience`` seconds: the probe port lies in the
    ephemeral range, where a short-lived outgoing connection of another program can hold it for a moment.
    :raises OSError: when the port is still taken after that, or cannot be bound for another reason.
    """
    deadline = time.time() + (BIND_PATIENCE_S if patience is None else patience)
    while True:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((bind_address, port))
            server.listen(backlog)
            return server
        except OSError as exc:
            server.close()
            if exc.errno != errno.EADDRINUSE or time.time() >= deadline:
                raise
        time.sleep(0.5)


def listen(bind_address, port, count, timeout):
    """I/O edge: accept up to ``count`` connections within ``timeout`` seconds."""
    server = bound_server(bind_address, port, max(count, 1))
    deadline = time.time() + timeout
    peers = []
    try:
        while len(peers) < count:
            remaining = deadline - time.time()
            if remaining <= 0:
                break
            server.settimeout(remaining)
            try:
                conn, addr = server.accept()
            except socket.timeout:
                break
            peers.append(addr[0])
            conn.close()
    finally:
        server.close()
    return peers


CHUNK = 1 << 20


def _drain(conn, nbytes, deadline):
    """I/O edge: read ``nbytes`` from a measured transfer and acknowledge them."""
    try:
        left = nbytes
        while left > 0:
            conn.settimeout(max(0.1, deadline - time.time()))
            chunk = conn.recv(min(CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
        conn.sendall(BULK_ACK)
    except OSError:
        pass
    finally:
        conn.close()


def _accept_peers(server, expected, deadline, seen, lock, bulk_expected=0, drains=None):
    """I/O edge: accept connections until every expected peer has greeted (and ``bulk_expected`` measured
    transfers have arrived) or the deadline passes."""
    drains = [] if drains is None else drains
    while True:
        with lock:
            if expected <= set(seen) and len(drains) >= bulk_expected:
                return
        remaining = deadline - time.time()
        if remaining <= 0:
            return
        server.settimeout(remaining)
        try:
            conn, addr = server.accept()
        except socket.timeout:
            return
        try:
            conn.settimeout(min(2.0, max(remaining, 0.1)))
            data = b""
            while b"\n" not in data and len(data) < 256:
                chunk = conn.recv(1)
                if not chunk:
                    break
                data += chunk
        except OSError:
            data = b""
        text = data.decode("utf-8", "replace").strip()
        if text.startswith(BULK):
            fields = text[len(BULK):].split()
            if len(fields) == 2 and fields[1].isdigit():
                drain = threading.Thread(target=_drain, args=(conn, int(fields[1]), deadline))
                drain.daemon = True
                drain.start()
                with lock:
                    drains.append(drain)
                continue
        conn.close()
        with lock:
            seen.append(text[len(GREETING):] if text.startswith(GREETING) else addr[0])


def _probe_peer(me, peer, port, attempt_timeout, deadline, out, index, measure_bytes=0):
    """I/O edge: connect to one peer until it answers, a final verdict comes, or the deadline passes; then, with
    ``measure_bytes``, time a transfer of that many bytes to it (at once, not after the other peers)."""
    start = time.time()
    attempts = 0
    while True:
        remaining = deadline - time.time()
        attempts += 1
        address, err_no, timed_out, resolve_failed = connect_once(
            peer["host"], port, max(0.2, min(attempt_timeout, remaining)), greeting=GREETING + me + "\n")
        verdict = classify_connect(err_no, timed_out=timed_out, resolve_failed=resolve_failed)
        if verdict["verdict"] not in _RETRY or deadline - time.time() < 0.3:
            break
        time.sleep(0.2)
    entry = dict(src=me, dst=peer["name"], host=peer["host"], address=address, attempts=attempts,
                 elapsed_s=round(time.time() - start, 3), **verdict)
    if measure_bytes:
        if verdict["verdict"] == "open":
            gbps, error = measure(me, peer["host"], port, measure_bytes, deadline)
        else:
            gbps, error = None, "not reached"
        entry.update(throughput_gbps=gbps, throughput_bytes=measure_bytes, throughput_error=error)
    out[index] = entry


def measure(me, host, port, nbytes, deadline):
    """I/O edge: send ``nbytes`` to the listener on ``host:port`` and time it until the listener acknowledges them.

    :returns: ``(GB/s or None, error text or None)``.
    """
    try:
        sock = socket.create_connection((host, port), timeout=max(0.2, deadline - time.time()))
    except OSError as exc:
        return None, "connect: %s" % exc
    try:
        sock.sendall(("%s%s %d\n" % (BULK, me, nbytes)).encode("utf-8"))
        block = b"\0" * CHUNK
        start = time.time()
        left = nbytes
        while left > 0:
            sock.settimeout(max(0.1, deadline - time.time()))
            sock.sendall(block[:min(CHUNK, left)])
            left -= min(CHUNK, left)
        ack = b""
        while len(ack) < len(BULK_ACK):
            sock.settimeout(max(0.1, deadline - time.time()))
            chunk = sock.recv(len(BULK_ACK) - len(ack))
            if not chunk:
                return None, "the peer closed the connection before acknowledging"
            ack += chunk
        elapsed = time.time() - start
        return round(nbytes / max(elapsed, 1e-6) / 1e9, 6), None
    except socket.timeout:
        return None, "timed out"
    except OSError as exc:
        return None, str(exc)
    finally:
        sock.close()


def mesh(me, peers, port, attempt_timeout, window, bind_address, measure_bytes=0):
    """I/O edge: listen on ``port`` and connect to every peer at once, within ``window`` seconds.

    With ``measure_bytes``, also send that many bytes to the first peer once it is reached, and wait for the one
    measured transfer that reaches this node (from the node whose first peer this one is).

    :returns: ``(pairs, peers_seen, missing)``.
    :raises OSError: when the port cannot be bound.
    """
    deadline = time.time() + window
    server = bound_server(bind_address, port, max(128, len(peers)))
    seen, lock, drains = [], threading.Lock(), []
    expected = set(p["name"] for p in peers)
    listener = threading.Thread(target=_accept_peers, args=(server, expected, deadline, seen, lock,
                                                            1 if measure_bytes and peers else 0, drains))
    listener.daemon = True
    listener.start()
    pairs = [None] * len(peers)
    workers = [threading.Thread(target=_probe_peer, args=(me, peer, port, attempt_timeout, deadline, pairs, i,
                                                          measure_bytes if i == 0 else 0))
               for i, peer in enumerate(peers)]
    for worker in workers:
        worker.daemon = True
        worker.start()
    for worker in workers:
        worker.join(max(0.0, deadline - time.time()) + attempt_timeout + 1)
    listener.join(max(0.0, deadline - time.time()) + 1)
    with lock:
        pending = list(drains)
    for drain in pending:
        drain.join(max(0.0, deadline - time.time()) + 1)
    server.close()
    for i, peer in enumerate(peers):
        if pairs[i] is None:
            pairs[i] = dict(src=me, dst=peer["name"], host=peer["host"], address=None, attempts=0, elapsed_s=window,
                            **classify_connect(None, timed_out=True))
            if i == 0 and measure_bytes:
                pairs[i].update(throughput_gbps=None, throughput_bytes=measure_bytes, throughput_error="not reached")
    with lock:
        got = sorted(set(seen))
    return pairs, got, sorted(expected - set(got))


def port_holders(module, port):
    """I/O edge: the sockets on local port ``port`` as ``ss -Htanp`` prints them (iproute2), or ''."""
    ss = module.get_bin_path("ss")
    if not ss:
        return ""
    rc, out, _err = module.run_command([ss, "-Htanp", "sport = :%d" % port])
    return " | ".join(line.strip() for line in out.splitlines() if line.strip()) if rc == 0 else ""


def fail_listen(module, exc):
    """The one message for a port this node cannot listen on, with what holds it where ss can tell."""
    holders = port_holders(module, module.params["port"]) if getattr(exc, "errno", None) == errno.EADDRINUSE else ""
    module.fail_json(msg="cannot listen on %s:%d: %s (is something, such as a leftover torchrun, "
                         "already using the port?)%s"
                         % (module.params["bind_address"], module.params["port"], exc,
                            " Held by: " + holders if holders else ""))


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["connect", "listen", "mesh"], default="connect"),
            host=dict(type="str"),
            port=dict(type="int", required=True),
            timeout=dict(type="float", default=5),
            count=dict(type="int", default=1),
            bind_address=dict(type="str", default="0.0.0.0"),
            name=dict(type="str"),
            peers=dict(type="list", elements="dict", options=dict(
                name=dict(type="str", required=True),
                host=dict(type="str", required=True))),
            window=dict(type="float", default=20),
            measure_mib=dict(type="int", default=0),
        ),
        required_if=[("mode", "connect", ["host"]), ("mode", "mesh", ["name", "peers"])],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    if not 1 <= params["port"] <= 65535:
        module.fail_json(msg="port must be 1-65535, got %d" % params["port"])
    if params["timeout"] <= 0 or params["window"] <= 0:
        module.fail_json(msg="timeout and window must be positive seconds, got %s and %s"
                             % (params["timeout"], params["window"]))
    if not 0 <= params["measure_mib"] <= 4096:
        module.fail_json(msg="measure_mib must be 0-4096 MiB, got %d" % params["measure_mib"])
    start = time.time()
    if params["mode"] == "mesh":
        try:
            pairs, seen, missing = mesh(params["name"], params["peers"], params["port"], params["timeout"],
                                        params["window"], params["bind_address"], params["measure_mib"] << 20)
        except OSError as exc:
            fail_listen(module, exc)
        reached = sum(1 for p in pairs if p["verdict"] == "open")
        module.exit_json(changed=False, pairs=pairs, peers=seen, missing=missing,
                         elapsed_s=round(time.time() - start, 3),
                         message="reached %d of %d peer(s); %d of %d reached this node"
                                 % (reached, len(pairs), len(params["peers"]) - len(missing), len(params["peers"])))
    if params["mode"] == "listen":
        try:
            peers = listen(params["bind_address"], params["port"], params["count"], params["timeout"])
        except OSError as exc:
            fail_listen(module, exc)
        module.exit_json(changed=False, peers=peers, elapsed_s=round(time.time() - start, 3),
                         message="%d of %d peer(s) connected" % (len(peers), params["count"]))
    address, err_no, timed_out, resolve_failed = connect_once(params["host"], params["port"], params["timeout"])
    result = classify_connect(err_no, timed_out=timed_out, resolve_failed=resolve_failed)
    module.exit_json(changed=False, address=address, elapsed_s=round(time.time() - start, 3), **result)


if __name__ == "__main__":
    main()
