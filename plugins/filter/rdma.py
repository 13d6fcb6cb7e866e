# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rdma role: thin wrappers over plugins/module_utils/fabric/rdma_config.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import rdma_config


def _dict(value, name):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s expects a dict, got %s" % (name, type(value).__name__))
    return value


def rdma_nccl_problems(overrides, allow=None, torch_settings=None):
    """Problems with rdma_nccl_overrides and rdma_torch_nccl_env, before any change."""
    problems = rdma_config.nccl_override_problems(_dict(overrides, "rdma_nccl_problems"), allow or ())
    problems += rdma_config.torch_nccl_env(None, _dict(torch_settings, "rdma_nccl_problems"))[1]
    return problems


def rdma_nccl_conf(derived, overrides=None):
    """The text of /etc/nccl.conf from roce_health's nccl_conf and the overrides."""
    return rdma_config.render_nccl_conf(_dict(derived, "rdma_nccl_conf"), _dict(overrides, "rdma_nccl_conf"))


def rdma_node_fabric(roce, mtu=None):
    """{mtu, gid_index} of one node for ddp.cluster.cluster_problems."""
    return rdma_config.node_fabric_facts(_dict(roce, "rdma_node_fabric"), mtu)


def rdma_torch_env(settings, torch_version=None):
    """{env, problems, profile, env_file}: the names the given torch reads and the two files' text."""
    env, problems = rdma_config.torch_nccl_env(torch_version, _dict(settings, "rdma_torch_env"))
    return {"env": env, "problems": problems, "profile": rdma_config.render_torch_profile(env, torch_version),
            "env_file": rdma_config.render_env_file(env)}


def rdma_ofed_plan(installed_text, wanted_version, running_kernel, supported_kernels_text=None, extra_args=None,
                   force=False, source=None):
    """The MLNX_OFED install decision; an empty wanted_version is read from the source's file name."""
    wanted = wanted_version or rdma_config.ofed_version_from_name(source)
    return rdma_config.ofed_plan(installed_text, wanted, running_kernel, supported_kernels_text, extra_args, force)


def rdma_mtu_plan(os_family, interface, mtu, backend="auto", nmcli_text=None, networkctl_text=None, netplan=False,
                  mac=None):
    """How to persist the fabric MTU; nmcli_text / networkctl_text are the raw outputs (None when not run)."""
    return rdma_config.mtu_plan(os_family, interface, mtu, backend,
                                rdma_config.nmcli_connection(nmcli_text) if nmcli_text else None,
                                rdma_config.networkctl_network_file(networkctl_text), bool(netplan), mac)


class FilterModule(object):
    """ddp.cluster rdma filters."""

    def filters(self):
        return {
            "rdma_nccl_problems": rdma_nccl_problems,
            "rdma_nccl_conf": rdma_nccl_conf,
            "rdma_node_fabric": rdma_node_fabric,
            "rdma_torch_env": rdma_torch_env,
            "rdma_ofed_plan": rdma_ofed_plan,
            "rdma_mtu_plan": rdma_mtu_plan,
        }
