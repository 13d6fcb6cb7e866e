# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd_to_start: the units one systemctl show names as not active and enabled; the parsing is
plugins/module_utils/system/systemd_units.py (pure, unit-tested). Documentation: systemd_to_start.yml beside this."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.system import systemd_units


def systemd_to_start(text, names, enabled=True):
    """systemctl show's stdout, unit names -> the names to start (enabled false: the names not running)."""
    try:
        return systemd_units.to_start(text, names, enabled=bool(enabled))
    except (AttributeError, TypeError) as exc:
        raise AnsibleFilterError("systemd_to_start: %s" % exc)


class FilterModule(object):
    """ddp.cluster systemd filters."""

    def filters(self):
        return {"systemd_to_start": systemd_to_start}
