"""Aggregate metrics of a run: counts, latency distributions, SLO attainment, goodput, cost, QoE.

Conventions:

- latency distributions (``ttft``, ``tbt``, ...) cover completed requests only; a request for
  which a latency does not apply (TPOT of a one-token output) is left out of that one;
- ``tbt`` is each request's largest gap between consecutive output tokens; ``tpot`` its mean
  time per output token after the first;
- a request meets its SLO when it completed and every target set in its ``slo`` holds:
  TTFT <= ``ttft_s``, TTFAT <= ``ttfat_s``, E2E <= ``e2e_s`` and the decode target ``tbt_s``.
  By default ``tbt_s`` is checked against TPOT, as DistServe and Cauchy do (Cauchy §3.3.3
  profiles "TBT <= 50/30/30 ms" and reports mean TBT, i.e. TPOT); ``tbt_slo="max_gap"`` checks
  the worst gap instead. A request that never had a second token meets any decode target.
  Rejected requests count as misses. When no request of the run has any target, SLO attainment
  and the goodput metrics do not apply and are NaN (``no_slo_target`` is True), never 1;
- TTFAT is measured from arrival (``RequestOutcome.ttfat_s``); for requests without reasoning it
  equals TTFT;
- rates divide by ``duration_s``; without one, the run's span (first arrival to the last
  arrival or finish) is used; throughput and goodput count completed requests;
- cost efficiency is tokens per USD (Cauchy §4.1): output tokens, and prompt + output tokens,
  of completed requests, over ``cost_usd``; ``goodput_tokens_per_usd`` counts only the output
  tokens of requests that met their SLO (cost efficiency that cannot be bought with latency);
- QoE (PASCAL Fig. 3, see ``qoe.py``) is computed for completed requests with at least one
  answer token; the violation rate counts rejected requests as violations (as for SLOs).

Empty sets give NaN, never an exception, and no value is ever inf.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.metrics.columns import OutcomeColumns, outcome_columns
from simulator.metrics.qoe import QoETargets, qoe_of_valid_curve
from simulator.metrics.stats import NAN, LatencyStats, ratio
from simulator.metrics.token_curve import validate_token_curve
from simulator.outcome import RequestOutcome

TBT_SLO_METRICS = ("tpot", "max_gap")


@dataclass(frozen=True, slots=True)
class MetricsSummary:
    """Aggregate metrics of a set of request outcomes (field meanings in the module docstring)."""

    arrived: int
    completed: int
    rejected: int
    rejected_by_reason: dict[str, int]
    slo_met: int
    preemptions: int
    migrations: int
    output_tokens: int
    total_tokens: int
    duration_s: float
    ttft: LatencyStats
    tbt: LatencyStats
    tpot: LatencyStats
    ttfat: LatencyStats
    e2e: LatencyStats
    queueing: LatencyStats
    preemption: LatencyStats
    slo_attainment: float
    throughput_rps: float
    goodput_rps: float
    output_tokens_per_s: float
    goodput_tokens_per_s: float
    cost_usd: float
    output_tokens_per_usd: float
    total_tokens_per_usd: float
    goodput_tokens_per_usd: float
    qoe_mean: float
    qoe_violation_rate: float
    quality_mean: float

    @property
    def no_slo_target(self) -> bool:
        """Whether no request had an SLO target, so attainment and goodput are NaN (not measured)."""
        return self.arrived > 0 and math.isnan(self.slo_attainment)


def summarize(
    outcomes: Sequence[RequestOutcome],
    *,
    duration_s: float | None = None,
    cost_usd: float | None = None,
    qoe_targets: QoETargets | None = None,
    tbt_slo: str = "tpot",
) -> MetricsSummary:
    """Summarise ``outcomes``; ``cost_usd`` is the run's total cost (NaN cost metrics when None)."""
    columns = outcome_columns(outcomes)
    return summarize_columns(
        columns,
        outcomes,
        duration_s=run_duration_s(columns, duration_s),
        cost_usd=check_cost_usd(cost_usd),
        qoe_targets=qoe_targets,
        tbt_slo=tbt_slo,
    )


def run_duration_s(columns: OutcomeColumns, duration_s: float | None) -> float:
    """``duration_s`` checked, or the span from the first arrival to the last arrival or finish (NaN if none)."""
    if duration_s is not None:
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise ValueError(f"duration_s must be finite and > 0, got {duration_s!r}")
        return float(duration_s)
    if columns.arrival_s.size == 0:
        return NAN
    last_s = np.nanmax(np.concatenate((columns.arrival_s, columns.finish_s)))
    span_s = float(last_s - columns.arrival_s.min())
    return span_s if span_s > 0 else NAN


def check_cost_usd(cost_usd: float | None) -> float:
    """``cost_usd`` checked (finite, >= 0), NaN when not given."""
    if cost_usd is None:
        return NAN
    if not (math.isfinite(cost_usd) and cost_usd >= 0):
        raise ValueError(f"cost_usd must be finite and >= 0, got {cost_usd!r}")
    return float(cost_usd)


def summarize_columns(
    columns: OutcomeColumns,
    outcomes: Sequence[RequestOutcome],
    *,
    duration_s: float,
    cost_usd: float,
    qoe_targets: QoETargets | None,
    tbt_slo: str,
) -> MetricsSummary:
    """``summarize`` on prepared columns; ``outcomes`` (same rows) are read only for QoE."""
    done = columns.completed
    ttft_s = columns.first_token_s - columns.arrival_s
    ttfat_s = columns.first_answer_token_s - columns.arrival_s
    e2e_s = columns.finish_s - columns.arrival_s
    tpot_s = _per_token_s(columns.finish_s - columns.first_token_s, columns.output_tokens - 1)
    slo_met = slo_met_mask(columns, tbt_slo, tpot_s)
    measured = bool(has_slo_target(columns).any())
    arrived = int(columns.arrival_s.size)
    completed = int(done.sum())
    met = int(slo_met.sum())
    output_tokens = int(columns.output_tokens[done].sum())
    total_tokens = output_tokens + int(columns.prompt_tokens[done].sum())
    goodput_tokens = int(columns.output_tokens[slo_met].sum())
    qoe_mean, qoe_violation_rate = _qoe_aggregates(columns, outcomes, qoe_targets)
    quality = columns.quality[done]
    quality = quality[~np.isnan(quality)]
    return MetricsSummary(
        arrived=arrived,
        completed=completed,
        rejected=arrived - completed,
        rejected_by_reason=dict(sorted(Counter(columns.rejected_reason[~done].tolist()).items())),
        slo_met=met,
        preemptions=int(columns.num_preemptions.sum()),
        migrations=int(columns.num_migrations.sum()),
        output_tokens=output_tokens,
        total_tokens=total_tokens,
        duration_s=duration_s,
        ttft=LatencyStats.of(ttft_s[done]),
        tbt=LatencyStats.of(columns.max_tbt_s[done]),
        tpot=LatencyStats.of(tpot_s[done]),
        ttfat=LatencyStats.of(ttfat_s[done]),
        e2e=LatencyStats.of(e2e_s[done]),
        queueing=LatencyStats.of((columns.first_scheduled_s - columns.arrival_s)[done]),
        preemption=LatencyStats.of(columns.preempted_s[done]),
        slo_attainment=ratio(met, arrived) if measured else NAN,
        throughput_rps=ratio(completed, duration_s),
        goodput_rps=ratio(met, duration_s) if measured else NAN,
        output_tokens_per_s=ratio(output_tokens, duration_s),
        goodput_tokens_per_s=ratio(goodput_tokens, duration_s) if measured else NAN,
        cost_usd=cost_usd,
        output_tokens_per_usd=ratio(output_tokens, cost_usd),
        total_tokens_per_usd=ratio(total_tokens, cost_usd),
        goodput_tokens_per_usd=ratio(goodput_tokens, cost_usd) if measured else NAN,
        qoe_mean=qoe_mean,
        qoe_violation_rate=qoe_violation_rate,
        quality_mean=float(quality.mean()) if quality.size else NAN,
    )


def slo_met_mask(columns: OutcomeColumns, tbt_slo: str = "tpot", tpot_s: np.ndarray | None = None) -> np.ndarray:
    """Whether each request completed and met every target it has: TTFT, TTFAT, end-to-end, and
    the decode target on its TPOT (``tbt_slo="tpot"``) or its largest gap (``"max_gap"``);
    ``tpot_s`` when the caller has it already."""
    if tbt_slo not in TBT_SLO_METRICS:
        raise ValueError(f"unknown tbt_slo {tbt_slo!r}; known: {', '.join(TBT_SLO_METRICS)}")
    if tbt_slo == "tpot":
        decode_s = _per_token_s(columns.finish_s - columns.first_token_s, columns.output_tokens - 1) if tpot_s is None \
            else tpot_s
    else:
        decode_s = columns.max_tbt_s
    met = columns.completed & _meets_decode_target(decode_s, columns.slo_tbt_s)
    for value_s, target_s in ((columns.first_token_s, columns.slo_ttft_s),
                              (columns.first_answer_token_s, columns.slo_ttfat_s), (columns.finish_s, columns.slo_e2e_s)):
        met &= np.isnan(target_s) | (value_s - columns.arrival_s <= target_s)
    return met


def has_slo_target(columns: OutcomeColumns) -> np.ndarray:
    """Whether each request has any SLO target (attainment is NaN, not measured, over requests with none)."""
    return ~(np.isnan(columns.slo_ttft_s) & np.isnan(columns.slo_ttfat_s) & np.isnan(columns.slo_e2e_s)
             & np.isnan(columns.slo_tbt_s))


def _per_token_s(span_s: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """``span_s / gaps`` where ``gaps >= 1``, NaN elsewhere (mean time per token over ``gaps`` gaps)."""
    return np.divide(span_s, gaps, out=np.full(span_s.shape, NAN), where=gaps >= 1)


def _meets_decode_target(value_s: np.ndarray, target_s: np.ndarray) -> np.ndarray:
    """Decode target holds, or does not apply (no target, or no second token so no gap)."""
    return np.isnan(target_s) | np.isnan(value_s) | (value_s <= target_s)


def _qoe_aggregates(
    columns: OutcomeColumns, outcomes: Sequence[RequestOutcome], targets: QoETargets | None
) -> tuple[float, float]:
    """Mean QoE of completed requests with answer tokens, and the violation rate counting rejections."""
    if targets is None:
        return NAN, NAN
    scores = []
    for index in np.flatnonzero(columns.completed & (columns.output_tokens > columns.reasoning_tokens)):
        outcome = outcomes[index]
        try:
            validate_token_curve(outcome.token_curve)
        except ValueError as error:
            raise ValueError(f"request {outcome.request_id}: QoE needs its token curve: {error}") from None
        scores.append(
            qoe_of_valid_curve(
                outcome.token_curve,
                outcome.arrival_s,
                outcome.reasoning_tokens,
                targets.expected_ttfat_s,
                targets.expected_tpot_s,
                targets.anchor,
            )
        )
    rejected = int((~columns.completed).sum())
    violations = rejected + sum(score < targets.violation_below for score in scores)
    return (float(np.mean(scores)) if scores else NAN), ratio(violations, rejected + len(scores))
