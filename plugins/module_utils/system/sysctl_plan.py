# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which sysctl keys need the kernel or the sysctl file changed (pure parsing, no I/O).

The net_tuning role reads every key's value (``sysctl <key> ...``) and the sysctl file in one call per node, then
calls ``ansible.posix.sysctl`` only for the keys whose file line or current value differs from the wanted one: a run
that changes nothing costs that one read per node instead of one stat and one module call per key.

Formats: ``sysctl(8)`` prints ``key = value`` per key it can read (values of several numbers separated by tabs) and
an error on stderr for a key it cannot; ``sysctl.d(5)`` files hold ``key = value`` lines (spaces around ``=``
optional), comments start with ``#`` or ``;``, and a later line for the same key wins. Values are compared with
their whitespace collapsed to single spaces (the kernel prints tabs, the file has spaces).
"""
from __future__ import annotations


def normalize(value):
    """A value as the kernel compares it: whitespace-separated fields joined by one space."""
    return " ".join(str(value).split())


def _pairs(text, comments):
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line[0] in comments or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = normalize(value)
    return out


def parse_sysctl_output(text):
    """``{key: value}`` from ``sysctl key ...`` output (keys it could not read are absent)."""
    return _pairs(text, "")


def parse_sysctl_file(text):
    """``{key: value}`` from a sysctl.d file (the last line of a key wins)."""
    return _pairs(text, "#;")


def plan(wanted, current_text, file_text):
    """What to change.

    :param wanted: ``{key: value}`` (the role's ``net_tuning_sysctls``).
    :param current_text: ``sysctl <keys>`` output; a key missing from it counts as differing.
    :param file_text: the sysctl file's content ('' when it does not exist).
    :returns: ``{"file": [keys whose file line is missing or differs], "now": [keys whose value differs now]}``,
        each in the order of ``wanted``.
    """
    current, written = parse_sysctl_output(current_text), parse_sysctl_file(file_text)
    out = {"file": [], "now": []}
    for key, value in wanted.items():
        want = normalize(value)
        if written.get(key) != want:
            out["file"].append(key)
        if current.get(key) != want:
            out["now"].append(key)
    return out
