# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which managed files and folders a node already holds as wanted (pure; the filters in plugins/filter/files.py).

Used by roles that install several files and folders on every node: one ``ansible.builtin.find``
(``get_checksum: true``) reads them, and only those that differ are handed to ``ansible.builtin.copy``,
``template`` or ``file``, so that a run that changes nothing costs one module call per node instead of one
or two round trips per path. Those modules still make every change (and report it): a path wrongly named
here as differing only costs their usual round trip, which reports no change.
"""
from __future__ import annotations

import posixpath


_STATES = ("file", "directory")


def differing(found, wanted):
    """Paths of ``wanted`` that the node does not hold as wanted.

    :param found: ``files`` of ``ansible.builtin.find`` (``file_type: any``, ``get_checksum: true``) run on the
        wanted paths' parent folders with their base names as patterns: dicts with ``path``, ``isreg``,
        ``isdir``, ``mode`` ("0644"), ``pw_name``, ``gr_name`` and, for regular files, ``checksum`` (SHA-1 hex).
        Entries for other paths are ignored.
    :param wanted: dicts with ``path`` (absolute), ``state`` ("file" or "directory"), and optionally ``mode``
        (octal text), ``owner``, ``group`` (names) and, for a file, ``checksum`` (SHA-1 hex of its content, as the
        role would write it). A key left out is not compared.
    :returns: the wanted paths, in their order, that are missing, of another type (a link included: find does
        not follow links), or differ in content, mode, owner or group.
    :raises ValueError: a wanted entry without an absolute ``path`` or with another ``state``; a file with a
        ``checksum`` found without one (find ran without ``get_checksum``).
    """
    index = {}
    for entry in found:
        if "path" not in entry:
            raise ValueError("find results need path, got %s" % sorted(entry))
        index[_norm(entry["path"])] = entry
    todo = []
    for want in wanted:
        path = str(want.get("path", ""))
        state = want.get("state", "file")
        if not path.startswith("/") or state not in _STATES:
            raise ValueError("a wanted path needs an absolute path and state file or directory, got %r" % (want,))
        entry = index.get(_norm(path))
        if entry is None or not _holds(entry, want, state):
            todo.append(path)
    return todo


def _norm(path):
    # find reports normalised paths; a wanted path may carry a trailing or doubled slash from a setting
    return posixpath.normpath(str(path))


def _holds(entry, want, state):
    if state == "directory":
        if not entry.get("isdir") or entry.get("islnk"):
            return False
    else:
        if not entry.get("isreg") or entry.get("islnk"):
            return False
        if want.get("checksum") is not None:
            if "checksum" not in entry:
                raise ValueError("find ran without get_checksum: no checksum for %s" % entry["path"])
            if entry["checksum"] != want["checksum"]:
                return False
    if want.get("mode") is not None and "%04o" % int(str(entry.get("mode", "0")), 8) != "%04o" % int(str(want["mode"]), 8):
        return False
    if want.get("owner") is not None and entry.get("pw_name") != want["owner"]:
        return False
    if want.get("group") is not None and entry.get("gr_name") != want["group"]:
        return False
    return True
