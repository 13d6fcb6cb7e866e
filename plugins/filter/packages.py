# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package filters: a thin wrapper over plugins/module_utils/system/packages.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import packages


def dpkg_installed(lines):
    """Installed package names from ``dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n'`` output or its lines."""
    try:
        return packages.dpkg_installed(lines)
    except TypeError as exc:
        raise AnsibleFilterError("dpkg_installed %s" % exc)


class FilterModule(object):
    """ddp.cluster package filters."""

    def filters(self):
        return {"dpkg_installed": dpkg_installed}
