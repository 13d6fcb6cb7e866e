# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""paths_todo: the wanted files and folders a node does not hold as wanted; the comparison is
plugins/module_utils/system/installed_files.py (pure, unit-tested). Documentation: paths_todo.yml beside this."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.system import installed_files


def paths_todo(found, wanted):
    """find's files, the wanted files and folders -> the wanted paths that are missing or differ."""
    try:
        return installed_files.differing(found, wanted)
    except (AttributeError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("paths_todo: %s" % exc)


class FilterModule(object):
    """ddp.cluster file filters."""

    def filters(self):
        return {"paths_todo": paths_todo}
