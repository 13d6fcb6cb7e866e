# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of ddp.cluster.installed_files: ansible.builtin.find, where a folder that is not there is an answer.

The roles read every file and folder they install with one find over the parent folders (then write only what
``ddp.cluster.paths_todo`` says differs). On a node the role has not set up yet some of those folders do not
exist; find then warns "Skipped '<folder>' path due to this access issue: '<folder>' is not a directory" for
each, on every first run, although a missing folder is exactly what the read is for. This action runs the same
find module and moves those warnings into ``not_directories``; every other warning (a folder it may not read)
stays a warning.
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase

NOT_A_DIRECTORY = "is not a directory"


def warning_text(warning):
    """The message of a task warning: a string (ansible-core < 2.19), or a WarningSummary (2.19), as an object
    (``.event.msg``) or as the module's JSON gives it (``{"event": {"msg": ...}}``)."""
    if isinstance(warning, dict):
        event = warning.get("event")
        return str((event.get("msg") if isinstance(event, dict) else None) or warning.get("msg") or "")
    event = getattr(warning, "event", None)
    if event is not None:
        return str(getattr(event, "msg", "") or "")
    return str(warning)


def quiet_missing(result):
    """Move find's "is not a directory" warnings of ``result`` into ``not_directories`` (sorted paths).

    :param result: the find module's result (``skipped_paths``: {path: reason}, ``warnings``, ``msg``).
    :returns: the same dict, changed in place: ``not_directories`` added, those warnings left out of
        ``warnings`` (the key removed when none is left), ``msg`` "All paths examined" when no other path
        was skipped.
    """
    skipped = result.get("skipped_paths") or {}
    missing = sorted(path for path, why in skipped.items() if NOT_A_DIRECTORY in str(why))
    result["not_directories"] = missing
    if not missing:
        return result
    kept = [w for w in result.get("warnings") or []
            if not (NOT_A_DIRECTORY in warning_text(w) and any("'%s'" % path in warning_text(w) for path in missing))]
    if kept:
        result["warnings"] = kept
    else:
        result.pop("warnings", None)
    if len(missing) == len(skipped):
        result["msg"] = "All paths examined"
    return result


class ActionModule(ActionBase):
    """Run ansible.builtin.find with the task's arguments; see :func:`quiet_missing`."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("paths", "patterns", "file_type", "hidden", "get_checksum", "recurse", "depth"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        result.update(self._execute_module(module_name="ansible.builtin.find", module_args=dict(self._task.args),
                                           task_vars=task_vars))
        return quiet_missing(result)
