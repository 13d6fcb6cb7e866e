"""The collection's declared dependencies as artifact tarballs, made from the `ansible` package's copies.

Galaxy cannot be reached from CI here, but the `ansible` PyPI package (requirements.txt) ships installed
copies of the collections ddp.cluster depends on, with the MANIFEST.json and FILES.json of the artifact
Galaxy serves. The package leaves out what only their developers need (tests/, CI files), so the copy is
packed again: every file it does ship must have the SHA-256 that the original FILES.json gives it (else
this fails), FILES.json is cut down to those files, and MANIFEST.json gets the new FILES.json checksum.
`ansible-galaxy collection install` then checks each file of the tarball against it as for any artifact.
Only the collections named in galaxy.yml are packed, each checked against its version range first.

    python tests/collection/deps.py OUTDIR     writes OUTDIR/<namespace>-<name>-<version>.tar.gz
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile

import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def declared():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["dependencies"]


def shipped_copy(name):
    """Folder of the `ansible` package's copy of collection `name` (never this clone)."""
    import ansible_collections  # pylint: disable=import-outside-toplevel

    namespace, collection = name.split(".")
    clone = os.path.realpath(os.path.join(ROOT, "collections", "ansible_collections"))
    for base in ansible_collections.__path__:
        if os.path.realpath(base) == clone:
            continue
        folder = os.path.join(base, namespace, collection)
        if os.path.isfile(os.path.join(folder, "MANIFEST.json")):
            return folder
    raise LookupError("%s is not in the ansible package (pip install -r requirements.txt)" % name)


def _sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _add_bytes(archive, name, data):
    member = tarfile.TarInfo(name)
    member.size, member.mode = len(data), 0o644
    archive.addfile(member, io.BytesIO(data))


def pack(folder, outdir):
    """Artifact tarball of an installed collection: the files it ships, checked against FILES.json."""
    with open(os.path.join(folder, "MANIFEST.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    with open(os.path.join(folder, "FILES.json"), encoding="utf-8") as handle:
        files = json.load(handle)
    present = [f for f in files["files"] if f["name"] == "." or os.path.lexists(os.path.join(folder, f["name"]))]
    changed = [f["name"] for f in present if f["ftype"] == "file" and _sha256(os.path.join(folder, f["name"])) != f["chksum_sha256"]]
    if changed:
        raise ValueError("%s: files differ from their FILES.json checksums: %s" % (folder, ", ".join(changed[:10])))
    files_json = json.dumps(dict(files, files=present), indent=4).encode("utf-8")
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_json).hexdigest()
    info = manifest["collection_info"]
    path = os.path.join(outdir, "%s-%s-%s.tar.gz" % (info["namespace"], info["name"], info["version"]))
    with tarfile.open(path, "w:gz") as archive:
        _add_bytes(archive, "MANIFEST.json", json.dumps(manifest, indent=4).encode("utf-8"))
        _add_bytes(archive, "FILES.json", files_json)
        for entry in present:
            if entry["name"] != ".":
                archive.add(os.path.join(folder, entry["name"]), arcname=entry["name"], recursive=False)
    return info["version"], path


def dependency_artifacts(outdir):
    """{name: (version, tarball)} for every galaxy.yml dependency; raises when a copy is out of range."""
    made = {}
    for name, spec in sorted(declared().items()):
        folder = shipped_copy(name)
        with open(os.path.join(folder, "MANIFEST.json"), encoding="utf-8") as handle:
            version = json.load(handle)["collection_info"]["version"]
        if not meets_requirements(version, spec):
            raise ValueError("%s %s from the ansible package is outside the declared range %s" % (name, version, spec))
        made[name] = pack(folder, outdir)
    return made


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    for dep, (ver, tarball) in dependency_artifacts(sys.argv[1]).items():
        print("%s %s %s" % (dep, ver, tarball))
