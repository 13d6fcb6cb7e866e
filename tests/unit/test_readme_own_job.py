"""The README's own-job section has the shape tests/integration/test_readme_job.py runs, and names what exists."""
from __future__ import annotations

import os

import yaml

from readme_blocks import ROOT, own_job


def test_own_job_section_is_runnable_as_written():
    blocks = own_job()
    compile(blocks["script"], "train.py", "exec")  # the README's train.py is valid Python
    clone, head = blocks["controller"], blocks["head"]
    assert clone[0].startswith(".venv/bin/ansible ddp_nodes ") and "src=train.py" in clone[0]
    assert [c for c in clone if c.startswith("ssh ")] == [clone[-1]]
    with open(os.path.join(ROOT, "roles", "slurm", "defaults", "main.yml"), encoding="utf-8") as handle:
        bin_dir = yaml.safe_load(handle)["slurm_bin_dir"]
    program = head[0].split()[0]
    assert program == bin_dir + "/ddp-submit" and os.access(os.path.join(ROOT, "roles", "slurm", "files",
                                                                         "ddp-submit"), os.X_OK)
    assert "train.py" in head[0].split()
