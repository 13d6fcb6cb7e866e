# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""preload: returns its input unchanged; templated in the first play of every entry point (playbooks/validate.yml)
so that Ansible's main process loads, once and before it forks its workers, this collection's filters, the other
plugins the roles' templates use, the compatibility matrix and the roles' argument specs.
Documentation: preload.yml beside this; the measurement: benchmarks/filter_preload.sh."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.plugins.loader import filter_loader, test_loader

from ansible_collections.ddp.cluster.plugins.plugin_utils.compat_data import load_matrix_file
from ansible_collections.ddp.cluster.plugins.plugin_utils.role_specs import role_specs

# Jinja plugins the roles' templates use from outside this collection, one name per set that Ansible loads whole:
# any test (`is defined`, `is version`, `is file`...) makes a worker import every ansible-core test plugin file, and
# any community.general filter (dict_kv, version_sort) every filter file of community.general.
PLUGINS = ((test_loader, "ansible.builtin.version"), (filter_loader, "community.general.dict_kv"))


def load_once():
    """Load :data:`PLUGINS`, the compatibility matrix (``compat_data.load_matrix_file``) and the roles' argument
    specs (``role_specs``) into this process; each caches what it loaded, so a second call costs a lookup. What does
    not load is left to the task that needs it, which reports the error as it would without this (the validate
    stage names a matrix or a spec file that cannot be read)."""
    for loader, name in PLUGINS:
        try:
            loader.get(name)
        except Exception:  # pylint: disable=broad-except  # a worker loads it again and reports it
            pass
    for read in (load_matrix_file, role_specs):
        try:
            read()
        except AnsibleFilterError:
            pass


def preload(value):
    """The value as given (any type); loads what :func:`load_once` names first."""
    load_once()
    return value


class FilterModule(object):
    """ddp.cluster preload filter."""

    def filters(self):
        return {"preload": preload}
