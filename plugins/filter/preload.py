# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""preload: returns its input unchanged; templated in the first play of every entry point (playbooks/validate.yml)
so that Ansible's main process loads this collection's filters once, before it forks its workers.
Documentation: preload.yml beside this; the measurement: benchmarks/filter_preload.sh."""
from __future__ import annotations


def preload(value):
    """The value as given (any type)."""
    return value


class FilterModule(object):
    """ddp.cluster preload filter."""

    def filters(self):
        return {"preload": preload}
