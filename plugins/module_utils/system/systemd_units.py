# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which systemd units are not started and enabled, from one ``systemctl show`` of several units (pure).

Used by roles that keep several daemons running (the slurm role: munge, slurmctld, slurmd): one read of their
state, and ``ansible.builtin.systemd_service`` only for the units that need it, instead of one module call per
unit on a run that changes nothing.
"""
from __future__ import annotations


def parse_show(text):
    """``systemctl show --property=Id,...`` of several units -> ``{Id: {property: value}}``.

    :param text: the command's stdout: one block of ``Property=value`` lines per unit, blocks separated by an
        empty line, in the order the units were named (systemd orders the properties itself).
    :returns: a dict keyed by each block's ``Id`` (``munge.service``); a block without ``Id`` is skipped.
    """
    units = {}
    for block in str(text).replace("\r\n", "\n").split("\n\n"):
        props = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                props[key.strip()] = value.strip()
        if props.get("Id"):
            units[props["Id"]] = props
    return units


def to_start(text, names, enabled=True):
    """The units of ``names`` that are not active and enabled (with ``enabled`` false: not active).

    :param text: stdout of ``systemctl show --property=Id,ActiveState,UnitFileState <units>``.
    :param names: unit names as the role starts them (``munge`` or ``munge.service``).
    :param enabled: whether a unit that runs but does not start at boot is named too (``systemctl is-enabled``
        other than ``enabled``); false names only the units that are not ``ActiveState=active``, as
        ``systemctl is-active`` would answer them.
    :returns: the names, in their order, whose unit is missing from ``text``, not ``ActiveState=active``, or
        (with ``enabled``) not ``UnitFileState=enabled`` (a unit that is not installed reads an empty
        UnitFileState).
    """
    units = parse_show(text)
    out = []
    for name in names:
        unit = name if "." in name else name + ".service"
        props = units.get(unit, {})
        if props.get("ActiveState") != "active" or (enabled and props.get("UnitFileState") != "enabled"):
            out.append(name)
    return out
