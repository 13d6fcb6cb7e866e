# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of Slurm's job accounting: thin wrappers over plugins/module_utils/slurm/accounting.py (pure, unit-tested).
Documentation: one YAML file per filter beside this one."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import accounting as slurm_accounting


def _wrap(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except slurm_accounting.AccountingParseError as exc:
        raise AnsibleFilterError(str(exc))


def slurm_sacctmgr_todo(listing, cluster, account, users):
    """The sacctmgr -i add commands (argv lists) that register what is missing."""
    return _wrap(slurm_accounting.sacctmgr_todo, listing, str(cluster), str(account), [str(u) for u in users or []])


def slurm_accounting_problems(read, host, log_path="/var/log/slurm/slurmdbd.log", db_name="slurm_acct_db",
                              db_user="slurm"):
    """ACCOUNTING_* problems of the accounting host from the role's one read."""
    return slurm_accounting.problems(read, str(host), log_path, db_name, db_user)


def slurm_cluster_registration(text, cluster, ctld_host="", ctld_log=""):
    """{registered, control_host, control_port, problem} of the cluster from sacctmgr show cluster."""
    reg = slurm_accounting.parse_cluster_registration(text, str(cluster))
    reg["problem"] = slurm_accounting.not_registered(str(cluster), str(ctld_host), reg, ctld_log)
    return reg


def slurm_sacct_jobs(text):
    """{job id: {job_name, state, elapsed, elapsed_s, nodes, exit_code}} from sacct -X -n -P."""
    return _wrap(slurm_accounting.parse_sacct, text)


class FilterModule(object):
    """ddp.cluster Slurm accounting filters."""

    def filters(self):
        return {
            "slurm_sacctmgr_todo": slurm_sacctmgr_todo,
            "slurm_accounting_problems": slurm_accounting_problems,
            "slurm_cluster_registration": slurm_cluster_registration,
            "slurm_sacct_jobs": slurm_sacct_jobs,
        }
