# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which groups and users still need ``ansible.builtin.group`` / ``ansible.builtin.user``, from ``getent`` (pure).

A role reads its accounts in one command per node (``getent passwd NAME...``, a line ``--- group``, then
``getent group NAME...``) and calls the modules only for the accounts that are missing or differ in what the role
sets. A run that changes nothing then costs that one command instead of one module run per account.

Formats (passwd(5), group(5)): ``name:password:UID:GID:GECOS:home:shell`` and ``name:password:GID:members``.
"""
from __future__ import annotations

MARKER = "--- group"


def _lines(listing):
    if isinstance(listing, (list, tuple)):
        return [str(line) for line in listing]
    if isinstance(listing, str):
        return listing.splitlines()
    raise TypeError("the getent listing must be a string or a list of lines, got %s" % type(listing).__name__)


def parse_passwd(listing):
    """``{name: {"uid": int, "gid": int, "home": str, "shell": str}}`` from ``getent passwd`` (str or lines).

    Malformed lines are skipped. :raises TypeError: when ``listing`` is neither a string nor lines.
    """
    users = {}
    for line in _lines(listing):
        fields = line.rstrip("\n").split(":")
        if len(fields) >= 7 and fields[2].isdigit() and fields[3].isdigit():
            users[fields[0]] = {"uid": int(fields[2]), "gid": int(fields[3]), "home": fields[5], "shell": fields[6]}
    return users


def parse_group(listing):
    """``{name: gid}`` from ``getent group`` (str or lines). Malformed lines are skipped.

    :raises TypeError: when ``listing`` is neither a string nor lines.
    """
    groups = {}
    for line in _lines(listing):
        fields = line.rstrip("\n").split(":")
        if len(fields) >= 3 and fields[2].isdigit():
            groups[fields[0]] = int(fields[2])
    return groups


def parse_listing(listing):
    """``(users, groups)`` from the combined listing.

    :param listing: str or list of lines: ``getent passwd`` lines, the line ``--- group``, ``getent group`` lines.
    :returns: ``users``: ``{name: {"uid": int, "gid": int, "home": str, "shell": str}}``;
        ``groups``: ``{name: gid (int)}``. Malformed lines are skipped.
    :raises TypeError: when ``listing`` is neither.
    """
    lines = _lines(listing)
    split = next((i for i, line in enumerate(lines) if line.strip() == MARKER), len(lines))
    return parse_passwd(lines[:split]), parse_group(lines[split + 1:])


def account_home(listing, name):
    """The home folder the passwd part of the listing gives user ``name``, or "" where it has no such user.

    :param listing: as for :func:`parse_listing`.
    :raises TypeError: when ``listing`` is neither a string nor lines.
    """
    return parse_listing(listing)[0].get(str(name), {}).get("home", "")


def accounts_todo(listing, groups=None, users=None):
    """The wanted groups and users that the modules must still create or change.

    :param groups: ``[{"name", "gid"}]`` as given to ``ansible.builtin.group`` (``gid`` None: any id).
    :param users: ``[{"name", "uid", "group", "home", "shell"}]`` as given to ``ansible.builtin.user``
        (``group`` is the primary group's name; ``uid``, ``home`` and ``shell`` None or absent: not compared).
    :returns: ``{"groups": [...], "users": [...]}``: the given items, in order, that are missing or differ. A user
        whose primary group is missing or differs is in it, as is every user of a group that is in it.
    :raises TypeError: on a listing that is neither a string nor lines.
    """
    have_users, have_groups = parse_listing(listing)
    todo_groups = []
    for item in groups or []:
        gid = have_groups.get(item["name"])
        if gid is None or (item.get("gid") not in (None, "") and int(item["gid"]) != gid):
            todo_groups.append(item)
    regrouped = {item["name"] for item in todo_groups}
    todo_users = []
    for item in users or []:
        have = have_users.get(item["name"])
        group = item.get("group")
        differs = (
            have is None
            or (item.get("uid") not in (None, "") and int(item["uid"]) != have["uid"])
            or (group is not None and (group in regrouped or have_groups.get(group) != have["gid"]))
            or (item.get("home") not in (None, "") and item["home"] != have["home"])
            or (item.get("shell") not in (None, "") and item["shell"] != have["shell"]))
        if differs:
            todo_users.append(item)
    return {"groups": todo_groups, "users": todo_users}
