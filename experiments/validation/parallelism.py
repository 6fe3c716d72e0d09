"""Two checks that are about rankings and ratios rather than single points.

* Cascadia Table 1: real Llama-3-70B throughput on H100 for seven (DP, TP, PP) configurations
  (1,600 input and 16 output tokens per request). The simulator's capacity of each configuration
  (``CAPACITY_REQUESTS`` requests per replica sent at once, round-robin between replicas) is
  ranked against the measured one (Spearman) and the PP-4 / TP-4 ratio compared.
* DeepSeek-R1-671B (int4, TP 8) against DeepSeek-R1-Distill-Llama-70B (TP 4), the last two
  stages of Cascadia's cascade: GPU-seconds per request at capacity on the Cascadia traces'
  ShareGPT lengths, against the GPUs per share of requests of Cascadia's App. E Table 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from hardware.measurements import serving_points
from simulator.backends import make_cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.workloads import length_sampler

CAPACITY_REQUESTS = 128
TABLE1_GPU, TABLE1_MODEL = "H100-80GB", "Llama-3-70B"
TABLE1_LENGTHS = (1600, 16)

CASCADIA_APP_E_TABLE2 = {
    "(90, 1)": ((0.94, 8), (0.50, 20)),
    "(85, 1)": ((0.62, 12), (0.21, 16)),
    "(80, 1)": ((0.54, 14), (0.11, 12)),
    "(80, 2)": ((0.31, 16), (0.03, 8)),
}
"""Cascadia App. E Table 2: per case, (share of requests processed, GPUs) of the 70B and the
671B stage (the cases that deploy both)."""


def capacity_rps(config: InstanceConfig, replicas: int, requests: list[tuple[int, int]]) -> float:
    """Completed requests per second when ``requests`` arrive at once on ``replicas`` copies."""
    cluster = make_cluster({config.gpu: config.tp * config.pp * replicas}, keep_sequences=False)
    for _ in range(replicas):
        cluster.deploy(config, ready_now=True)
    outcomes = cluster.run([Request(i, 0.0, p, o) for i, (p, o) in enumerate(requests)])
    return len(outcomes) / max(o.finish_s for o in outcomes)


@dataclass(frozen=True)
class Table1Row:
    dp: int
    tp: int
    pp: int
    measured_rps: float
    simulated_rps: float


def cascadia_table1(engine: str) -> list[Table1Row]:
    rows = []
    for point in serving_points():
        if point.source != "cascadia_table1":
            continue
        config = InstanceConfig(gpu=TABLE1_GPU, model=TABLE1_MODEL, tp=point.tp, pp=point.pp, engine=engine)
        requests = [TABLE1_LENGTHS] * (CAPACITY_REQUESTS * point.dp)
        rows.append(Table1Row(point.dp, point.tp, point.pp, point.request_throughput_rps,
                              capacity_rps(config, point.dp, requests)))
    return rows


def table1_summary(rows: list[Table1Row]) -> tuple[float, float, float]:
    """(Spearman rank correlation, simulated and measured (1,1,4) / (1,4,1) throughput ratio)."""
    rho = float(spearmanr([r.measured_rps for r in rows], [r.simulated_rps for r in rows]).statistic)
    by_shape = {(r.dp, r.tp, r.pp): r for r in rows}
    pp4, tp4 = by_shape[(1, 1, 4)], by_shape[(1, 4, 1)]
    return rho, pp4.simulated_rps / tp4.simulated_rps, pp4.measured_rps / tp4.measured_rps


@dataclass(frozen=True)
class MoECost:
    model: str
    dtype: str
    tp: int
    capacity_rps: float

    @property
    def gpu_seconds_per_request(self) -> float:
        return self.tp / self.capacity_rps


def moe_costs(engine: str, lengths: str = "sharegpt_cauchy", requests: int = 512) -> tuple[MoECost, MoECost]:
    """Capacity of the 671B (int4, TP 8) and the 70B (TP 4) stages on ``requests`` requests of
    ``lengths`` sent at once (seed 0)."""
    prompts, outputs = length_sampler(lengths).sample(requests, np.random.default_rng(0))[:2]
    pairs = [(int(p), int(o)) for p, o in zip(prompts, outputs)]
    out = []
    for model, dtype, tp in (("DeepSeek-R1-671B", "int4", 8), ("DeepSeek-R1-Distill-Llama-70B", "fp16", 4)):
        config = InstanceConfig(gpu="H100-80GB", model=model, tp=tp, dtype=dtype, engine=engine)
        out.append(MoECost(model, dtype, tp, capacity_rps(config, 1, pairs)))
    return out[0], out[1]


def app_e_ratios() -> dict[str, float]:
    """GPUs per share of requests, 671B over 70B, per App. E Table 2 case."""
    return {case: (large_gpus / large_share) / (mid_gpus / mid_share)
            for case, ((mid_share, mid_gpus), (large_share, large_gpus)) in CASCADIA_APP_E_TABLE2.items()}
