# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which shipped files a node already holds as shipped (pure; the filter installed_as_shipped reads the files).

Used by roles that install several small files of the collection on every node: one ``ansible.builtin.find``
(``get_checksum: true``) reads the installed ones, and only the others are copied, so that a run that changes
nothing costs one module call per node instead of one copy round trip per file.
"""
from __future__ import annotations


def unchanged(found, shipped, mode, owner, group):
    """Names of the shipped files that are installed with the same content, mode, owner and group.

    :param found: ``files`` of ``ansible.builtin.find`` with ``get_checksum: true`` (dicts with ``path``,
        ``checksum`` (SHA-1 hex), ``mode`` ("0644"), ``pw_name``, ``gr_name``); other files are ignored.
    :param shipped: ``{file name: SHA-1 hex}`` of the files as the collection ships them.
    :param mode: the wanted mode, octal text ("0644"); ``owner``, ``group``: the wanted names.
    :returns: sorted file names (a subset of ``shipped``'s keys).
    :raises ValueError: a found entry without ``path``, or ``get_checksum`` was off (no ``checksum``).
    """
    wanted_mode = "%04o" % int(str(mode), 8)
    out = set()
    for entry in found:
        if "path" not in entry or "checksum" not in entry:
            raise ValueError("find results need path and checksum (get_checksum: true), got %s" % sorted(entry))
        name = str(entry["path"]).rstrip("/").rsplit("/", 1)[-1]
        if name not in shipped or entry["checksum"] != shipped[name]:
            continue
        if "%04o" % int(str(entry.get("mode", "0")), 8) != wanted_mode:
            continue
        if entry.get("pw_name") == owner and entry.get("gr_name") == group:
            out.add(name)
    return sorted(out)
