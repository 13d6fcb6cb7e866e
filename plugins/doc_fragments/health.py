# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option and note text shared by the health modules (gpu_health, roce_health, nccl_health).

Use it with ``extends_documentation_fragment: [ddp.cluster.health]``; ``ddp.cluster.health.read_only``
adds the attributes of a module that changes nothing. The shape described here is built by
``plugins/module_utils/diagnosis.py``.
"""
from __future__ import annotations


class ModuleDocFragment(object):

    # fail_on, the severities and the verdict every health module returns.
    DOCUMENTATION = r"""
options:
  fail_on:
    description:
      - Lowest problem severity that fails the task. V(error) fails on errors only, V(warning) on
        warnings and errors, V(never) only reports.
      - A failed task returns the same result (RV(healthy), RV(problems) and the facts) as one that passed.
    type: str
    choices: [error, warning, never]
    default: error
notes:
  - "The health modules return one verdict shape: RV(healthy) (no problem of severity V(error)) and
    RV(problems), errors first, each C({code, severity, subject, message, fix}), beside the module's own facts."
  - "Severities: V(error) makes the node unhealthy, V(warning) is reported but leaves it healthy, V(info) is
    only recorded. Options named C(*_severity) choose the severity of one problem code (such as missing
    hardware on a test node)."
  - Every problem code is a stable identifier, listed with its cause, check and fix in the collection's
    troubleshooting guide (C(docs/troubleshooting.md), also on the collection's docs site).
"""

    # A module that only reads the node: full check mode, no diff.
    READ_ONLY = r"""
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details:
      - The module only reads the node, so check mode returns the same result; C(changed) is always false.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""
