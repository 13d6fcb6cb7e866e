"""ddp_dist.py (roles/pytorch_env/files): what ddp_nccl_allreduce.py and ddp_bench.py share, imported by both."""
from __future__ import annotations

import json
import os
import stat

import pytest

from role_files import ROOT, load

ddp_dist = load("pytorch_env", "ddp_dist.py")


def test_both_programs_use_the_one_copy():
    bench = load("ddp_benchmark", "ddp_bench.py")
    assert bench.all_gather_objects.__module__ == "ddp_dist" and bench.write_json_atomic.__module__ == "ddp_dist"
    assert os.path.samefile(bench._SHARED_DIR, os.path.join(ROOT, "roles", "pytorch_env", "files"))
    for name in ("ddp_bench.py", "ddp_nccl_allreduce.py"):
        folder = "ddp_benchmark" if name == "ddp_bench.py" else "pytorch_env"
        with open(os.path.join(ROOT, "roles", folder, "files", name)) as handle:
            source = handle.read()
        assert "    from ddp_dist import all_gather_objects, write_json_atomic" in source or \
            "\nfrom ddp_dist import all_gather_objects, write_json_atomic" in source
        assert "def all_gather_objects" not in source and "def write_json_atomic" not in source


def test_write_json_atomic(tmp_path):
    target = tmp_path / "out" / "result.json"
    ddp_dist.write_json_atomic(str(target), {"b": 1, "a": [1, 2]}, prefix=".t.")
    assert json.loads(target.read_text()) == {"a": [1, 2], "b": 1}
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o644
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["result.json"]

    class Unserialisable(object):
        pass

    with pytest.raises(TypeError):
        ddp_dist.write_json_atomic(str(target), {"x": Unserialisable()}, prefix=".t.")
    assert json.loads(target.read_text()) == {"a": [1, 2], "b": 1}  # the old file stands, no temp file left
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["result.json"]
