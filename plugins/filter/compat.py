# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the compatibility matrix and the preflight checks.

compat_resolve, compat_matrix, preflight_inventory_problems, preflight_resolve_problems.
Documentation lives in the sidecar files plugins/filter/<filter name>.yml.
The matrix is read from data/compat_matrix.yml in this collection (controller side).
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.cluster.preflight import (
    inventory_problems,
    resolve_problems,
)
from ansible_collections.ddp.cluster.plugins.plugin_utils.compat_data import compat_resolve, load_matrix_file, plain


def compat_matrix(_input=None):
    """Return the whole validated matrix (input ignored)."""
    return load_matrix_file()


def preflight_inventory_problems(cfg):
    """cfg dict -> list of preflight problems (see module_utils/cluster/preflight.py)."""
    if cfg is not None and not isinstance(cfg, dict):
        raise AnsibleFilterError('preflight_inventory_problems expects a dict, got %s' % type(cfg).__name__)
    return inventory_problems(plain(cfg or {}))


def preflight_resolve_problems(getent_output, hostname, variable=None):
    """getent stdout (str or lines), hostname -> list of resolution problems."""
    return resolve_problems(str(hostname), plain(getent_output), variable=variable)


class FilterModule(object):
    """ddp.cluster compatibility and preflight filters."""

    def filters(self):
        return {
            'compat_resolve': compat_resolve,
            'compat_matrix': compat_matrix,
            'preflight_inventory_problems': preflight_inventory_problems,
            'preflight_resolve_problems': preflight_resolve_problems,
        }
