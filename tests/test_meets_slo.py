"""meets_slo on hand-built outcomes: each target met exactly at its bound, missed just past it.

Times are dyadic so every difference is exact: arrival 0, first token 0.5 s, first answer token
1 s, finish 4 s, 8 output tokens, so TTFT = 0.5, TTFAT = 1, E2E = 4, TPOT = 3.5 / 7 = 0.5 s and
the worst gap is 0.75 s.
"""

from __future__ import annotations

import re

import pytest

from simulator.metrics import meets_slo
from simulator.outcome import RequestOutcome
from simulator.request import SLO


def outcome(slo: SLO, output_tokens: int = 8, rejected_reason: str | None = None) -> RequestOutcome:
    finish_s = 4.0
    return RequestOutcome(
        request_id=0, tier=0, instance_id=0, arrival_s=0.0, prompt_tokens=16, output_tokens=output_tokens,
        reasoning_tokens=0, first_scheduled_s=0.25, first_token_s=0.5, first_answer_token_s=1.0,
        reasoning_end_s=float("nan"), finish_s=finish_s, max_tbt_s=0.75, preempted_s=0.0, num_preemptions=0,
        num_migrations=0, token_curve=((0.5, 1), (finish_s, output_tokens)), slo=slo,
        rejected_reason=rejected_reason)


@pytest.mark.parametrize("field, bound_s", [("ttft_s", 0.5), ("ttfat_s", 1.0), ("e2e_s", 4.0), ("tbt_s", 0.5)])
def test_each_target_is_met_at_its_bound_and_missed_just_past_it(field: str, bound_s: float) -> None:
    assert meets_slo(outcome(SLO(**{field: bound_s})))
    assert not meets_slo(outcome(SLO(**{field: bound_s * 0.999})))


def test_max_gap_reads_the_worst_gap_not_the_mean() -> None:
    slo = SLO(tbt_s=0.6)  # TPOT 0.5 meets it, the worst gap 0.75 does not
    assert meets_slo(outcome(slo), tbt_slo="tpot")
    assert not meets_slo(outcome(slo), tbt_slo="max_gap")
    assert meets_slo(outcome(SLO(tbt_s=0.75)), tbt_slo="max_gap")


def test_a_single_token_output_has_no_decode_target() -> None:
    assert meets_slo(outcome(SLO(tbt_s=0.01), output_tokens=1))
    assert not meets_slo(outcome(SLO(tbt_s=0.01), output_tokens=2))


def test_no_target_is_met_by_any_completed_request_and_never_by_a_rejected_one() -> None:
    assert meets_slo(outcome(SLO()))
    assert not meets_slo(outcome(SLO(), rejected_reason="too long"))


def test_unknown_tbt_slo_names_the_value_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"^" + re.escape("unknown tbt_slo 'p99'; known: tpot, max_gap") + r"$"):
        meets_slo(outcome(SLO()), tbt_slo="p99")
