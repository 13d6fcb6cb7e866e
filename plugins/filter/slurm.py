# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the slurm role: thin wrappers over plugins/module_utils/slurm/nodes.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import nodes as slurm
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import diag as slurm_diag


def _wrap(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except (slurm.SlurmParseError, slurm_diag.SlurmTextError) as exc:
        raise AnsibleFilterError(str(exc))


def slurm_node_entry(slurmd_c_text, gpus=None, mem_reserve_mb=1024, gpu_type=None, addr=None):
    """{name, line, gres, gpus, gres_type} of one node from `slurmd -C` and its GPUs."""
    parsed = _wrap(slurm.parse_slurmd_c, slurmd_c_text)
    return _wrap(slurm.node_entry, parsed, gpus or [], int(mem_reserve_mb), gpu_type or None, addr or None)


def slurm_process_tracking(facts, cgroup_fs_writable=True, choice="auto"):
    """{mode, proctrack, task, jobacct, reason} for a node from its ansible_facts."""
    facts = facts or {}
    return _wrap(slurm.process_tracking, facts.get("virtualization_type"), facts.get("virtualization_role"),
                 bool(cgroup_fs_writable), choice)


def slurm_node_states(sinfo_text):
    """{node: {state, raw, responding, drain, reason, ours}} from `sinfo -h -N -o '%N|%T|%E'`."""
    return _wrap(slurm.parse_sinfo_nodes, sinfo_text)


def slurm_unavailable(states, nodes=None):
    """[{node, state, reason}] of the nodes (all, or those given) that cannot run jobs."""
    return slurm.unavailable_nodes(states or {}, nodes)


def slurm_drain_plan(states, errors):
    """{drain: {node: reason}, resume: [...], operator: [...], unchanged: [...]} for the health verdicts."""
    if not isinstance(errors, dict):
        raise AnsibleFilterError("slurm_drain_plan expects {node: [codes]}, got %s" % type(errors).__name__)
    return slurm.drain_plan(states or {}, errors)


def slurm_account_problems(passwd_text, group_text=None, wanted=None, node=None):
    """ACCOUNT_ID_MISMATCH problems of one node from its `getent passwd` / `getent group`.

    Without group_text, passwd_text is the combined listing (getent passwd, a line "--- group", getent group).
    """
    if node is None:
        raise AnsibleFilterError("slurm_account_problems: node is required")
    return slurm.account_problems(node, passwd_text, group_text, wanted or [])


def slurm_job_failure_nodes(job_nodes, states, job_output=""):
    """[{node, why}] a failed job points at, from Slurm's state and srun's messages."""
    return slurm.job_failure_nodes(list(job_nodes or []), states or {}, job_output or "")


def slurm_conf_nodes(slurm_text, gres_text=""):
    """{NodeName: {name, line, gres, gpus, mem_per_cpu}} of a running cluster's slurm.conf and gres.conf."""
    return _wrap(slurm.conf_nodes, slurm_text or "", gres_text or "")


def slurm_conf_tracking(slurm_text):
    """{mode, proctrack, task, jobacct, reason} of a running cluster's slurm.conf (None where it sets none)."""
    return _wrap(slurm.conf_tracking, slurm_text or "")


def slurm_apply_plan(new_text, old_text="", other_files_changed=False, running_nodes=None):
    """{action: none|reconfigure|restart, added, removed, changed, why} to apply a new slurm.conf."""
    if running_nodes is not None and not isinstance(running_nodes, (list, tuple)):
        raise AnsibleFilterError("slurm_apply_plan: running_nodes must be a list of node names")
    return _wrap(slurm.apply_plan, old_text or "", new_text or "", bool(other_files_changed), running_nodes)


def slurm_join_outcome(stdout, rc):
    """{action: resume|drain, reason} for a joining node from its health command's output and exit status."""
    try:
        rc = int(rc)
    except (TypeError, ValueError):
        raise AnsibleFilterError("slurm_join_outcome: rc must be an exit status, got %r" % (rc,))
    return slurm.join_outcome(rc, stdout or "")


def slurm_node_problems(states, nodes=None, gpus=None):
    """SLURM_* problems from Slurm's node states: raw text of `scontrol show node`, any `sinfo` table (default, -N,
    -l, -R) or the `%N|%T|%E` form, or the dict of slurm_node_states."""
    if isinstance(states, dict):
        parsed = states
    else:
        parsed = _wrap(slurm_diag.parse_node_states, states or "")
    return slurm_diag.node_problems(parsed, list(nodes) if nodes is not None else None, gpus or None)


def slurm_log_problems(log_text, clock_offsets=None, max_offset_s=None):
    """SLURM_* problems from slurmctld/slurmd log lines (munge key vs clock, low memory, gres, registration ...)."""
    return slurm_diag.log_problems(slurm_diag.parse_slurm_log(log_text or ""), clock_offsets or None, max_offset_s)


def slurm_clock_problems(tracking_texts, max_offset_s=None):
    """SLURM_MUNGE_CLOCK_SKEW / SLURM_CLOCK_UNSYNCED from each node's `chronyc tracking` ({node: text}; '' = none)."""
    tracking = dict((node, slurm_diag.parse_chronyc_tracking(text)) for node, text in (tracking_texts or {}).items()
                    if text)
    return slurm_diag.clock_problems(tracking, max_offset_s)


def slurm_job_ids(squeue_text):
    """[job id] from `squeue -h -o %A` (the jobs on the nodes the health stage drains, to requeue)."""
    return _wrap(slurm.parse_job_ids, squeue_text)


class FilterModule(object):
    """ddp.cluster slurm filters."""

    def filters(self):
        return {
            "slurm_node_entry": slurm_node_entry,
            "slurm_process_tracking": slurm_process_tracking,
            "slurm_node_states": slurm_node_states,
            "slurm_unavailable": slurm_unavailable,
            "slurm_drain_plan": slurm_drain_plan,
            "slurm_account_problems": slurm_account_problems,
            "slurm_job_failure_nodes": slurm_job_failure_nodes,
            "slurm_conf_nodes": slurm_conf_nodes,
            "slurm_conf_tracking": slurm_conf_tracking,
            "slurm_apply_plan": slurm_apply_plan,
            "slurm_join_outcome": slurm_join_outcome,
            "slurm_node_problems": slurm_node_problems,
            "slurm_log_problems": slurm_log_problems,
            "slurm_clock_problems": slurm_clock_problems,
            "slurm_job_ids": slurm_job_ids,
        }
