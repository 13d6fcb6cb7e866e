# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""paths_todo: the wanted files and folders a node does not hold as wanted; dir_wants, file_wants: those wants built
from paths (and contents). Thin wrappers over plugins/module_utils/system/installed_files.py (pure, unit-tested).
Documentation: paths_todo.yml, dir_wants.yml and file_wants.yml beside this."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.system import installed_files


def paths_todo(found, wanted):
    """find's files, the wanted files and folders -> the wanted paths that are missing or differ."""
    try:
        return installed_files.differing(found, wanted)
    except (AttributeError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("paths_todo: %s" % exc)


def dir_wants(paths, owner="root", group=None, mode="0755"):
    """folder paths -> the wants paths_todo takes (state directory, one owner, group and mode)."""
    try:
        return installed_files.directory_wants(paths, owner, group, mode)
    except ValueError as exc:
        raise AnsibleFilterError("dir_wants: %s" % exc)


def file_wants(paths, contents, owner="root", group=None, mode="0644"):
    """file paths and what is written to each -> the wants paths_todo takes (with each content's SHA-1)."""
    try:
        return installed_files.file_wants(paths, contents, owner, group, mode)
    except ValueError as exc:
        raise AnsibleFilterError("file_wants: %s" % exc)


class FilterModule(object):
    """ddp.cluster file filters."""

    def filters(self):
        return {"paths_todo": paths_todo, "dir_wants": dir_wants, "file_wants": file_wants}
