"""Assemble a synthetic workload: arrivals x lengths x priority tiers x SLOs -> ``Request`` list."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from simulator.request import MAX_ARRIVAL_S, SLO, Request
from simulator.workloads._checks import count
from simulator.workloads.arrivals import ArrivalProcess
from simulator.workloads.lengths import LengthSampler
from simulator.workloads.priorities import sample_tiers
from simulator.workloads.reasoning import ReasoningLengthSampler


def generate_requests(
    arrivals: ArrivalProcess,
    lengths: LengthSampler | ReasoningLengthSampler,
    num_requests: int,
    rng: np.random.Generator,
    *,
    priorities: str | None = None,
    num_tiers: int = 1,
    slo: SLO | Callable[[int], SLO] | None = None,
) -> list[Request]:
    """``num_requests`` requests with ids 0..n-1 in arrival order.

    ``lengths.sample(n, rng)`` returns ``(prompt, output)`` or ``(prompt, output, reasoning)``.
    ``priorities`` names a tier distribution (``priorities.PRIORITY_DISTRIBUTIONS``) over
    ``num_tiers`` tiers; ``None`` puts every request in tier 0 and needs ``num_tiers == 1``.
    ``slo`` is one ``SLO`` copied into every request, or a function tier -> ``SLO``; ``None``
    gives no targets. Random draws happen in the fixed order arrivals, lengths, tiers.
    """
    num_requests = count("num_requests", num_requests)
    num_tiers = count("num_tiers", num_tiers, minimum=1)
    if priorities is None and num_tiers != 1:
        raise ValueError(f"num_tiers={num_tiers} needs a priority distribution, got priorities=None")
    arrival_s = np.asarray(arrivals.sample_arrival_times(num_requests, rng), dtype=np.float64)
    sampled = lengths.sample(num_requests, rng)
    if len(sampled) not in (2, 3):
        raise ValueError(f"lengths.sample must return 2 or 3 arrays, got {len(sampled)}")
    prompts, outputs = sampled[0], sampled[1]
    reasoning = sampled[2] if len(sampled) == 3 else np.zeros(num_requests, dtype=np.int64)
    tiers = (
        np.zeros(num_requests, dtype=np.int64)
        if priorities is None
        else sample_tiers(priorities, num_tiers, num_requests, rng)
    )
    columns = {"arrival times": arrival_s, "prompt_tokens": prompts, "output_tokens": outputs, "reasoning_tokens": reasoning}
    for name, values in columns.items():
        if np.shape(values) != (num_requests,):
            raise ValueError(f"{name} has shape {np.shape(values)}, expected ({num_requests},)")
    if not np.all(np.isfinite(arrival_s)) or np.any(np.diff(arrival_s) < 0) or np.any(arrival_s < 0):
        raise ValueError("arrival times must be finite, >= 0 and non-decreasing")
    if num_requests and arrival_s[-1] > MAX_ARRIVAL_S:
        raise ValueError(f"the last of {num_requests} arrivals is at {arrival_s[-1]:.4g} s, after the {MAX_ARRIVAL_S:g} s "
                         "a simulation accepts (simulator.request.MAX_ARRIVAL_S): is the arrival rate that low?")
    if np.any(prompts < 1) or np.any(outputs < 1) or np.any(reasoning < 0) or np.any(reasoning > outputs):
        raise ValueError("lengths must satisfy prompt >= 1, output >= 1, 0 <= reasoning <= output")
    if slo is None or isinstance(slo, SLO):
        template = SLO() if slo is None else slo

        def slo_for_tier(tier: int) -> SLO:
            return replace(template)  # a fresh copy per request: SLO is mutable
    elif callable(slo):
        slo_for_tier = slo
    else:
        raise ValueError(f"slo must be None, an SLO or a function tier -> SLO, got {slo!r}")
    requests = []
    for request_id, (arrival, prompt, output, reasoning_tokens, tier) in enumerate(
        zip(arrival_s.tolist(), prompts.tolist(), outputs.tolist(), reasoning.tolist(), tiers.tolist())
    ):
        request_slo = slo_for_tier(tier)
        if not isinstance(request_slo, SLO):
            raise ValueError(f"slo({tier}) returned {request_slo!r}, not an SLO")
        requests.append(
            Request(request_id, arrival, prompt, output, reasoning_tokens=reasoning_tokens, tier=tier, slo=request_slo)
        )
    return requests
