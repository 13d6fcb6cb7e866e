"""Cross-node comparisons: facts gathered on every node, compared once on the controller.

Pure functions over dicts keyed by node name; each returns a list of problems in the
``diagnosis`` shape. Why each matters:

* versions (driver, CUDA, NCCL, torch) that differ between nodes make collectives fail or hang
  (NCCL requires the same version on every rank: NCCL user guide, "Troubleshooting");
* a fabric MTU that differs between nodes breaks RoCE/IB paths (newer NCCL refuses mismatched
  MTUs; ``ibv_devinfo`` active_mtu is negotiated down, see the ib_write_bw fixture's
  "Requested mtu is higher than active mtu");
* SSH: sshd's StrictModes refuses keys when ``~/.ssh`` or ``authorized_keys`` is group/world
  writable, and an empty known_hosts makes ``ssh -o BatchMode=yes`` fail (case C18);
* a rank-to-rank port that one pair of nodes cannot open (case C03): see ``peermesh``.
"""
from __future__ import annotations

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

# Most permissive mode sshd (StrictModes) and ssh accept for each file, as octal bits that must be clear.
# Source: sshd_config(5) StrictModes, ssh(1) FILES.
SSH_FORBIDDEN_BITS = {
    "dir": 0o022,            # ~/.ssh: not group/world writable (700 recommended)
    "authorized_keys": 0o022,
    "private_key": 0o077,    # ~/.ssh/id_*: readable by the owner only
    "known_hosts": 0o022,
}
SSH_RECOMMENDED = {"dir": "0700", "authorized_keys": "0600", "private_key": "0600", "known_hosts": "0600"}


def version_problems(node_versions, keys=("driver", "cuda", "nccl", "torch")):
    """Versions that differ between nodes.

    :param node_versions: ``{node: {"driver": "535.104.05", "cuda": "12.2", "nccl": "2.18.3", "torch": "2.1.0"}}``;
        missing or empty values are ignored (e.g. no driver on CPU nodes).
    :returns: one ``CLUSTER_VERSION_MISMATCH`` error per key whose values differ.
    """
    problems = []
    for key in keys:
        by_value = {}
        for node in sorted(node_versions):
            value = (node_versions[node] or {}).get(key)
            if value not in (None, ""):
                by_value.setdefault(str(value), []).append(node)
        if len(by_value) > 1:
            detail = "; ".join("%s on %s" % (v, ", ".join(n)) for v, n in sorted(by_value.items()))
            problems.append(problem(
                "CLUSTER_VERSION_MISMATCH", "error", key,
                "%s differs between nodes: %s" % (key, detail),
                "install the same %s on every node (the compatibility matrix pins one stack)" % key))
    return problems


def mtu_problems(node_mtus):
    """``{node: mtu}`` (int or str) -> ``CLUSTER_MTU_MISMATCH`` when the fabric MTU differs."""
    by_value = {}
    for node in sorted(node_mtus):
        if node_mtus[node] not in (None, ""):
            by_value.setdefault(int(node_mtus[node]), []).append(node)
    if len(by_value) <= 1:
        return []
    detail = "; ".join("%d on %s" % (v, ", ".join(n)) for v, n in sorted(by_value.items()))
    return [problem("CLUSTER_MTU_MISMATCH", "error", "fabric MTU",
                    "the fabric MTU differs between nodes: %s" % detail,
                    "set the same MTU (9000 for RoCE with jumbo frames) on every node's fabric interface and switch port")]


def gid_index_problems(node_gid_index, configured=None):
    """RoCE v2 GID indices per node.

    :param node_gid_index: ``{node: recommended index}`` from roce_health.
    :param configured: a cluster-wide ``NCCL_IB_GID_INDEX`` if one is set for all nodes, else None.
    :returns: ``CLUSTER_GID_INDEX_INCONSISTENT`` (error) when one configured index does not fit
        every node; a warning when indices differ and nothing is configured (per-node
        /etc/nccl.conf must then carry each node's own index).
    """
    values = {n: int(v) for n, v in node_gid_index.items() if v not in (None, "")}
    if not values:
        return []
    if configured not in (None, ""):
        wrong = sorted(n for n, v in values.items() if v != int(configured))
        if wrong:
            return [problem("CLUSTER_GID_INDEX_INCONSISTENT", "error", "NCCL_IB_GID_INDEX",
                            "NCCL_IB_GID_INDEX=%s for every node, but the RoCE v2 GID of the fabric address is %s"
                            % (configured, ", ".join("%d on %s" % (values[n], n) for n in wrong)),
                            "do not set one GID index for the cluster: write each node's own index to /etc/nccl.conf")]
        return []
    if len(set(values.values())) > 1:
        return [problem("CLUSTER_GID_INDEX_INCONSISTENT", "warning", "NCCL_IB_GID_INDEX",
                        "the RoCE v2 GID index differs between nodes: %s"
                        % ", ".join("%d on %s" % (v, n) for n, v in sorted(values.items())),
                        "keep the index per node (/etc/nccl.conf), never as one job-wide variable")]
    return []


def ssh_mode_problems(node, modes):
    """Too-open SSH paths on one node (case C18).

    :param modes: ``{path: (kind, mode)}`` with kind in :data:`SSH_FORBIDDEN_BITS` and mode an octal
        string such as ``"0775"`` or an int.
    """
    problems = []
    for path in sorted(modes):
        kind, mode = modes[path]
        value = int(str(mode), 8) if not isinstance(mode, int) else mode
        if value & SSH_FORBIDDEN_BITS[kind]:
            problems.append(problem(
                "SSH_MODE_TOO_OPEN", "error", "%s:%s" % (node, path),
                "%s has mode %04o; sshd's StrictModes refuses keys, ssh refuses a readable private key" % (path, value),
                "chmod %s %s (the ssh_trust role leaves 700/600)" % (SSH_RECOMMENDED[kind], path)))
    return problems


def known_hosts_problems(node, missing_peers):
    """``SSH_KNOWN_HOSTS_MISSING`` for each peer without a known_hosts entry on ``node`` (C18)."""
    return [problem("SSH_KNOWN_HOSTS_MISSING", "error", "%s -> %s" % (node, peer),
                    "no known_hosts entry for %s: non-interactive ssh fails with 'Host key verification failed.'" % peer,
                    "run the ssh_trust role (pre-seeds every node's host keys); never StrictHostKeyChecking=no")
            for peer in sorted(missing_peers)]
