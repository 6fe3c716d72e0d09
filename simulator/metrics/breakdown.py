"""Metrics split by priority tier, by serving instance, or by phase of reasoning requests.

``"tier"`` and ``"instance"`` give one ``MetricsSummary`` per value, with rates over the whole
run's duration (so per-group throughputs and goodputs add up to the run's) and no cost (cost is
a cluster figure, not split). Rejected requests keep whatever ``instance_id`` the simulator gave them.

``"phase"`` splits each completed reasoning request (>= 1 reasoning and >= 1 answer token) into
its two phases (PASCAL §II-D: the reasoning phase spans prefill and reasoning tokens):

- reasoning: latency = arrival to last reasoning token; first-token delay = TTFT;
  TPOT and largest gap between reasoning tokens;
- answering: latency = last reasoning token to last token; first-token delay = last reasoning
  token to first answer token (TTFAT as PASCAL §III-B defines it); TPOT and largest gap
  between answer tokens.

Phase times come from the token curve, which must have been recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.metrics.columns import LazyOutcomes, outcome_columns
from simulator.metrics.qoe import QoETargets
from simulator.metrics.stats import NAN, LatencyStats, ratio
from simulator.metrics.summary import (MetricsSummary, has_slo_target, run_duration_s, slo_met_mask,
                                       summarize_columns)
from simulator.metrics.token_curve import max_gap_s, token_time_s, validate_token_curve
from simulator.outcome import RequestOutcome

BREAKDOWN_KEYS = ("tier", "instance", "phase")
PHASES = ("reasoning", "answering")


@dataclass(frozen=True, slots=True)
class PhaseSummary:
    """Latency distributions of one phase over completed reasoning requests (see module docstring)."""

    requests: int
    latency: LatencyStats
    first_token_delay: LatencyStats
    tpot: LatencyStats
    max_tbt: LatencyStats


def summarize_by(
    outcomes: Sequence[RequestOutcome],
    key: str,
    *,
    duration_s: float | None = None,
    qoe_targets: QoETargets | None = None,
    tbt_slo: str = "tpot",
) -> dict[int, MetricsSummary] | dict[str, PhaseSummary]:
    """Metrics per ``key`` value: ``"tier"`` / ``"instance"`` -> ``MetricsSummary``; ``"phase"`` -> ``PhaseSummary``.

    The keyword options are those of ``summarize`` and apply to tier and instance splits only.
    """
    if key not in BREAKDOWN_KEYS:
        raise ValueError(f"unknown breakdown key {key!r}; known: {', '.join(BREAKDOWN_KEYS)}")
    if key == "phase":
        if duration_s is not None or qoe_targets is not None or tbt_slo != "tpot":
            raise ValueError("the phase breakdown has only latencies: duration_s, qoe_targets and tbt_slo do not apply")
        return summarize_phases(outcomes)
    columns = outcome_columns(outcomes)
    run_s = run_duration_s(columns, duration_s)
    group_of = columns.tier if key == "tier" else columns.instance_id
    summaries = {}
    for value in np.unique(group_of):
        rows = np.flatnonzero(group_of == value)
        summaries[int(value)] = summarize_columns(
            columns.take(rows),
            outcomes.take(rows) if isinstance(outcomes, LazyOutcomes) else [outcomes[row] for row in rows],
            duration_s=run_s,
            cost_usd=NAN,
            qoe_targets=qoe_targets,
            tbt_slo=tbt_slo,
        )
    return summaries


def slo_attainment_by_tier(outcomes: Sequence[RequestOutcome], tbt_slo: str = "tpot") -> dict[int, float]:
    """Each tier's SLO attainment, as ``summarize_by(outcomes, "tier", tbt_slo=tbt_slo)[tier].slo_attainment``
    gives it (NaN for a tier whose requests have no target), without the rest of the summaries:
    what a training loop logs at every episode's end."""
    columns = outcome_columns(outcomes)
    met = slo_met_mask(columns, tbt_slo)
    targeted = has_slo_target(columns)
    attainment = {}
    for tier in np.unique(columns.tier).tolist():
        rows = columns.tier == tier
        attainment[tier] = ratio(int(met[rows].sum()), int(rows.sum())) if targeted[rows].any() else NAN
    return attainment


def summarize_phases(outcomes: Sequence[RequestOutcome]) -> dict[str, PhaseSummary]:
    """Reasoning and answering phase latencies of completed reasoning requests."""
    per_phase = {phase: [] for phase in PHASES}
    for outcome in outcomes:
        reasoning_tokens, output_tokens = outcome.reasoning_tokens, outcome.output_tokens
        if not outcome.completed or reasoning_tokens < 1 or output_tokens <= reasoning_tokens:
            continue
        curve = outcome.token_curve
        try:
            validate_token_curve(curve)
        except ValueError as error:
            message = f"request {outcome.request_id}: the phase breakdown needs its token curve: {error}"
            raise ValueError(message) from None
        first_s = token_time_s(curve, 1)
        reasoning_end_s = token_time_s(curve, reasoning_tokens)
        first_answer_s = token_time_s(curve, reasoning_tokens + 1)
        last_s = token_time_s(curve, output_tokens)
        answer_tokens = output_tokens - reasoning_tokens
        per_phase["reasoning"].append((
            reasoning_end_s - outcome.arrival_s,
            first_s - outcome.arrival_s,
            (reasoning_end_s - first_s) / (reasoning_tokens - 1) if reasoning_tokens > 1 else NAN,
            max_gap_s(curve, 1, reasoning_tokens),
        ))
        per_phase["answering"].append((
            last_s - reasoning_end_s,
            first_answer_s - reasoning_end_s,
            (last_s - first_answer_s) / (answer_tokens - 1) if answer_tokens > 1 else NAN,
            max_gap_s(curve, reasoning_tokens + 1, output_tokens),
        ))
    return {phase: _phase_summary(rows) for phase, rows in per_phase.items()}


def _phase_summary(rows: list[tuple[float, float, float, float]]) -> PhaseSummary:
    table = np.array(rows, dtype=float).reshape(len(rows), 4)
    return PhaseSummary(len(rows), *(LatencyStats.of(table[:, column]) for column in range(4)))
