from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import (
    problem, result, should_fail, summary,
)

ERR = problem("GPU_ECC_UNCORRECTABLE", "error", "GPU 0", "volatile uncorrectable ECC errors: 1", "drain")
WARN = problem("ROCE_PFC_DISABLED", "warning", "mlx5_0", "PFC off on every priority", "enable PFC")
INFO = problem("NO_GPU", "info", "node", "no NVIDIA GPU", "none needed on CPU nodes")


@pytest.mark.parametrize("problems, fail_on, expected", [
    ([], "error", False),
    ([WARN], "error", False),
    ([WARN], "warning", True),
    ([ERR], "error", True),
    ([ERR], "never", False),
    ([INFO], "warning", False),
])
def test_should_fail(problems, fail_on, expected):
    assert should_fail(problems, fail_on) is expected


def test_result_orders_errors_first_and_keeps_facts():
    out = result([INFO, WARN, ERR], gpus=[{"index": 0}])
    assert out["healthy"] is False
    assert [p["severity"] for p in out["problems"]] == ["error", "warning", "info"]
    assert out["gpus"] == [{"index": 0}]
    assert result([WARN])["healthy"] is True


@pytest.mark.parametrize("kwargs", [
    {"code": "X", "severity": "fatal", "subject": "s", "message": "m", "fix": "f"},
    {"code": "", "severity": "error", "subject": "s", "message": "m", "fix": "f"},
])
def test_problem_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        problem(**kwargs)


def test_should_fail_rejects_unknown_level():
    with pytest.raises(ValueError):
        should_fail([], "sometimes")


def test_summary():
    assert summary([ERR]) == "[GPU_ECC_UNCORRECTABLE] GPU 0: volatile uncorrectable ECC errors: 1"
