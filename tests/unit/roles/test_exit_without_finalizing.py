"""The training programs' exit (ddp_train.py, ddp_bench.py): the status and the output kept, Python's shutdown skipped.

Both programs end through ``exit_without_finalizing`` so that a Gloo worker thread still releasing the last
all-reduce cannot abort the process during interpreter shutdown (pytorch/pytorch#117762). What is checked here, in a
child Python without torch: the exit status is the one given, text still in stdout's and stderr's buffers reaches
the pipe, and the interpreter's shutdown does not run (an ``atexit`` handler stays silent). The race itself is run
for real by tests/integration/test_readme_job.py and tests/integration/test_ddp_train_script.py.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from role_files import ROOT

CHILD = """
import atexit, importlib.util, sys
spec = importlib.util.spec_from_file_location("prog", sys.argv[1])
prog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prog)
atexit.register(lambda: print("atexit ran", flush=True))
sys.stdout.write("result line, no newline yet")
sys.stderr.write("a warning, buffered")
prog.exit_without_finalizing(int(sys.argv[2]))
print("not reached")
"""


@pytest.mark.parametrize("program", ["slurm/files/ddp_train.py", "ddp_benchmark/files/ddp_bench.py"])
@pytest.mark.parametrize("code", [0, 2])
def test_exit_keeps_status_and_output_and_skips_shutdown(program, code):
    path = os.path.join(ROOT, "roles", program)
    # Block-buffered streams, as under torchrun and srun (a pipe, not a terminal).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", CHILD, path, str(code)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == code, done
    assert done.stdout == "result line, no newline yet", done
    assert done.stderr == "a warning, buffered", done
