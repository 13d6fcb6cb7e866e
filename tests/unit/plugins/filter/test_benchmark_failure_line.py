"""ddp.cluster.benchmark_failure_line: the line a failed benchmark run shows for a node (roles/ddp_benchmark/tasks/
run.yml, "Name the nodes whose run failed"), on real launcher outputs (tests/unit/fixtures/*/SOURCES.md) and on the
order of its tiers."""
from __future__ import annotations

import pathlib

import pytest
from ansible.errors import AnsibleFilterError
from jinja2 import Environment

from ansible_collections.ddp.cluster.plugins.filter.benchmark import FilterModule, benchmark_failure_line
from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import failure_line

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures"


def lines(name):
    return (FIXTURES / name).read_text().splitlines()


@pytest.mark.parametrize("name, shown", [
    # torchrun's exit after a rank was killed: its ChildFailedError, not the table's "error_file:" line.
    ("runtime/torchrun_ChildFailedError_rank0_SIGKILL__CPPO-6.txt",
     "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "),
    # horovodrun's SSH check: the RuntimeError it raises last, not ssh's "Permission denied" above it.
    ("horovod/horovodrun_ssh_refused.txt", "RuntimeError: could not connect to some hosts via ssh"),
])
def test_real_outputs(name, shown):
    assert failure_line(lines(name)) == shown


def test_mpirun_without_an_exception_shows_its_last_error_like_line():
    words = ("Error", "error", "refused", "timed out", "Timeout", "unable to")
    text = lines("horovod/mpirun_ssh_refused.txt")
    error_like = [line for line in text if any(word in line for word in words)]
    assert error_like
    assert failure_line(text) == error_like[-1]


def test_the_scripts_own_error_comes_first():
    out = ["[rank0]: RuntimeError: boom", "ddp_bench.py: error: --batch-size must be positive", "ValueError: x"]
    assert failure_line(out) == "ddp_bench.py: error: --batch-size must be positive"


@pytest.mark.parametrize("prefixed", ["[rank1]: RuntimeError: Connection reset by peer",
                                      "[1]<stderr>:RuntimeError: Gloo connectFullMesh failed",
                                      "[1,3]<stderr>:torch.distributed.DistBackendError: NCCL error"])
def test_a_ranks_exception_beats_the_launchers_own(prefixed):
    out = [prefixed, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "]
    assert failure_line(out) == prefixed


def test_error_like_lines_skip_torchruns_errors_page_pointer():
    out = ["connection refused by 10.0.0.2", "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
    assert failure_line(out) == "connection refused by 10.0.0.2"


@pytest.mark.parametrize("out, shown", [
    (["starting", "--------", "last words", "  ", "===="], "last words"),
    (["----", "   "], "no output"),
    ([], "no output"),
    (None, "no output"),
])
def test_without_an_error_the_last_real_line(out, shown):
    assert failure_line(out) == shown


def test_filter_is_registered_and_refuses_a_string():
    assert FilterModule().filters()["benchmark_failure_line"] is benchmark_failure_line
    with pytest.raises(AnsibleFilterError, match="expected a list of lines"):
        benchmark_failure_line("RuntimeError: x")


def test_the_task_template_uses_it():
    """The task renders the filter's line through truncate(600), as the Jinja it replaced did."""
    env = Environment()
    env.filters["ddp.cluster.benchmark_failure_line"] = benchmark_failure_line
    template = env.from_string("{{ lines | ddp.cluster.benchmark_failure_line | truncate(600) }}")
    long_error = "RuntimeError: " + "word " * 200
    rendered = template.render(lines=["noise", long_error])
    assert rendered.startswith("RuntimeError: word word") and rendered.endswith("...") and len(rendered) <= 605
    task = (pathlib.Path(__file__).resolve().parents[4] / "roles" / "ddp_benchmark" / "tasks" / "run.yml").read_text()
    assert "lines | ddp.cluster.benchmark_failure_line | truncate(600)" in task
