"""Same seed, same numbers: runs in separate processes (different hash seeds) agree exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Every scheduler, mixed GPUs, bursty arrivals, reasoning requests and tiers; prints every
# request outcome (repr keeps all float digits) and the final clock.
SCENARIO = """
import sys
import numpy as np
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.workloads import GammaArrivals, generate_requests, length_sampler

seed = int(sys.argv[1])
for scheduler in ("fcfs", "rr", "sarathi", "pascal", "priority"):
    rng = np.random.default_rng(seed)
    requests = generate_requests(GammaArrivals(6.0, 3.0), length_sampler("servegen_deepseek_r1"), 60, rng,
                                 priorities="enterprise", num_tiers=3)
    cluster = Cluster({"A100-80GB": 1, "H100-80GB": 1}, record_token_curves=True)
    for gpu in ("A100-80GB", "H100-80GB"):
        cluster.deploy(InstanceConfig(gpu=gpu, model="Llama-2-7B", scheduler=scheduler, memory_utilization=0.3),
                       ready_now=True)
    for outcome in sorted(cluster.run(requests), key=lambda o: o.request_id):
        print(repr(outcome))
    print(scheduler, repr(cluster.events.now_s), repr(cluster.cost_usd()))
"""


def run(argv: list[str], hash_seed: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=REPO, env=env)
    assert result.returncode == 0, result.stderr
    return result


def cli_json(seed: int, hash_seed: str, path: Path) -> str:
    run(["-m", "simulator", "--instances", "A100-80GB:1,L40S:1", "--model", "Llama-2-7B", "--scheduler", "rr",
         "--rate", "6", "--cv", "2", "--requests", "300", "--memory-utilization", "0.4", "--seed", str(seed),
         "--json", str(path)], hash_seed)
    return path.read_text()


def test_cli_json_is_identical_across_processes_for_a_seed_and_differs_for_another(tmp_path):
    first = cli_json(42, "1", tmp_path / "a.json")
    second = cli_json(42, "2", tmp_path / "b.json")
    other = cli_json(43, "1", tmp_path / "c.json")
    assert first == second
    a, c = json.loads(first), json.loads(other)
    assert a["arrived"] == c["arrived"] == 300
    assert a["ttft_mean_s"] != c["ttft_mean_s"] and a["duration_s"] != c["duration_s"]


def test_every_outcome_is_identical_across_processes_for_a_seed():
    first = run(["-c", SCENARIO, "7"], "1").stdout
    second = run(["-c", SCENARIO, "7"], "3").stdout
    other = run(["-c", SCENARIO, "8"], "1").stdout
    assert first == second
    assert first.count("RequestOutcome(") == 5 * 60
    assert first != other
