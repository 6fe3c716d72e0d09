"""Fit an engine profile's free parameters to the training points.

The free parameters are the ones no kernel profile here measures: the engine's CPU time per
iteration (``cpu.fixed_ms``), the latency of its own all-reduce kernels
(``all_reduce_latency_us``; one GPU per profiling machine, so no collective was profiled) and
its front end's per-request time (``frontend_ms``). Everything else (kernel efficiencies,
batching limits, the workload) is fixed beforehand. The fit minimises the mean squared log
ratio of simulated to measured TTFT, TPOT and E2E means (throughput at saturated points) over
the training points, with Powell's method inside bounds; each training point is simulated on
its first ``FIT_REQUESTS`` requests to keep the fit to minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize

from experiments.validation.cases import Case
from experiments.validation.simulate import Simulated, simulate
from hardware.engines import EngineProfile

FIT_REQUESTS = 1500
PARAMETERS = ("cpu_fixed_ms", "all_reduce_latency_us", "frontend_ms")
BOUNDS = ((0.0, 5.0), (0.0, 60.0), (0.0, 100.0))
START = (1.0, 20.0, 10.0)


@dataclass(frozen=True)
class FitResult:
    parameters: dict[str, float]
    train_loss: float
    evaluations: int


def with_parameters(engine: EngineProfile, values: dict[str, float]) -> EngineProfile:
    """``engine`` with the fitted parameters set."""
    return replace(
        engine,
        cpu_fixed_s=values["cpu_fixed_ms"] * 1e-3,
        all_reduce_latency_s=values["all_reduce_latency_us"] * 1e-6,
        frontend_s=values["frontend_ms"] * 1e-3,
    )


def compared_metrics(case: Case) -> tuple[str, ...]:
    """The metrics a point is judged on: capacity at saturation (where measured), the latency
    means otherwise."""
    if case.saturated and case.point.request_throughput_rps is not None:
        return ("request_throughput_rps",)
    return tuple(m for m in ("ttft_mean_ms", "tpot_mean_ms", "e2e_mean_ms") if getattr(case.point, m) is not None)


def log_errors(case: Case, simulated: Simulated) -> list[float]:
    return [math.log(getattr(simulated, m) / getattr(case.point, m)) for m in compared_metrics(case)]


def truncated(case: Case, requests: int) -> Case:
    """``case`` fed only its first ``requests`` open-loop requests."""
    if case.open_requests is None:
        return case
    make = case.open_requests
    return replace(case, open_requests=lambda: make()[:requests])


def fit(engine: EngineProfile, train: list[Case], progress=None) -> FitResult:
    """Powell search of ``PARAMETERS`` within ``BOUNDS`` from ``START``."""
    cases = [truncated(case, FIT_REQUESTS) for case in train]
    evaluations = 0

    def loss(x: np.ndarray) -> float:
        nonlocal evaluations
        evaluations += 1
        profile = with_parameters(engine, dict(zip(PARAMETERS, (float(v) for v in x))))
        errors = [e for case in cases for e in log_errors(case, simulate(case, profile))]
        value = float(np.mean(np.square(errors)))
        if progress is not None:
            progress(evaluations, dict(zip(PARAMETERS, x)), value)
        return value

    result = minimize(loss, np.array(START), method="Powell", bounds=BOUNDS, options={"xtol": 0.02, "ftol": 1e-4})
    values = {name: round(float(v), 3) for name, v in zip(PARAMETERS, result.x)}
    return FitResult(values, float(result.fun), evaluations)
