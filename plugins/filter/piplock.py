# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the --require-hashes lock file of a wheelhouse, from pip's installation report."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import piplock


def pip_hash_lock(report):
    """``{lock, problems}`` from pip's ``--report`` (see the sidecar documentation)."""
    if not isinstance(report, dict):
        raise AnsibleFilterError("pip_hash_lock expects pip's report as a mapping (from_json), got %s"
                                 % type(report).__name__)
    return piplock.hash_lock(report)


class FilterModule(object):
    """ddp.cluster pip filters."""

    def filters(self):
        return {"pip_hash_lock": pip_hash_lock}
