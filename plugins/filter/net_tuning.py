# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of the net_tuning role: a thin wrapper over plugins/module_utils/system/sysctl_plan.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import sysctl_plan


def net_tuning_plan(current, file_text, wanted):
    """{file, now}: the keys whose sysctl file line, or current value, differs from the wanted one."""
    if not isinstance(wanted, dict):
        raise AnsibleFilterError("net_tuning_plan expects the wanted keys as a dict, got %s" % type(wanted).__name__)
    for name, value in (("current", current), ("file_text", file_text)):
        if not isinstance(value, str):
            raise AnsibleFilterError("net_tuning_plan: %s must be text, got %s" % (name, type(value).__name__))
    return sysctl_plan.plan(wanted, current, file_text)


class FilterModule(object):
    """ddp.cluster net_tuning filters."""

    def filters(self):
        return {"net_tuning_plan": net_tuning_plan}
