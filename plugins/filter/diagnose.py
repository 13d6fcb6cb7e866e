# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that read a command's or a log's text: thin wrappers over plugins/module_utils/nccl/runtime_failures.py and
text_diagnosis.py (pure, unit-tested), for the benchmark's post-mortem and the job script's log reader."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import runtime_failures
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import text_diagnosis


def runtime_problems(text, subject="job", world_size=None):
    """Problems of a failed run's log: watchdog timeouts, NCCL errors, c10d store, Gloo, torchrun failures."""
    if isinstance(text, (list, tuple)):
        text = "\n".join(str(line) for line in text)
    return runtime_failures.runtime_problems(text or "", subject, int(world_size) if world_size else None)


def diagnose_text(text, kind="auto", context=None):
    """{kind, verdict, errors, warnings, problems, facts} of any text ddp-health --diagnose reads."""
    try:
        return text_diagnosis.diagnose_text(text or "", kind or "auto", context or {})
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    """ddp.cluster text diagnosis filters."""

    def filters(self):
        return {"runtime_problems": runtime_problems, "diagnose_text": diagnose_text}
