# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: compare facts gathered on every node, once, on the controller."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.gpu import burnin
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import crossnode
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import floors
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import node_stack
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import pairwise
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import peermesh
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import verdict

_KEYS = ("versions", "mtu", "gid_index", "ssh_modes", "known_hosts_missing", "pairs", "probe_error")


def cluster_problems(per_node, gid_configured=None):
    """Run every cross-node comparison over ``{node: facts}`` (see the sidecar documentation)."""
    if not isinstance(per_node, dict):
        raise AnsibleFilterError("cluster_problems expects a dict of node -> facts, got %s" % type(per_node).__name__)
    for node, facts in per_node.items():
        if not isinstance(facts, dict):
            raise AnsibleFilterError("cluster_problems: the facts of %s are not a dict" % node)
        unknown = sorted(set(facts) - set(_KEYS))
        if unknown:
            raise AnsibleFilterError("cluster_problems: %s has unknown keys %s (known: %s)"
                                     % (node, ", ".join(unknown), ", ".join(_KEYS)))
    nodes = sorted(per_node)
    problems = []
    problems += crossnode.version_problems(dict((n, per_node[n].get("versions") or {}) for n in nodes))
    problems += crossnode.mtu_problems(dict((n, per_node[n].get("mtu")) for n in nodes))
    problems += crossnode.gid_index_problems(dict((n, per_node[n].get("gid_index")) for n in nodes), gid_configured)
    for node in nodes:
        modes = per_node[node].get("ssh_modes") or {}
        problems += crossnode.ssh_mode_problems(node, dict((path, tuple(km)) for path, km in modes.items()))
    for node in nodes:
        problems += crossnode.known_hosts_problems(node, per_node[node].get("known_hosts_missing") or [])
    pairs = [p for n in nodes for p in (per_node[n].get("pairs") or [])]
    not_run = dict((n, per_node[n]["probe_error"]) for n in nodes if per_node[n].get("probe_error"))
    ports = sorted(set(p.get("port") for p in pairs if p.get("port") is not None))
    problems += peermesh.mesh_problems(nodes, pairs, not_run, port=ports[0] if len(ports) == 1 else None)
    return problems


def stack_outliers(per_node):
    """``{problems, nodes}``: the nodes whose stack differs from the others (see the sidecar documentation)."""
    if not isinstance(per_node, dict):
        raise AnsibleFilterError("stack_outliers expects a dict of node -> stack, got %s" % type(per_node).__name__)
    for node, stack in per_node.items():
        if stack is not None and not isinstance(stack, dict):
            raise AnsibleFilterError("stack_outliers: the stack of %s is not a dict (node_stack's stack)" % node)
    return node_stack.stack_outliers(per_node)


def _addresses(hosts, hostvars, who, keys=("ddp_fabric_address", "ansible_host")):
    """``[(name, address)]``: the first of ``keys`` a host has in hostvars, else its name (the names without
    hostvars)."""
    if isinstance(hosts, (str, bytes)) or not hasattr(hosts, "__iter__"):
        raise AnsibleFilterError("%s expects a list of host names, got %s" % (who, type(hosts).__name__))
    pairs = []
    for host in hosts:
        address = host
        if hostvars is not None:
            try:
                facts = hostvars[host]
            except KeyError:
                raise AnsibleFilterError("%s: %s is not in hostvars" % (who, host))
            address = next((facts.get(key) for key in keys if facts.get(key)), host)
        pairs.append((str(host), str(address)))
    return pairs


def mesh_plan(hosts, hostvars=None, forks=5, base_s=peermesh.DEFAULT_WINDOW_S, launch_s=peermesh.DEFAULT_LAUNCH_S):
    """Who probes whom and for how long (see the sidecar documentation)."""
    pairs = _addresses(hosts, hostvars, "mesh_plan", ("ansible_host",))
    try:
        return peermesh.mesh_plan(pairs, int(forks), float(base_s), float(launch_s))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("mesh_plan: %s" % exc)


def mesh_problems(results, what="ssh", nodes=None, port=None):
    """Problems from every node's registered ssh_check / tcp_probe mesh result (see the sidecar documentation)."""
    if not isinstance(results, dict):
        raise AnsibleFilterError("mesh_problems expects a dict of node -> registered result, got %s"
                                 % type(results).__name__)
    if what not in ("ssh", "port"):
        raise AnsibleFilterError("mesh_problems: what must be ssh or port, got %r" % (what,))
    pairs, not_run = [], {}
    for node, result in results.items():
        if not isinstance(result, dict) or result.get("skipped"):
            continue
        if isinstance(result.get("pairs"), list):
            pairs.extend(result["pairs"])
        else:
            not_run[node] = result.get("msg") or "no result (the node stopped answering Ansible)"
    everyone = list(nodes) if nodes is not None else sorted(results)
    return peermesh.mesh_problems(everyone, pairs, not_run, port=port, what=what,
                                  fix=None if what == "port" else
                                  "run the ssh_trust role (keys, authorized_keys and known_hosts on every node); "
                                  "the verdict names what ssh said")


def burnin_findings(per_node, min_ratio=burnin.DEFAULT_MIN_RATIO, before=None, after=None, dcgm=None, dcgm_level=None):
    """``{problems, nodes, devices, dcgm_ran}``: every device's burn-in against its peers, the GPU error counters
    before vs after it, and ``dcgmi diag`` (see the sidecar documentation)."""
    for name, value in (("the input", per_node), ("before", before), ("after", after), ("dcgm", dcgm)):
        if value is not None and not isinstance(value, dict):
            raise AnsibleFilterError("burnin_findings: %s expects a dict of node -> result, got %s"
                                     % (name, type(value).__name__))
    if per_node is None:
        raise AnsibleFilterError("burnin_findings expects a dict of node -> burn-in result, got None")
    try:
        return burnin.tier_findings(per_node, min_ratio, before, after, dcgm, dcgm_level)
    except ValueError as exc:
        raise AnsibleFilterError("burnin_findings: %s" % exc)


def pair_plan(hosts, hostvars=None, port=29400, run_id="ddp-pair"):
    """Pairs of nodes for the all-reduce that finds the bad node, round by round (see the sidecar documentation)."""
    try:
        return pairwise.pair_plan(_addresses(hosts, hostvars, "pair_plan"), port, str(run_id))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("pair_plan: %s" % exc)


def pair_confirm_plan(hosts, found, hostvars=None, port=29400, run_id="ddp-pair-confirm"):
    """Extra pairs for the nodes the ring cannot tell apart (see the sidecar documentation)."""
    if not isinstance(found, dict):
        raise AnsibleFilterError("pair_confirm_plan expects what pair_findings returned, got %s" % type(found).__name__)
    try:
        return pairwise.confirm_plan(_addresses(hosts, hostvars, "pair_confirm_plan"), found, port, str(run_id))
    except (TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("pair_confirm_plan: %s" % exc)


def pair_findings(per_node, min_ratio=pairwise.DEFAULT_MIN_RATIO, floor_gbps=None):
    """``{problems, nodes, pairs, best_gbps}``: the node(s) or link(s) the pair runs point at (see the sidecar
    documentation)."""
    if not isinstance(per_node, dict):
        raise AnsibleFilterError("pair_findings expects a dict of node -> pair runs, got %s" % type(per_node).__name__)
    try:
        return pairwise.pair_findings(per_node, min_ratio, floor_gbps)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("pair_findings: %s" % exc)


def health_verdicts(found, errors=None, history_text="", now=0, window_days=7, threshold=verdict.DEFAULT_THRESHOLD):
    """``{nodes, problems, records, lines, skipped_lines}``: one verdict per node and the history's flags (see the
    sidecar documentation)."""
    if not isinstance(found, dict):
        raise AnsibleFilterError("health_verdicts expects a dict of node -> problems, got %s" % type(found).__name__)
    errors = errors or {}
    if not isinstance(errors, dict):
        raise AnsibleFilterError("health_verdicts: errors must be a dict of node -> codes, got %s" % type(errors).__name__)
    per_node = {}
    for node, problems in found.items():
        if problems is not None and not isinstance(problems, list):
            raise AnsibleFilterError("health_verdicts: the problems of %s are not a list" % node)
        per_node[str(node)] = {"problems": problems or [], "errors": list(errors.get(node) or []),
                               "ran": problems is not None}
    try:
        return verdict.health_verdicts(per_node, history_text or "", float(now), float(window_days) * 86400.0,
                                       int(threshold))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("health_verdicts: %s" % exc)


def busbw_floor(per_node, explicit=None, rdma_fraction=floors.RDMA_FRACTION, tcp_fraction=floors.TCP_FRACTION,
                ranks_per_node=1):
    """``{floor_gbps, source, why, nodes}``: the all-reduce floor from every node's fabric (see the sidecar
    documentation)."""
    if not isinstance(per_node, dict):
        raise AnsibleFilterError("busbw_floor expects a dict of node -> {gpus, roce}, got %s" % type(per_node).__name__)
    try:
        return floors.busbw_floor(per_node, None if explicit in (None, "") else float(explicit),
                                  rdma_fraction, tcp_fraction, ranks_per_node)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("busbw_floor: %s" % exc)


class FilterModule(object):
    """ddp.cluster cross-node filters."""

    def filters(self):
        return {"burnin_findings": burnin_findings, "busbw_floor": busbw_floor, "cluster_problems": cluster_problems,
                "health_verdicts": health_verdicts, "mesh_plan": mesh_plan, "mesh_problems": mesh_problems,
                "pair_confirm_plan": pair_confirm_plan, "pair_findings": pair_findings, "pair_plan": pair_plan,
                "stack_outliers": stack_outliers}
