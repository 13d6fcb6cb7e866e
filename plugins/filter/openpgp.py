# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: check a fetched repository signing key against its pinned fingerprint."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import openpgp


def openpgp_pin_problems(content, pinned, variable, source, code):
    """Problems when ``content`` is not exactly the key pinned in ``variable`` (see the sidecar documentation)."""
    if not isinstance(content, (str, bytes)):
        raise AnsibleFilterError("openpgp_pin_problems expects the key file's content, got %s" % type(content).__name__)
    for name, value in (("variable", variable), ("source", source), ("code", code)):
        if not isinstance(value, str) or not value:
            raise AnsibleFilterError("openpgp_pin_problems: %s must be a non-empty string" % name)
    return openpgp.pin_problems(content, pinned, variable, source, code)


class FilterModule(object):
    """ddp.cluster OpenPGP filters."""

    def filters(self):
        return {"openpgp_pin_problems": openpgp_pin_problems}
