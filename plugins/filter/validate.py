# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate stage's filter: validate_problems (documentation in plugins/filter/validate_problems.yml).

Controller side: reads the roles' meta/argument_specs.yml from this collection and what the inventory
and the extra vars set for each node (hostvars), then applies module_utils/cluster/validate.py's pure rules.
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

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
