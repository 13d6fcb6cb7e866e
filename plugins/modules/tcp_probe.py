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
  - C(mode=listen) binds O(port) on O(bind_address), accepts up to O(count) connections, and
    returns when it has them or after O(timeout) seconds. Run it with C(async) on the rendezvous
    host while the other nodes connect.
  - Changes nothing on the host; C(changed) is always false.
options:
  mode:
    description: Connect to a port, or listen on one.
    type: str
    choices: [connect, listen]
    default: connect
  host:
    description: Name or address to connect to. Required with O(mode=connect).
    type: str
  port:
    description: TCP port (1-65535).
    type: int
    required: true
  timeout:
    description: Seconds to wait for the connection (connect) or for all O(count) peers (listen).
    type: float
    default: 5
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
  description: With O(mode=listen), addresses of the peers that connected.
  returned: mode is listen
  type: list
  elements: str
  sample: ["10.89.0.3", "10.89.0.4"]
"""

import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.netprobe import classify_connect


def connect_once(host, port, timeout):
    """I/O edge: one TCP connect. Returns (address, errno, timed_out, resolve_failed)."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
    except socket.gaierror:
        return None, None, False, True
    family, socktype, proto, _canon, sockaddr = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.settimeout(timeout)
    try:
        sock.connect(sockaddr)
        return sockaddr[0], None, False, False
    except socket.timeout:
        return sockaddr[0], None, True, False
    except OSError as exc:
        return sockaddr[0], exc.errno, False, False
    finally:
        sock.close()


def listen(bind_address, port, count, timeout):
    """I/O edge: accept up to ``count`` connections within ``timeout`` seconds."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((bind_address, port))
    server.listen(max(count, 1))
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


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["connect", "listen"], default="connect"),
            host=dict(type="str"),
            port=dict(type="int", required=True),
            timeout=dict(type="float", default=5),
            count=dict(type="int", default=1),
            bind_address=dict(type="str", default="0.0.0.0"),
        ),
        required_if=[("mode", "connect", ["host"])],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    if not 1 <= params["port"] <= 65535:
        module.fail_json(msg="port must be 1-65535, got %d" % params["port"])
    start = time.time()
    if params["mode"] == "listen":
        try:
            peers = listen(params["bind_address"], params["port"], params["count"], params["timeout"])
        except OSError as exc:
            module.fail_json(msg="cannot listen on %s:%d: %s (is something, such as a leftover torchrun, "
                                 "already using the port?)" % (params["bind_address"], params["port"], exc))
        module.exit_json(changed=False, peers=peers, elapsed_s=round(time.time() - start, 3),
                         message="%d of %d peer(s) connected" % (len(peers), params["count"]))
    address, err_no, timed_out, resolve_failed = connect_once(params["host"], params["port"], params["timeout"])
    result = classify_connect(err_no, timed_out=timed_out, resolve_failed=resolve_failed)
    module.exit_json(changed=False, address=address, elapsed_s=round(time.time() - start, 3), **result)


if __name__ == "__main__":
    main()
