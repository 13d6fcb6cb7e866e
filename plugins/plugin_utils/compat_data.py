# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the collection's filter plugins share (controller side): Ansible's values as plain Python for the pure
code in module_utils, and the compatibility matrix (data/compat_matrix.yml) read once, validated and resolved.

``plain(value)`` -> dict/list/str/int/float/bool; ``load_matrix_file(path)`` -> the validated matrix, cached per
(path, mtime), AnsibleFilterError when it cannot be read or is not valid; ``compat_resolve(spec, matrix=None)`` -> the
stack resolved from the matrix (module_utils/compat.py ``resolve_stack``), AnsibleFilterError on a spec that is not a
dict of torch, torchvision, cuda, driver.
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

MATRIX_PATH = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'compat_matrix.yml')

# libyaml's parser where PyYAML was built with it (the same objects as yaml.SafeLoader, parsed in C); the collection's
# data files (the matrix here, the roles' argument specs in role_specs.py) are read with it.
SAFE_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)

_CACHE = {}


def load_matrix_file(path=MATRIX_PATH):
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
                data = yaml.load(handle, Loader=SAFE_LOADER)  # nosec B506: a safe loader
            _CACHE.clear()
            _CACHE[key] = load_matrix(data)
        except (yaml.YAMLError, MatrixError) as exc:
            raise AnsibleFilterError('%s: %s' % (path, exc))
    return _CACHE[key]


def plain(value):
    """Ansible's lazy/tagged containers and scalars as plain dict/list/str/int/float/bool for the pure code."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
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
    spec = plain(spec)
    unknown = sorted(set(spec) - set(('torch', 'torchvision', 'cuda', 'driver')))
    if unknown:
        raise AnsibleFilterError('compat_resolve: unknown keys %s (allowed: torch, torchvision, cuda, driver)'
                                 % ', '.join(unknown))
    if matrix is None:
        data = load_matrix_file()
    else:
        try:
            data = load_matrix(plain(matrix))
        except MatrixError as exc:
            raise AnsibleFilterError(str(exc))
    return resolve_stack(data, spec.get('torch'), torchvision=spec.get('torchvision'),
                         cuda=spec.get('cuda'), driver=spec.get('driver'))
