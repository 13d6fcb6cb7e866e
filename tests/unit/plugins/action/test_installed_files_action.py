"""ddp.cluster.installed_files (action): find's own result on a missing folder, its warning moved to not_directories."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

from ansible_collections.ddp.cluster.plugins.action.installed_files import quiet_missing, warning_text


def run_find(tmp_path, args):
    """The real ansible.builtin.find module, run in its own Python process as on a node, and its JSON result
    (in this process the action plugin's controller imports would take the module's warnings)."""
    args_file = tmp_path / "find-args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    done = subprocess.run([sys.executable, "-m", "ansible.modules.find", str(args_file)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_a_missing_folder_is_an_answer_not_a_warning(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ddp-health").write_text("#!/bin/sh\n")
    missing = str(tmp_path / "lib" / "ddp-health")
    result = run_find(tmp_path, {"paths": [str(tmp_path), str(tmp_path / "bin"), missing],
                                 "patterns": ["bin", "lib", "ddp-health"], "file_type": "any", "get_checksum": True})
    assert any(missing in warning_text(w) for w in result["warnings"])  # what find itself says
    out = quiet_missing(result)
    assert out["not_directories"] == [missing]
    assert "warnings" not in out and out["msg"] == "All paths examined"
    assert sorted(os.path.basename(f["path"]) for f in out["files"]) == ["bin", "ddp-health"]


def test_a_file_where_a_folder_is_wanted_is_reported_too(tmp_path):
    (tmp_path / "ddp").write_text("not a folder\n")
    result = quiet_missing(run_find(tmp_path, {"paths": [str(tmp_path / "ddp")], "patterns": ["*"]}))
    assert result["not_directories"] == [str(tmp_path / "ddp")] and "warnings" not in result


def test_other_warnings_stay(tmp_path):
    result = run_find(tmp_path, {"paths": [str(tmp_path / "none")], "patterns": ["*"]})
    result["warnings"].append("Skipped '/root/x' path due to this access issue: [Errno 13] Permission denied")
    result["skipped_paths"]["/root/x"] = "[Errno 13] Permission denied"
    out = quiet_missing(result)
    assert out["not_directories"] == [str(tmp_path / "none")]
    assert [warning_text(w) for w in out["warnings"]] == [
        "Skipped '/root/x' path due to this access issue: [Errno 13] Permission denied"]
    assert out["msg"] != "All paths examined"


def test_warning_shapes_of_every_ansible_core():
    summary = types.SimpleNamespace(event=types.SimpleNamespace(msg="Skipped '/a' path: '/a' is not a directory"))
    for warning in ("Skipped '/a' path: '/a' is not a directory", {"msg": "Skipped '/a' path: '/a' is not a directory"},
                    summary):
        out = quiet_missing({"skipped_paths": {"/a": "'/a' is not a directory"}, "warnings": [warning],
                             "msg": "Not all paths examined, check warnings for details"})
        assert "warnings" not in out and out["not_directories"] == ["/a"]


def test_nothing_missing_changes_nothing():
    result = {"files": [], "skipped_paths": {}, "msg": "All paths examined"}
    assert quiet_missing(dict(result)) == dict(result, not_directories=[])
