"""Node-to-node checks that scale: the plan of who probes whom, and what the results say.

Pure functions, no I/O. Every node probes every other node (each ordered pair is proven, since
a firewall can block one direction only), but all at once: one call per node, started on every
node together, with every peer probed concurrently inside one window whose length does not
depend on the node count. The per-pair loop this replaces made N x (N - 1) Ansible task items
and outlived its listeners at 12 nodes (issue 17).

Order: node *i* probes its peers starting at *i + 1* (modulo N). At step *k* every node targets
``(i + k) mod N``, a permutation of the nodes, so a node receives about as many connections as
it opens at any moment. This matters for SSH: sshd drops new unauthenticated connections at
random beyond ``MaxStartups`` (default ``10:30:100``, sshd_config(5)), which N - 1 peers logging
in at once would exceed from 12 nodes on.

Attribution (:func:`mesh_problems`) tells one bad node from a network-wide block: with three
nodes or more, a node that no peer can reach (or that reaches no peer) is named once instead of
as N - 1 failed pairs; when nearly every node looks that way, the port is blocked everywhere (a
cluster-wide firewall rule or security group), which is one problem, not N.
"""
from __future__ import annotations

import math

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

#: Greeting a mesh connector sends so that the listener can name who connected (by inventory name,
#: since a node's source address may not be the address the inventory gives for it).
GREETING = "ddp-probe "

#: Header of the measured transfer (``tcp_probe`` ``measure_mib``): ``ddp-bulk <name> <bytes>\n``, then the bytes;
#: the listener answers :data:`BULK_ACK` once it has read them all.
BULK = "ddp-bulk "
BULK_ACK = b"ok\n"

#: Problem codes per check: not run, node unreachable, node cannot reach, everywhere, one pair
#: (documented in docs/troubleshooting.md).
CODES = {
    "port": ("CLUSTER_PROBE_NOT_RUN", "CLUSTER_NODE_PORT_BLOCKED", "CLUSTER_NODE_EGRESS_BLOCKED",
             "CLUSTER_PORT_BLOCKED_EVERYWHERE", "CLUSTER_PORT_BLOCKED"),
    "ssh": ("SSH_CHECK_NOT_RUN", "SSH_NODE_UNREACHABLE", "SSH_NODE_CANNOT_REACH",
            "SSH_BLOCKED_EVERYWHERE", "SSH_PAIR_FAILED"),
}

#: Seconds the mesh window lasts beyond the start-up spread of the probes. A healthy mesh ends as
#: soon as every pair is proven (milliseconds); the window only bounds how long a failing one waits.
DEFAULT_WINDOW_S = 20.0

#: Seconds Ansible needs to start one batch of ``forks`` asynchronous tasks (measured here: 0.5-1.5 s
#: over podman exec or SSH with pipelining on 2 cores); used to widen the window when the nodes
#: outnumber the forks and so start in several batches.
DEFAULT_LAUNCH_S = 2.0


def rotated_peers(nodes, me):
    """The peers of ``me`` in probe order: the nodes after ``me`` in ``nodes``, wrapping around.

    :param nodes: every node name, in one order shared by all nodes (e.g. the play's host list).
    :param me: this node's name; must be in ``nodes``.
    :returns: ``nodes`` without ``me``, starting after it.
    :raises ValueError: when ``me`` is not one of ``nodes`` or names repeat.
    """
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError("node names repeat: %s" % ", ".join(sorted(n for n in set(nodes) if nodes.count(n) > 1)))
    if me not in nodes:
        raise ValueError("%s is not one of the nodes (%s)" % (me, ", ".join(nodes)))
    i = nodes.index(me)
    return nodes[i + 1:] + nodes[:i]


def mesh_window(node_count, forks, base_s=DEFAULT_WINDOW_S, launch_s=DEFAULT_LAUNCH_S):
    """Seconds one node's probe may last: ``base_s`` plus the spread of start times.

    With ``forks`` smaller than the node count Ansible starts the probes in
    ``ceil(node_count / forks)`` batches; the last batch starts ``launch_s`` seconds per batch later,
    and the first nodes must still be listening then. With enough forks the window is ``base_s`` +
    ``launch_s`` whatever the node count.

    :raises ValueError: on a node count below 1, forks below 1 or negative seconds.
    """
    if node_count < 1 or forks < 1:
        raise ValueError("node_count and forks must be at least 1 (got %s, %s)" % (node_count, forks))
    if base_s < 0 or launch_s < 0:
        raise ValueError("seconds must not be negative (got %s, %s)" % (base_s, launch_s))
    return float(base_s) + launch_s * math.ceil(float(node_count) / forks)


def distinct_addresses(hosts):
    """Refuse ``[(name, address)]`` where two names share an address (two inventory names for one machine make
    every check between them look fine while proving nothing).

    :raises ValueError: naming the repeated addresses.
    """
    addresses = [host[1] for host in hosts]
    if len(set(addresses)) != len(addresses):
        raise ValueError("addresses repeat: %s" % ", ".join(sorted(a for a in set(addresses) if addresses.count(a) > 1)))


def mesh_plan(hosts, forks, base_s=DEFAULT_WINDOW_S, launch_s=DEFAULT_LAUNCH_S):
    """What each node probes, and for how long.

    :param hosts: ordered ``[(name, address)]`` of every node in the check.
    :param forks: Ansible's forks (how many nodes start a task at once).
    :returns: ``{"window_s": float, "nodes": {name: [{"name": peer, "host": address}, ...]}}``,
        each node's peers in :func:`rotated_peers` order.
    :raises ValueError: on repeated names or addresses (two inventory names for one machine make
        every pair between them look fine while proving nothing).
    """
    names = [host[0] for host in hosts]
    distinct_addresses(hosts)
    address_of = dict(hosts)
    plan = {}
    for name in names:
        plan[name] = [{"name": peer, "host": address_of[peer]} for peer in rotated_peers(names, name)]
    return {"window_s": mesh_window(len(names), forks, base_s, launch_s), "nodes": plan}


def _pair_subject(src, dst, port):
    return "%s -> %s:%s" % (src, dst, port)


def _verdict_counts(pairs):
    counts = {}
    for p in pairs:
        counts[p["verdict"]] = counts.get(p["verdict"], 0) + 1
    return ", ".join("%d %s" % (n, v) for v, n in sorted(counts.items()))


def mesh_problems(nodes, pairs, not_run=None, port=None, what="port", fix=None):
    """Problems from every node's mesh probe, attributed to a node, the network, or a pair.

    :param nodes: every node in the check.
    :param pairs: ``[{src, dst, verdict, message}]`` from each node that ran its probe; ``verdict``
        ``open`` (TCP) or ``ok`` (SSH) means the pair is proven.
    :param not_run: ``{node: message}`` for nodes whose probe did not run or did not report (their
        pairs, in either direction, are not judged: the node itself is the problem).
    :param port: the port, for the subjects (omit for SSH).
    :param what: ``"port"`` (codes ``CLUSTER_*PORT*``) or ``"ssh"`` (codes ``SSH_*``).
    :param fix: the fix text for pair and node problems.
    :returns: problems in the ``diagnosis`` shape:

        * ``CLUSTER_PROBE_NOT_RUN`` / ``SSH_CHECK_NOT_RUN`` per node in ``not_run``;
        * with 3 nodes or more that ran: ``CLUSTER_NODE_PORT_BLOCKED`` / ``SSH_NODE_UNREACHABLE`` for a
          node that no peer reached, ``CLUSTER_NODE_EGRESS_BLOCKED`` / ``SSH_NODE_CANNOT_REACH`` for a
          node that reached no peer, unless that holds for all
          nodes but at most one, or the pairs these nodes do not explain are half of all pairs or
          more: then one ``CLUSTER_PORT_BLOCKED_EVERYWHERE`` / ``SSH_BLOCKED_EVERYWHERE``;
        * one ``CLUSTER_PORT_BLOCKED`` / ``SSH_PAIR_FAILED`` for every other failed pair.
    """
    not_run = dict(not_run or {})
    codes = CODES[what]
    fix = fix or ("allow the cluster's addresses on the rendezvous port and the ephemeral range "
                  "(ddp.cluster.firewall); opening the rendezvous port alone is not enough")
    suffix = ":%s" % port if port is not None else ""
    problems = []
    for node in sorted(not_run):
        problems.append(problem(codes[0], "error", node,
                                "the %s check did not run on %s: %s" % (what, node, not_run[node]),
                                "fix what the message names on %s (often a leftover process on the port, or the "
                                "node stopped answering Ansible), then re-run" % node))
    ran = [n for n in nodes if n not in not_run]
    judged = [p for p in pairs if p["src"] in ran and p["dst"] in ran]
    failed = [p for p in judged if p["verdict"] not in ("open", "ok")]
    if not failed:
        return problems
    peers = len(ran) - 1
    inbound = dict((n, [p for p in failed if p["dst"] == n]) for n in ran)
    outbound = dict((n, [p for p in failed if p["src"] == n]) for n in ran)
    if len(ran) >= 3:
        cut_in = [n for n in ran if len(inbound[n]) == peers]
        cut_out = [n for n in ran if len(outbound[n]) == peers]
        blamed = set(cut_in) | set(cut_out)
        unexplained = [p for p in failed if p["src"] not in cut_out and p["dst"] not in cut_in]
        if len(blamed) >= len(ran) - 1 or 2 * len(unexplained) >= len(judged):
            return problems + [problem(
                codes[3], "error", "%s%s on %d nodes" % (what, suffix, len(ran)),
                "%d of %d node pairs failed (%s): the block is on every node or in the network between them, "
                "not on one node" % (len(failed), len(judged), _verdict_counts(failed)),
                fix + "; look for a rule that applies to every node (a zone, a security group, a switch ACL)")]
        explained = set()
        for node in cut_in:
            problems.append(problem(
                codes[1], "error", "%s%s" % (node, suffix),
                "no peer reached %s%s (%s) while the other nodes reach each other" % (node, suffix, _verdict_counts(inbound[node])),
                fix + " on %s" % node))
            explained.update((p["src"], p["dst"]) for p in inbound[node])
        for node in cut_out:
            problems.append(problem(
                codes[2], "error", node,
                "%s reached no peer%s (%s) while the other nodes reach each other: its own outgoing "
                "path or resolver is at fault" % (node, suffix, _verdict_counts(outbound[node])),
                "check %s's outgoing firewall rules, routes and name resolution" % node))
            explained.update((p["src"], p["dst"]) for p in outbound[node])
        failed = [p for p in failed if (p["src"], p["dst"]) not in explained]
    for p in sorted(failed, key=lambda x: (x["src"], x["dst"])):
        problems.append(problem(codes[4], "error", _pair_subject(p["src"], p["dst"], port) if port is not None
                                else "%s -> %s" % (p["src"], p["dst"]),
                                "%s cannot reach %s%s: [%s] %s" % (p["src"], p["dst"], suffix, p["verdict"], p.get("message", "")),
                                fix))
    return problems
