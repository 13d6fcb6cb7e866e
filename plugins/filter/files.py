# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""installed_as_shipped: reads the shipped files' SHA-1 on the controller; the comparison is
plugins/module_utils/installed_files.py (pure, unit-tested). Documentation: installed_as_shipped.yml beside this."""
from __future__ import annotations

import hashlib
import os

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils import installed_files


def installed_as_shipped(found, src_dir, mode="0644", owner="root", group="root"):
    """find's files, the folder the collection ships them from -> names already installed as shipped."""
    shipped = {}
    try:
        for entry in found:
            name = os.path.basename(str(entry.get("path", "")).rstrip("/"))
            source = os.path.join(str(src_dir), name)
            if name and os.path.isfile(source):
                with open(source, "rb") as fh:
                    shipped[name] = hashlib.sha1(fh.read()).hexdigest()  # find's checksum is SHA-1
        return installed_files.unchanged(found, shipped, mode, owner, group)
    except (AttributeError, TypeError, ValueError, OSError) as exc:
        raise AnsibleFilterError("installed_as_shipped: %s" % exc)


class FilterModule(object):
    """ddp.cluster file filters."""

    def filters(self):
        return {"installed_as_shipped": installed_as_shipped}
