# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pip's hash-checking mode: the lock file of a wheelhouse (pure, no I/O).

The controller resolves the nodes' requirements against the wheelhouse alone (``pip install --dry-run
--no-index --find-links <wheelhouse> --report -``, for the nodes' Python and platform); pip's report names every
wheel the nodes will install, with the sha256 pip computed from the file on the controller. :func:`hash_lock`
turns that report into a requirements file that pins each one (``name==version --hash=sha256:<hex>``), which
the nodes install with ``pip install --require-hashes -r <lock>``: a wheel changed after the controller read it
(on the controller, in the copy, on the node) is refused by pip, as is anything the lock does not name.
"""
from __future__ import annotations

import re

__all__ = ["hash_lock"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_HEADER = ("# Managed by ddp.cluster.pytorch_env: every wheel the nodes install from the wheelhouse, pinned by the\n"
           "# sha256 the controller computed. Install with: pip install --require-hashes --no-index "
           "--find-links <wheelhouse> -r <this file>\n")


def _problem(code, message, fix):
    return {"code": code, "variable": "pytorch_env_require_hashes", "message": message, "fix": fix}


def _normalize(name):
    """PEP 503 normalised project name (``Charset_Normalizer`` -> ``charset-normalizer``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def hash_lock(report):
    """``{"lock": text, "problems": [...]}`` from pip's installation report (``--report``, format version 1).

    Every item must come from a wheel file (the wheelhouse) and carry a sha256; otherwise the item is a problem
    and the lock is empty (a partial lock would fail on the nodes with a less clear message).
    """
    if not isinstance(report, dict) or str(report.get("version")) != "1" or not isinstance(report.get("install"), list):
        return {"lock": "", "problems": [_problem(
            "PYTORCH_ENV_LOCK",
            "pip's report is not an installation report of format version 1 (pip install --report, pip >= 22.2)",
            "upgrade pip on the controller (the Python that runs ansible-playbook), or set "
            "pytorch_env_require_hashes: false.")]}
    lines, problems, seen = [], [], {}
    for item in report["install"]:
        metadata = item.get("metadata") or {}
        name, version = metadata.get("name"), metadata.get("version")
        info = item.get("download_info") or {}
        url = str(info.get("url") or "")
        archive = info.get("archive_info") or {}
        digest = str((archive.get("hashes") or {}).get("sha256") or "")
        if not digest and str(archive.get("hash") or "").startswith("sha256="):
            digest = str(archive["hash"])[len("sha256="):]
        if not name or not version:
            problems.append(_problem(
                "PYTORCH_ENV_LOCK", "pip's report has an item without a name or version (%s)" % (url or item,),
                "report it: the wheelhouse holds a wheel pip cannot read."))
            continue
        if not url.startswith("file:") or not url.endswith(".whl"):
            problems.append(_problem(
                "PYTORCH_ENV_LOCK",
                "%s %s would not come from a wheel in the wheelhouse (%s)" % (name, version, url or "no URL"),
                "fill the wheelhouse again (remove its .ddp-* marker files) so that it holds every wheel."))
            continue
        if not _SHA256.match(digest.lower()):
            problems.append(_problem(
                "PYTORCH_ENV_LOCK", "pip's report gives no sha256 for %s %s (%s)" % (name, version, url),
                "upgrade pip on the controller (pip >= 23.0 hashes local wheels in its report)."))
            continue
        key = _normalize(name)
        if key in seen:
            problems.append(_problem(
                "PYTORCH_ENV_LOCK", "pip's report names %s twice (%s and %s)" % (key, seen[key], version),
                "report it: one resolution installs each project once."))
            continue
        seen[key] = version
        lines.append("%s==%s --hash=sha256:%s" % (key, version, digest.lower()))
    if problems:
        return {"lock": "", "problems": problems}
    if not lines:
        return {"lock": "", "problems": [_problem(
            "PYTORCH_ENV_LOCK", "pip's report installs nothing: there is nothing to pin",
            "check pytorch_env_extra_packages and the torch stack.")]}
    return {"lock": _HEADER + "\n".join(sorted(lines)) + "\n", "problems": []}
