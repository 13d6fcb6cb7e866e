# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which packages dpkg has installed, from ``dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n' NAME...`` (pure).

The roles ask dpkg before apt (as they ask ``rpm -q`` before dnf on EL), so that apt, which loads its cache and may
refresh the package lists first, runs only for a missing package. ``db:Status-Abbrev`` is three letters
(dpkg-query(1)): the wanted action, the package's status, an error flag; status ``i`` is installed (``ii``, or
``hi`` for a held package). A package dpkg has never seen gives no line on standard output (dpkg-query says so on
standard error and exits 1); one removed since gives ``un``, its configuration files left ``rc``.
"""
from __future__ import annotations


def dpkg_installed(lines):
    """The names of the installed packages in ``dpkg-query`` output.

    :param lines: the output's lines (list of str, as ``stdout_lines``) or the output (str).
    :returns: package names (list of str, output order) whose status letter is ``i``.
    :raises TypeError: when ``lines`` is neither.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    if not isinstance(lines, (list, tuple)):
        raise TypeError("expects dpkg-query's output or its lines, got %s" % type(lines).__name__)
    installed = []
    for line in lines:
        fields = str(line).split()
        if len(fields) == 2 and len(fields[0]) >= 2 and fields[0][1] == "i":
            installed.append(fields[1])
    return installed
