"""The one experiment runner (simulator.fanout): Ray tasks give the serial run's results bit for
bit, in job order, at the caller's priority; one worker runs in this process without Ray; bad
settings raise."""

import os
import subprocess
import sys

import pytest

from baselines.cascadia.parallelism import ReplicaShape, TableSettings, build_replica_table
from simulator.fanout import check_workers, fan_out, ray_session

# Replica latency tables as baselines.cascadia.parallelism.write_cache fans them out, kept small.
JOBS = [("Llama-3-8B", ReplicaShape(tp), "fp16", TableSettings(min_requests=30, max_requests=60, max_points=4,
                                                               arrival_s=20.0, seed=seed))
        for tp in (1, 2) for seed in (0, 1, 2)]


def test_ray_tasks_give_the_serial_results_bit_for_bit():
    serial = fan_out(build_replica_table, JOBS, workers=1)
    with ray_session(2):
        parallel = fan_out(build_replica_table, JOBS, workers=2)
        assert fan_out(check_workers, [(k,) for k in range(1, 8)], workers=3) == list(range(1, 8))  # job order
        assert fan_out(lambda: os.nice(0), [(), ()], workers=2) == [os.nice(0)] * 2  # not reniced to Ray's 15
        with pytest.raises(ValueError, match="--workers must be a positive integer, got 0"):
            fan_out(check_workers, [(1,), (0,)], workers=2)  # a job's error reaches the caller
    assert parallel == serial  # every rate and p95, exactly
    assert [table.shape for table in parallel] == [job[1] for job in JOBS]
    assert len({table.p95_s for table in serial}) > 1  # the seeds and shapes differ


def test_one_worker_runs_here_without_ray():
    code = ("import sys; from simulator.fanout import fan_out; "
            "assert fan_out(divmod, [(7, 2), (9, 4)], workers=1) == [(3, 1), (2, 1)]; "
            "assert 'ray' not in sys.modules and 'gymnasium' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("workers", [0, -2, 1.5, True, "2"])
def test_bad_worker_counts_raise(workers):
    with pytest.raises(ValueError, match=f"--workers must be a positive integer, got {workers!r}"):
        fan_out(check_workers, [(3,)], workers=workers)
