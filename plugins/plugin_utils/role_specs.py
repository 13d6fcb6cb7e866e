# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' argument specs (every ``roles/*/meta/argument_specs.yml`` of the collection), read once per process.

``role_specs(roles_dir=ROLES_DIR)`` -> {role name: its ``argument_specs`` mapping}, cached per folder;
AnsibleFilterError naming the file when one cannot be read or is not YAML. The validate stage's filter reads them
(plugins/filter/validate.py), and ``ddp.cluster.preload`` reads them in ansible-playbook's main process, so the
workers it forks inherit them instead of parsing every role's file again.
"""
from __future__ import annotations

import glob
import os

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.plugin_utils.compat_data import SAFE_LOADER

ROLES_DIR = os.path.join(os.path.dirname(__file__), '..', '..', 'roles')

_SPECS = {}


def role_specs(roles_dir=ROLES_DIR):
    """{role: argument_specs} of every role of the collection (cached per folder)."""
    roles_dir = os.path.realpath(roles_dir)
    if roles_dir not in _SPECS:
        specs = {}
        for path in sorted(glob.glob(os.path.join(roles_dir, '*', 'meta', 'argument_specs.yml'))):
            try:
                with open(path, 'r') as handle:
                    data = yaml.load(handle, Loader=SAFE_LOADER) or {}  # nosec B506: a safe loader
            except (OSError, yaml.YAMLError) as exc:
                raise AnsibleFilterError('cannot read %s: %s' % (path, exc))
            specs[os.path.basename(os.path.dirname(os.path.dirname(path)))] = data.get('argument_specs') or {}
        _SPECS[roles_dir] = specs
    return _SPECS[roles_dir]
