"""ddp_bench.py's loader-only measurement and input-bound verdict (pure: no torch, a fake loader and clock)."""
from __future__ import annotations

import pytest

from role_files import load

ddp_bench = load("ddp_benchmark", "ddp_bench.py")


class Batch(object):
    def __init__(self, n):
        self.shape = (n, 3, 8, 8)


class Sampler(object):
    def __init__(self):
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)


class Loader(object):
    """Yields ``count`` batches of ``size`` samples; the clock advances ``first_s`` before the first, then ``step_s``."""

    def __init__(self, count, size, clock, first_s, step_s):
        self.count, self.size, self.clock = count, size, clock
        self.first_s, self.step_s = first_s, step_s
        self.sampler = Sampler()

    def __iter__(self):
        for index in range(self.count):
            self.clock.now += self.first_s if index == 0 else self.step_s
            yield Batch(self.size), None


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_first_batch_is_not_timed_and_epoch_is_restored():
    clock = Clock()
    loader = Loader(count=11, size=16, clock=clock, first_s=30.0, step_s=0.5)
    out = ddp_bench.measure_loader(loader, batches=10, clock=clock)
    # 10 timed batches of 16 samples in 10 x 0.5 s: the 30 s of worker start-up are left out.
    assert out == {"samples_per_s": 32.0, "batches": 10, "seconds": 5.0}
    assert loader.sampler.epochs == [1, 0]


def test_stops_after_the_requested_batches():
    clock = Clock()
    out = ddp_bench.measure_loader(Loader(50, 4, clock, 1.0, 0.25), batches=3, clock=clock)
    assert out["batches"] == 3 and out["samples_per_s"] == pytest.approx(16.0)


def test_a_single_batch_gives_no_rate():
    clock = Clock()
    assert ddp_bench.measure_loader(Loader(1, 4, clock, 1.0, 1.0), batches=5, clock=clock)["samples_per_s"] is None


@pytest.mark.parametrize("feed, train, expected", [
    (100.0, 50.0, (2.0, False)),     # the loader could feed twice what training took
    (100.0, 80.0, (1.25, True)),     # 80 % of the feed: input-bound
    (100.0, 95.0, (1.0526, True)),
    (None, 50.0, (None, None)),
    (100.0, 0.0, (None, None)),
])
def test_input_verdict(feed, train, expected):
    assert ddp_bench.input_verdict(feed, train) == expected


def test_loader_summary_takes_the_slowest_rank_and_sums_per_node():
    gathered = [{"host": "a", "loader_samples_per_s": 40.0}, {"host": "a", "loader_samples_per_s": 60.0},
                {"host": "b", "loader_samples_per_s": 50.0}]
    out = ddp_bench.loader_summary(gathered, 20.0)
    assert out == {"samples_per_s_per_process": 40.0, "per_host": {"a": 100.0, "b": 50.0}, "headroom": 2.0,
                   "input_bound": False, "input_bound_share": 0.8}


def test_no_summary_when_a_rank_did_not_measure():
    assert ddp_bench.loader_summary([{"host": "a", "loader_samples_per_s": 40.0},
                                     {"host": "b", "loader_samples_per_s": None}], 20.0) is None
    assert ddp_bench.loader_summary([{"host": "a"}], 20.0) is None


class StatVfs(object):
    def __init__(self, free, total, frsize=4096):
        self.f_bavail, self.f_blocks, self.f_frsize = free // frsize, total // frsize, frsize


def test_shm_bytes_of_the_reference_settings():
    # 64 x 3 x 224 x 224 float32 + labels = 38,535,680 bytes a batch; 8 workers x 2 prefetched + 1, one process.
    assert ddp_bench.loader_shm_bytes(64, 224, 8, 1) == 17 * 64 * (3 * 224 * 224 * 4 + 8) == 655106560
    assert ddp_bench.loader_shm_bytes(64, 224, 8, 4) == 4 * 655106560
    assert ddp_bench.loader_shm_bytes(64, 224, 0, 4) == 0


def test_a_container_default_shm_is_refused_with_the_fix():
    # podman's and docker's default /dev/shm: 64 MiB (df showed 63M free in a local_cluster node).
    need = ddp_bench.loader_shm_bytes(64, 224, 8, 1)
    problem = ddp_bench.shm_problem(need, statvfs=lambda path: StatVfs(64 << 20, 64 << 20))
    assert problem.startswith("the DataLoader needs about 625 MiB of shared memory on this node but /dev/shm has "
                              "64 MiB free (of 64 MiB)")
    assert "--shm-size" in problem and "ddp_benchmark_workers" in problem


def test_enough_shm_or_no_shm_mount_is_no_problem():
    need = ddp_bench.loader_shm_bytes(16, 64, 8, 1)
    assert ddp_bench.shm_problem(need, statvfs=lambda path: StatVfs(64 << 20, 64 << 20)) is None

    def missing(path):
        raise OSError(2, "No such file or directory", path)
    assert ddp_bench.shm_problem(1 << 40, statvfs=missing) is None
    assert ddp_bench.shm_problem(0, statvfs=lambda path: StatVfs(0, 0)) is None
