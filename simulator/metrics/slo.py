"""Whether one request met its SLO: the per-request form of ``summarize``'s rule."""

from __future__ import annotations

from simulator.metrics.summary import TBT_SLO_METRICS
from simulator.outcome import RequestOutcome


def meets_slo(outcome: RequestOutcome, tbt_slo: str = "tpot") -> bool:
    """Completed, and every target set in ``outcome.slo`` holds (TTFT, TTFAT, E2E; the decode
    target against TPOT, or the worst gap with ``tbt_slo="max_gap"``). A request with a single
    output token has no gap, so the decode target does not apply to it."""
    if tbt_slo not in TBT_SLO_METRICS:
        raise ValueError(f"unknown tbt_slo {tbt_slo!r}; known: {', '.join(TBT_SLO_METRICS)}")
    if not outcome.completed:
        return False
    slo = outcome.slo
    if slo.ttft_s is not None and not outcome.ttft_s <= slo.ttft_s:
        return False
    if slo.ttfat_s is not None and not outcome.ttfat_s <= slo.ttfat_s:
        return False
    if slo.e2e_s is not None and not outcome.e2e_s <= slo.e2e_s:
        return False
    if slo.tbt_s is not None and outcome.output_tokens > 1:
        decode_s = outcome.tpot_s if tbt_slo == "tpot" else outcome.max_tbt_s
        if not decode_s <= slo.tbt_s:
            return False
    return True
