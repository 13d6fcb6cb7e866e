# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the compatibility matrix and the preflight checks.

compat_resolve, compat_matrix, preflight_inventory_problems, preflight_resolve_problems.
Documentation lives in the sidecar files plugins/filter/<filter name>.yml.
The matrix is read from data/compat_matrix.yml in this collection (controller side).
"""
from __future__ import annotations

import os

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.compat import (
    MatrixError,
    load_matrix,
    resolve_stack,
)
from ansible_collections.ddp.cluster.plugins.module_utils.preflight import (
    inventory_problems,
    resolve_problems,
)

MATRIX_PATH = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'compat_matrix.yml')

_CACHE = {}


def _load(path=MATRIX_PATH):
    """Load and validate the matrix file; cached per (path, mtime)."""
    path = os.path.realpath(path)
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise AnsibleFilterError('cannot read the compatibility matrix %s: %s' % (path, exc))
    key = (path, mtime)
    if key not in _CACHE:
        try:
            with open(path, 'r') as handle:
                data = yaml.safe_load(handle)
            _CACHE.clear()
            _CACHE[key] = load_matrix(data)
        except (yaml.YAMLError, MatrixError) as exc:
            raise AnsibleFilterError('%s: %s' % (path, exc))
    return _CACHE[key]


def _plain(value):
    """Ansible's lazy/tagged containers and scalars as plain dict/list/str/int/float/bool for the pure code.

    Shared by the collection's filters (gpu_stack, validate import it from here).
    """
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def compat_resolve(spec, matrix=None):
    """spec: {torch, torchvision, cuda, driver} (all optional) -> resolve_stack's dict."""
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise AnsibleFilterError('compat_resolve expects a dict with torch, torchvision, cuda, driver; got %s'
                                 % type(spec).__name__)
    spec = _plain(spec)
    unknown = sorted(set(spec) - set(('torch', 'torchvision', 'cuda', 'driver')))
    if unknown:
        raise AnsibleFilterError('compat_resolve: unknown keys %s (allowed: torch, torchvision, cuda, driver)'
                                 % ', '.join(unknown))
    if matrix is None:
        data = _load()
    else:
        try:
            data = load_matrix(_plain(matrix))
        except MatrixError as exc:
            raise AnsibleFilterError(str(exc))
    return resolve_stack(data, spec.get('torch'), torchvision=spec.get('torchvision'),
                         cuda=spec.get('cuda'), driver=spec.get('driver'))


def compat_matrix(_input=None):
    """Return the whole validated matrix (input ignored)."""
    return _load()


def preflight_inventory_problems(cfg):
    """cfg dict -> list of preflight problems (see module_utils/preflight.py)."""
    if cfg is not None and not isinstance(cfg, dict):
        raise AnsibleFilterError('preflight_inventory_problems expects a dict, got %s' % type(cfg).__name__)
    return inventory_problems(_plain(cfg or {}))


def preflight_resolve_problems(getent_output, hostname, variable=None):
    """getent stdout (str or lines), hostname -> list of resolution problems."""
    return resolve_problems(str(hostname), _plain(getent_output), variable=variable)


class FilterModule(object):
    """ddp.cluster compatibility and preflight filters."""

    def filters(self):
        return {
            'compat_resolve': compat_resolve,
            'compat_matrix': compat_matrix,
            'preflight_inventory_problems': preflight_inventory_problems,
            'preflight_resolve_problems': preflight_resolve_problems,
        }
