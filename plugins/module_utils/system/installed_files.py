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

import hashlib
import posixpath
import re
from collections.abc import Mapping


_STATES = ("file", "directory")
# Octal permission text as the file module takes it: three or four digits, optionally one leading zero more
# ("755", "0755", "01777").
_MODE = re.compile(r"0?[0-7]{3,4}")


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


def directory_wants(paths, owner="root", group=None, mode="0755"):
    """The wanted entries of folders that one owner holds with one mode, as :func:`differing` takes them.

    :param paths: absolute folder paths (str), in the order a role creates them.
    :param owner: user name; ``group`` defaults to it (the user's own group, as useradd makes it).
    :param mode: octal text, e.g. "0755" (an int would be read as decimal by the file module: refused).
    :returns: ``[{"path", "state": "directory", "owner", "group", "mode"}, ...]`` in the order of ``paths``.
    :raises ValueError: a path that is not absolute text, an owner or group that is empty or not text, or a mode
        that is not octal text.
    """
    return [dict(_want(path, owner, group, mode), state="directory") for path in _paths(paths)]


def file_wants(paths, contents, owner="root", group=None, mode="0644"):
    """The wanted entries of files as a role writes them, with the SHA-1 of each one's content.

    The checksum is SHA-1 of the content's UTF-8 bytes (undecodable bytes kept as surrogate escapes), which is what
    ``ansible.builtin.find`` reports for the file written from that text and what Ansible's ``hash('sha1')`` filter
    gives for it.

    :param paths: absolute file paths (str).
    :param contents: one text (str, or bytes as read) per path, in the same order: what the role writes there.
    :param owner: user name; ``group`` defaults to it.
    :param mode: octal text, e.g. "0644".
    :returns: ``[{"path", "state": "file", "checksum", "owner", "group", "mode"}, ...]`` in the order of ``paths``.
    :raises ValueError: as :func:`directory_wants`, and where ``contents`` is not one text per path.
    """
    paths = _paths(paths)
    contents = _listed(contents, "contents, one per path")
    if len(contents) != len(paths):
        raise ValueError("%d path(s) and %d content(s) given: one content per path" % (len(paths), len(contents)))
    out = []
    for path, content in zip(paths, contents):
        if isinstance(content, str):
            content = content.encode("utf-8", "surrogateescape")
        elif not isinstance(content, bytes):
            raise ValueError("the content for %s is %s, not text" % (path, type(content).__name__))
        out.append(dict(_want(path, owner, group, mode), state="file", checksum=hashlib.sha1(content).hexdigest()))
    return out


def _listed(values, what):
    # a list, tuple or generator (Jinja's map); one text or a mapping is refused, not taken letter by letter or key
    # by key
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
        raise ValueError("wants need a list of %s, got %s" % (what, type(values).__name__))
    return list(values)


def _paths(paths):
    paths = _listed(paths, "paths")
    for path in paths:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError("a wanted path must be absolute text, got %r" % (path,))
    return paths


def _want(path, owner, group, mode):
    group = owner if group is None else group
    for what, name in (("owner", owner), ("group", group)):
        if not isinstance(name, str) or not name.strip():
            raise ValueError("the %s of %s must be a name (text), got %r" % (what, path, name))
    if not isinstance(mode, str) or not _MODE.fullmatch(mode):
        raise ValueError("the mode of %s must be octal text such as '0755', got %r" % (path, mode))
    return {"path": path, "owner": owner, "group": group, "mode": mode}


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
