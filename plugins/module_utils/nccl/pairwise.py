# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find the bad node: all-reduce between pairs of nodes, and the verdict from the pairs (pure, no I/O).

When the all-node all-reduce of the health stage fails or falls below its floor, it says that something is wrong,
not where. The fleet tools that accept large clusters answer "where" with collectives between subsets (AWS's and
Imbue's pairwise NCCL / ``ib_write_bw`` runs, NVSentinel's preflight): a node whose every pair is slow or fails is
the bad node; one slow pair whose two nodes are fine with others is a bad link between them.

The pairs are the edges of a ring over the nodes in inventory order, ``n0-n1, n1-n2, ..., n(N-1)-n0``: every node is
tested with two different partners (the fewest that can tell a node from a link), with N pairs in all (a complete
pairing would be N(N-1)/2). The edges run in rounds of disjoint pairs, so that no node is in two runs at once and a
pair's figure is its own: 2 rounds for an even N, 3 for an odd N (a ring of odd length needs three colours), one
for N = 2. Within a round every pair runs at once, each with its own rendezvous hosted by its first node, so one
port serves every pair.

Two neighbours on the ring whose every pair is bad share a pair, so the ring alone cannot tell two bad nodes from one
bad node plus one slow pair (on a busy machine, a pair that just ran slow). Such nodes run once more, each with a
node known to be good (:func:`confirm_plan`), and the verdict is taken over all pairs.

Verdict (:func:`pair_findings`): a pair is *bad* when its run failed (no rendezvous, a timeout, an error) or its
busbw is below the floor, or below ``min_ratio`` x the best pair's busbw (default 0.5, ours: on a fabric of one
kind, with nodes of their own, pairs run within tens of per cent of each other, while a throttled, mis-negotiated or
misconfigured port is several times slower). Nodes that share a machine are noisier: on the local cluster (2 cores)
healthy pairs differed by up to 4x with three pairs at once, so its tests use 0.25 and the confirming round below.
The best pair, not the median, is the reference: with N = 3 a bad node is in two of the three pairs.

* ``PAIRWISE_NODE`` (error): every pair of a node is bad while some pair elsewhere is good: that node is named.
* ``PAIRWISE_LINK`` (error): a bad pair whose two nodes both have a good pair: the link between them.
* ``PAIRWISE_ALL`` (error): every pair is bad: the fault is common to all nodes (switch, MTU, firewall policy,
  a shared configuration), no node is named.
* ``PAIRWISE_UNDECIDED`` (error): two nodes only and their pair is bad: the collectives alone cannot tell which.
"""
from __future__ import annotations

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import fraction, problem
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.peermesh import distinct_addresses

DEFAULT_MIN_RATIO = 0.5


def ring_rounds(nodes):
    """The ring's edges in rounds of disjoint pairs.

    :param nodes: node names in a fixed order (the inventory's); no repeats.
    :returns: a list of rounds, each a list of ``(first, second)`` pairs; ``first`` hosts the pair's rendezvous.
        ``[]`` for fewer than two nodes, one round of one pair for two.
    :raises ValueError: on repeated names.
    """
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError("node names repeat: %s" % ", ".join(sorted(n for n in set(nodes) if nodes.count(n) > 1)))
    count = len(nodes)
    if count < 2:
        return []
    if count == 2:
        return [[(nodes[0], nodes[1])]]
    edges = [(nodes[i], nodes[(i + 1) % count]) for i in range(count)]
    if count % 2 == 0:
        return [edges[0::2], edges[1::2]]
    # Odd ring: edges 0, 2, ... and 1, 3, ... leave the closing edge (last, first), which meets both rounds.
    return [edges[0:count - 1:2], edges[1:count - 1:2], [edges[-1]]]


def _check_hosts(hosts, port):
    hosts = [(str(name), str(address)) for name, address in hosts]
    distinct_addresses(hosts)
    port = int(port)
    if not 1 <= port <= 65535:
        raise ValueError("port must be in 1-65535, got %d" % port)
    return hosts, port


def _plan(edge_rounds, hosts, port, run_id):
    address_of = dict(hosts)
    rounds = []
    for number, edges in enumerate(edge_rounds):
        rounds.append([{"id": "%s-r%d-p%d" % (run_id, number, index), "nodes": [first, second],
                        "endpoint": "%s:%d" % (address_of[first], port)}
                       for index, (first, second) in enumerate(edges)])
    by_node = {}
    for name, _address in hosts:
        by_node[name] = [next((pair for pair in pairs if name in pair["nodes"]), None) for pairs in rounds]
    return {"rounds": rounds, "by_node": by_node}


def pair_plan(hosts, port, run_id):
    """Who runs with whom, round by round.

    :param hosts: ordered ``[(name, address)]`` of the nodes to test; the address is where the pair's partner reaches
        this node's rendezvous.
    :param port: TCP port of every pair's rendezvous (each node hosts at most one pair per round).
    :param run_id: prefix of the rendezvous ids; a pair's id is ``<run_id>-r<round>-p<index>``.
    :returns: ``{"rounds": [[{"id", "nodes": [first, second], "endpoint": "address:port"}]],
        "by_node": {name: [pair or None, one per round]}}``.
    :raises ValueError: repeated names or addresses, or a port outside 1-65535.
    """
    hosts, port = _check_hosts(hosts, port)
    return _plan(ring_rounds([name for name, _address in hosts]), hosts, port, run_id)


def confirm_plan(hosts, found, port, run_id):
    """Extra pairs for the nodes the ring cannot tell apart, each with a node known to be good.

    Two neighbours on the ring whose every pair is bad share one pair; the ring alone cannot tell whether both are at
    fault or one of them plus the link to its other partner (a single slow pair on a busy machine, say). Each such
    node (``found["ambiguous"]``) runs once more with a *reference*, a node that had a good pair and is not named,
    preferring one it has not run with yet; a reference serves one suspect per round. The rendezvous is on the
    reference.

    :param hosts: ``[(name, address)]`` as for :func:`pair_plan`.
    :param found: what :func:`pair_findings` returned for the ring.
    :returns: the :func:`pair_plan` shape; no rounds when nothing is ambiguous or no node is a reference.
    """
    hosts, port = _check_hosts(hosts, port)
    names = [name for name, _address in hosts]
    suspects = [n for n in found.get("ambiguous") or [] if n in names]
    named = set(found.get("nodes") or {})
    pairs = found.get("pairs") or []
    references = [n for n in names
                  if n not in named and any(not p["bad"] for p in pairs if n in p["nodes"])]
    edge_rounds = []
    while suspects and references:
        edges, free = [], list(references)
        for suspect in list(suspects):
            met = set(m for p in pairs if suspect in p["nodes"] for m in p["nodes"])
            choice = next((r for r in free if r not in met), None) or (free[0] if free else None)
            if choice is None:
                break
            free.remove(choice)
            suspects.remove(suspect)
            edges.append((choice, suspect))
        edge_rounds.append(edges)
    return _plan(edge_rounds, hosts, port, run_id)


def run_result(registered):
    """One node's view of its pair's run, from what the play registered (the async_status of nccl_health).

    :returns: ``{"busbw_gbps": float or None, "error": str or None}``: the busbw of the largest size (GB/s) when the
        run completed, else the module's message (or Ansible's, when the node gave no result).
    """
    if not isinstance(registered, dict) or not registered or registered.get("skipped"):
        return {"busbw_gbps": None, "error": "no result (the node stopped answering Ansible)"}
    if registered.get("failed") or not registered.get("busbw"):
        why = registered.get("msg") or "no bandwidth reported"
        return {"busbw_gbps": None, "error": str(why)}
    largest = max(registered["busbw"], key=lambda row: row.get("bytes") or 0)
    return {"busbw_gbps": float(largest["busbw_gbps"]), "error": None}


def _short(text, limit=240):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _describe(pair):
    name = "%s-%s" % tuple(pair["nodes"])
    if pair["error"]:
        return "%s failed (%s)" % (name, pair["error"])
    return "%s %.4g GB/s" % (name, pair["busbw_gbps"])


def merge_runs(per_node):
    """Every pair once, from what each of its two nodes reported.

    :param per_node: ``{node: [{"pair": [first, second], "result": registered or run_result}]}``.
    :returns: ``[{"nodes": [first, second], "busbw_gbps", "error"}]`` in the order first seen: a pair failed when
        either node says so (or did not report), and its busbw is the lower of the two reports.
    :raises ValueError: an entry without a two-node ``pair``.
    """
    pairs = {}
    order = []
    for node in sorted(per_node):
        for run in per_node[node] or []:
            nodes = run.get("pair") if isinstance(run, dict) else None
            if not isinstance(nodes, (list, tuple)) or len(nodes) != 2:
                raise ValueError("a pair run of %s has no two-node 'pair': %r" % (node, run))
            result = run.get("result")
            if not (isinstance(result, dict) and set(result) == {"busbw_gbps", "error"}):
                result = run_result(result)
            key = tuple(nodes)
            if key not in pairs:
                pairs[key] = {"nodes": list(key), "reports": {}}
                order.append(key)
            pairs[key]["reports"][node] = result
    merged = []
    for key in order:
        reports = pairs[key]["reports"]
        errors = ["%s: %s" % (node, _short(reports[node]["error"])) if node in reports else
                  "%s: no result (the node did not run its side)" % node
                  for node in key if node not in reports or reports[node]["error"]]
        figures = [r["busbw_gbps"] for r in reports.values() if r["busbw_gbps"] is not None]
        merged.append({"nodes": list(key), "error": "; ".join(errors) or None,
                       "busbw_gbps": None if errors or not figures else min(figures)})
    return merged


def pair_findings(per_node, min_ratio=DEFAULT_MIN_RATIO, floor_gbps=None):
    """Name the node(s) or link(s) at fault from the pair runs.

    :param per_node: what :func:`merge_runs` takes, ``{node: [{"pair", "result"}]}``.
    :param min_ratio: a pair below this fraction of the best pair's busbw is bad; in (0, 1].
    :param floor_gbps: busbw floor in GB/s (10^9 bytes/s) a pair must reach too, or None.
    :returns: ``{"problems": [...], "nodes": {node: [codes]}, "pairs": [{"nodes", "busbw_gbps", "error", "ratio",
        "bad"}], "best_gbps": float or None, "ambiguous": [nodes]}``; ``ratio`` is busbw / the best pair's (None for
        a failed pair); ``ambiguous`` the named nodes that share a bad pair with another named node (for
        :func:`confirm_plan`).
    :raises ValueError: ``min_ratio`` out of range, a negative floor, or a malformed run.
    """
    min_ratio = fraction(min_ratio)
    if floor_gbps is not None:
        floor_gbps = float(floor_gbps)
        if floor_gbps < 0:
            raise ValueError("floor_gbps must be >= 0, got %r" % floor_gbps)
    pairs = merge_runs(per_node)
    figures = [p["busbw_gbps"] for p in pairs if p["busbw_gbps"] is not None]
    best = max(figures) if figures else None
    for pair in pairs:
        value = pair["busbw_gbps"]
        pair["ratio"] = round(value / best, 4) if value is not None and best else None
        pair["bad"] = bool(pair["error"]) or value is None or (floor_gbps is not None and value < floor_gbps) or (
            pair["ratio"] is not None and pair["ratio"] < min_ratio)
    result = {"problems": [], "nodes": {}, "pairs": pairs, "best_gbps": best, "ambiguous": []}
    bad = [p for p in pairs if p["bad"]]
    if not bad:
        return result
    why = ("below %.0f%% of the best pair (%.4g GB/s)" % (100 * min_ratio, best) if best else "") + (
        "%sbelow the floor of %.4g GB/s" % (" or " if best else "", floor_gbps) if floor_gbps is not None else "")
    good = [p for p in pairs if not p["bad"]]
    nodes = sorted(set(n for p in pairs for n in p["nodes"]))
    if len(nodes) == 2:
        result["problems"].append(problem(
            "PAIRWISE_UNDECIDED", "error", "nodes %s" % " and ".join(nodes),
            "the only pair, %s, was slow or failed; with two nodes the collectives alone cannot tell which node is "
            "at fault" % _describe(bad[0]),
            "add a third node to the health run, or compare each node's port by hand: ethtool, ip -s link "
            "(errors, drops), tc qdisc show, the firewall's rules for the ephemeral range"))
        return result
    if not good:
        result["problems"].append(problem(
            "PAIRWISE_ALL", "error", "every pair",
            "all %d pairs were slow or failed (%s): the fault is common to every node, not one of them"
            % (len(pairs), "; ".join(_describe(p) for p in pairs)),
            "look at what the nodes share: the switch and its ports' speed and PFC, the MTU, the firewall policy, "
            "NCCL/Gloo interface settings (docs/troubleshooting.md)"))
        return result
    best_good = max(good, key=lambda p: p["busbw_gbps"])
    at_fault = [n for n in nodes if all(p["bad"] for p in pairs if n in p["nodes"])]
    for node in at_fault:
        mine = [p for p in pairs if node in p["nodes"]]
        result["problems"].append(problem(
            "PAIRWISE_NODE", "error", "node %s" % node,
            "every pair with %s was slow or failed (%s), while %s reached %.4g GB/s; bad means failed, %s"
            % (node, "; ".join(_describe(p) for p in mine), "-".join(best_good["nodes"]), best_good["busbw_gbps"],
               why),
            "check that node's cluster interface and port: ethtool (speed, duplex), ip -s link (errors, drops), "
            "tc qdisc show (a rate limit), its firewall's rules for the rendezvous port and the ephemeral range; "
            "drain it until a health run passes"))
        result["nodes"].setdefault(node, []).append("PAIRWISE_NODE")
    result["ambiguous"] = sorted(n for n in at_fault if any(
        m != n and m in at_fault for p in pairs if p["bad"] and n in p["nodes"] for m in p["nodes"]))
    for pair in bad:
        if any(n in at_fault for n in pair["nodes"]):
            continue
        result["problems"].append(problem(
            "PAIRWISE_LINK", "error", "link %s" % "-".join(pair["nodes"]),
            "%s, while both nodes ran well with other partners (best pair %s, %.4g GB/s); bad means failed, %s"
            % (_describe(pair), "-".join(best_good["nodes"]), best_good["busbw_gbps"], why),
            "the path between these two nodes: their switch ports and cables, a route or firewall rule between "
            "their addresses, ib_write_bw between them on RDMA hosts"))
    return result
