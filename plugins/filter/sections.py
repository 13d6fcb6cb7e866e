# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""output_sections: a thin wrapper over plugins/module_utils/system/sections.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import sections


def output_sections(text, separators):
    """The outputs of one shell read between its separator lines (len(separators) + 1 strings)."""
    try:
        return sections.split_sections(text, list(separators) if isinstance(separators, (list, tuple)) else separators)
    except TypeError as exc:
        raise AnsibleFilterError("output_sections: %s" % exc)


class FilterModule(object):
    """ddp.cluster filter for reads that print several outputs in one call."""

    def filters(self):
        return {"output_sections": output_sections}
