# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate stage's filter: validate_problems (documentation in plugins/filter/validate_problems.yml).

Controller side: reads the roles' meta/argument_specs.yml from this collection and what the inventory
and the extra vars set for each node (hostvars), then applies module_utils/cluster/validate.py's pure rules.
"""
from __future__ import annotations

from ansible import constants as C
from ansible.errors import AnsibleFilterError
from ansible.module_utils.facts import default_collectors

from ansible_collections.ddp.cluster.plugins.plugin_utils.compat_data import compat_resolve, plain
from ansible_collections.ddp.cluster.plugins.plugin_utils.role_specs import role_specs
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.validate import PREFIXES, validate, values_problems


def _node_values(host_vars):
    """Our prefixed variables and ansible_host, templated, and {name: error} of those whose Jinja cannot be
    rendered on the controller (module_utils/cluster/validate.py template_problem tells a missing node fact or role
    default, left to the node, from a broken expression, refused)."""
    values = {}
    errors = {}
    for name in list(host_vars.keys()):
        name = str(name)
        if not (name.startswith(PREFIXES) or name == 'ansible_host'):
            continue
        try:
            # ansible-core < 2.19 raises here
            value = host_vars[name]
        except Exception as exc:  # pylint: disable=broad-except
            errors[name] = str(exc)
            continue
        kind = type(value).__name__
        if kind.endswith('Undefined') or 'Marker' in kind:
            # ansible-core >= 2.19 returns a marker instead of raising
            errors[name] = '%s: %s' % (kind, getattr(value, '_undefined_message', '') or '')
            continue
        values[name] = plain(value)
    return values, errors


# Facts ansible.builtin.setup reports on Linux that its collectors do not list in their fact ids (facts named after
# their collector, the platform's host names and userspace, the hardware's memory, processor and DMI keys, the
# distribution's file details); tests/unit/test_fact_namespace.py checks the whole list against a real setup run.
_UNLISTED_FACTS = (
    'apparmor', 'cmdline', 'proc_cmdline', 'date_time', 'distribution', 'distribution_minor_version',
    'distribution_file_parsed', 'distribution_file_path', 'distribution_file_variety', 'dns', 'env',
    'fibre_channel_wwn', 'fips', 'loadavg', 'lsb', 'pkg_mgr', 'python', 'selinux', 'selinux_python_present',
    'service_mgr', 'iscsi_iqn', 'hostnqn', 'locally_reachable_ips', 'effective_group_id', 'real_group_id',
    'hostname', 'fqdn', 'nodename', 'domain', 'userspace_bits', 'userspace_architecture',
    'memtotal_mb', 'memfree_mb', 'swaptotal_mb', 'swapfree_mb', 'memory_mb', 'processor_vcpus', 'processor_nproc',
    'processor_threads_per_core', 'uptime_seconds', 'device_links', 'lvm', 'flags', 'form_factor', 'system_vendor',
    'product_name', 'product_serial', 'product_uuid', 'product_version', 'bios_date', 'bios_vendor', 'bios_version',
    'board_asset_tag', 'board_name', 'board_serial', 'board_vendor', 'board_version', 'chassis_asset_tag',
    'chassis_serial', 'chassis_vendor', 'chassis_version')


def fact_variables(inject=None):
    """The top-level fact variables (``ansible_<fact>``) a run does not define, as a sorted list of str.

    Empty where ansible-core injects facts as variables (``INJECT_FACTS_AS_VARS``, ansible.cfg's
    ``inject_facts_as_vars``; True by default until ansible-core 2.24 removes it); else the facts ansible-core's
    default collectors list in their fact ids, and ``_UNLISTED_FACTS``. The local facts (``local``) stay a variable
    either way. Facts named after a network interface (the prefix ansible_ and the interface's name) are not
    listed: a value reading one is left to the node, as before.

    :param inject: whether facts are injected; None reads ansible-core's setting.
    """
    if inject is None:
        inject = C.INJECT_FACTS_AS_VARS
    if inject:
        return []
    names = set(_UNLISTED_FACTS)
    for collector in default_collectors.collectors:
        names.update(getattr(collector, '_fact_ids', None) or ())
    names.discard('local')
    return sorted('ansible_' + name for name in names)


def validate_problems(hostvars, nodes, head_hosts=None, nodes_group='ddp_nodes', head_group='ddp_head'):
    """hostvars, node names -> list of {code, variable, message, fix} (module_utils/cluster/validate.py)."""
    nodes = [str(n) for n in (nodes or [])]
    read = dict((n, _node_values(hostvars[n])) for n in nodes)
    cfg = {
        'nodes': dict((n, read[n][0]) for n in nodes),
        'unrendered': dict((n, read[n][1]) for n in nodes),
        'head_hosts': [str(h) for h in (head_hosts or [])],
        'nodes_group': str(nodes_group),
        'head_group': str(head_group),
        'role_specs': role_specs(),
        'fact_variables': fact_variables(),
    }
    problems = validate(cfg)
    return problems + _stack_problems(cfg['nodes'][nodes[0]] if nodes else {})


def _stack_problems(values):
    """The stack against data/compat_matrix.yml (compat_resolve), with the versions given as strings;
    a version given as a number is already refused (VALIDATE_VERSION_NUMBER)."""
    spec = {}
    for key, names, default in (('torch', ('preflight_torch_version', 'ddp_torch_version'), None),
                                ('torchvision', ('preflight_torchvision_version', 'ddp_torchvision_version'), None),
                                ('cuda', ('preflight_cuda_version', 'ddp_cuda_version'), 'auto'),
                                ('driver', ('preflight_driver_version', 'ddp_nvidia_driver_version'), None)):
        value = next((values[n] for n in names if n in values), default)
        spec[key] = value if isinstance(value, str) and value.strip() else default
    return list(compat_resolve(spec).get('problems') or [])


def validate_values(values, nodes=None):
    """{variable: value} a role resolved -> the validate stage's problems for them (module_utils/cluster/validate.py), so a
    role used without the validate stage refuses what the stage would, with the same rules."""
    if not isinstance(values, dict):
        raise AnsibleFilterError('validate_values: expected a dict of variables, got %s' % type(values).__name__)
    return values_problems(plain(values), role_specs(), [str(n) for n in (nodes or [])])


class FilterModule(object):
    """ddp.cluster validate filter."""

    def filters(self):
        return {'validate_problems': validate_problems, 'validate_values': validate_values}
