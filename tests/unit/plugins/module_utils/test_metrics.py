"""module_utils/report/metrics.py: the health verdicts and the benchmark's figures in Prometheus's text exposition format."""
from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.report import metrics


def test_health_samples_render_one_help_per_name_and_every_verdict():
    text = metrics.render(metrics.health_samples(
        "WARN", [{"code": "NO_GPU", "severity": "warning"}, {"code": "NO_GPU", "severity": "info"}],
        "ddp-health", 1700000000, 0.25))
    lines = text.splitlines()
    assert lines[0].startswith("# HELP ddp_health_healthy ") and lines[1] == "# TYPE ddp_health_healthy gauge"
    assert 'ddp_health_healthy{source="ddp-health"} 1' in lines
    assert [line for line in lines if line.startswith("ddp_health_verdict{")] == [
        'ddp_health_verdict{source="ddp-health",verdict="%s"} %d' % (v, v == "WARN") for v in metrics.VERDICTS]
    # one series per code, at its highest severity
    assert [line for line in lines if line.startswith("ddp_health_problem")] == [
        'ddp_health_problem{source="ddp-health",code="NO_GPU",severity="warning"} 1']
    assert 'ddp_health_last_run_timestamp_seconds{source="ddp-health"} 1700000000' in lines
    assert 'ddp_health_duration_seconds{source="ddp-health"} 0.25' in lines
    assert sum(1 for line in lines if line.startswith("# HELP")) == 5


@pytest.mark.parametrize("verdict, healthy", [("PASS", 1), ("WARN", 1), ("FAIL", 0), ("UNKNOWN", 0)])
def test_healthy_follows_the_exit_code_contract(verdict, healthy):
    samples = metrics.health_samples(verdict, [], "health-stage", 1, tier="burnin")
    assert samples[0] == ("ddp_health_healthy", [("source", "health-stage"), ("tier", "burnin")], healthy)


def test_unknown_verdict_and_metric_are_refused():
    with pytest.raises(ValueError, match="verdict must be one of"):
        metrics.health_samples("OK", [], "ddp-health", 1)
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.render([("ddp_other", [], 1)])


def test_label_values_are_escaped():
    text = metrics.render(metrics.drain_samples('ddp:A,"B"\\C\nD'))
    assert 'ddp_health_slurm_drained{reason="ddp:A,\\"B\\"\\\\C\\nD"} 1' in text.splitlines()
    assert 'ddp_health_slurm_drained{reason=""} 0' in metrics.render(metrics.drain_samples("")).splitlines()


@pytest.mark.parametrize("state, reason, out", [
    ("drained", "ddp:BURNIN_SLOW", "ddp:BURNIN_SLOW"),
    ("draining", "ddp-health:IFNAME_NOT_FOUND", "ddp-health:IFNAME_NOT_FOUND"),
    ("drained", "swap disk", ""),          # an operator's drain is not ours
    ("idle", "ddp:BURNIN_SLOW", ""),       # a reason left on a node in service
])
def test_drained_by_us(state, reason, out):
    assert metrics.drained_by_us(state, reason) == out


def test_benchmark_samples_per_row_with_efficiency_where_known():
    rows = [{"run": "1 process", "nodes": 1, "processes": 1, "launcher": "slurm", "variant": "",
             "global_images_per_s": 800.0, "efficiency": 1.0},
            {"run": "all nodes", "nodes": 3, "processes": 3, "launcher": "slurm", "variant": "",
             "global_images_per_s": 2040.5, "efficiency": 0.85},
            {"run": "rdma off", "nodes": 3, "processes": 3, "launcher": "slurm", "variant": "rdma_off",
             "global_images_per_s": 1900.0, "efficiency": None},
            {"run": "broken", "global_images_per_s": None}]
    lines = metrics.render(metrics.benchmark_samples(rows, 1700000100)).splitlines()
    assert ('ddp_benchmark_images_per_second{run="all nodes",nodes="3",processes="3",launcher="slurm",variant=""} '
            '2040.5') in lines
    assert ('ddp_benchmark_scaling_efficiency{run="all nodes",nodes="3",processes="3",launcher="slurm",variant=""} '
            '0.85') in lines
    assert not any('variant="rdma_off"' in line and line.startswith("ddp_benchmark_scaling") for line in lines)
    assert not any('run="broken"' in line for line in lines)
    assert "ddp_benchmark_last_run_timestamp_seconds 1700000100" in lines
    assert metrics.benchmark_samples([], 1) == []
