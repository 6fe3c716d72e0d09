"""Run summaries, breakdowns and tables, checked against hand-computed numbers."""

from __future__ import annotations

import json
import math

import pytest

from simulator.metrics import (
    LatencyStats,
    MetricsSummary,
    QoETargets,
    format_table,
    summarize,
    summarize_by,
    to_json_dict,
)
from simulator.metrics.token_curve import token_time_s
from simulator.outcome import RequestOutcome
from simulator.request import SLO


def make_outcome(
    request_id: int,
    *,
    arrival_s: float = 0.0,
    queueing_s: float = 0.0,
    ttft_s: float = 0.1,
    output_tokens: int = 11,
    tpot_s: float = 0.01,
    reasoning_tokens: int = 0,
    prompt_tokens: int = 100,
    tier: int = 0,
    instance_id: int = 0,
    max_tbt_s: float | None = None,
    preempted_s: float = 0.0,
    num_preemptions: int = 0,
    num_migrations: int = 0,
    slo: SLO | None = None,
    rejected_reason: str | None = None,
    quality: float = math.nan,
    curve: tuple[tuple[float, int], ...] | None = None,
) -> RequestOutcome:
    """An outcome delivering tokens on a steady pace (or along ``curve``), every field filled."""
    first_token_s = arrival_s + ttft_s
    finish_s = first_token_s + (output_tokens - 1) * tpot_s
    if curve is None:
        curve = ((first_token_s, 1), (finish_s, output_tokens)) if output_tokens > 1 else ((first_token_s, 1),)
    elif curve:
        first_token_s, finish_s = curve[0][0], curve[-1][0]
    first_answer_token_s = token_time_s(curve, reasoning_tokens + 1) if curve else first_token_s
    first_scheduled_s = arrival_s + queueing_s
    if rejected_reason is not None:
        first_scheduled_s = first_token_s = first_answer_token_s = finish_s = math.nan
        curve = ()
    return RequestOutcome(
        request_id=request_id,
        tier=tier,
        instance_id=instance_id,
        arrival_s=arrival_s,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=reasoning_tokens,
        first_scheduled_s=first_scheduled_s,
        first_token_s=first_token_s,
        first_answer_token_s=first_answer_token_s,
        reasoning_end_s=token_time_s(curve, reasoning_tokens) if curve and reasoning_tokens else math.nan,
        finish_s=finish_s,
        max_tbt_s=tpot_s if max_tbt_s is None else max_tbt_s,
        preempted_s=preempted_s,
        num_preemptions=num_preemptions,
        num_migrations=num_migrations,
        token_curve=curve,
        slo=SLO() if slo is None else slo,
        rejected_reason=rejected_reason,
        quality=quality,
    )


def four_ttfts() -> list[RequestOutcome]:
    return [make_outcome(i, arrival_s=float(i), ttft_s=ttft) for i, ttft in enumerate([0.4, 0.1, 0.3, 0.2])]


class TestLatencyDistributions:
    def test_ttft_mean_and_percentiles_linear(self):
        ttft = summarize(four_ttfts()).ttft
        # Sorted 0.1 0.2 0.3 0.4; linear percentile p at rank 3p/100: p50 2.5th-ish -> 0.25, p90 -> 0.37.
        assert ttft.mean_s == pytest.approx(0.25)
        assert ttft.p50_s == pytest.approx(0.25)
        assert ttft.p90_s == pytest.approx(0.37)
        assert ttft.p95_s == pytest.approx(0.385)
        assert ttft.p99_s == pytest.approx(0.397)

    def test_tpot_excludes_one_token_outputs_and_tbt_uses_max_gap(self):
        outcomes = [
            make_outcome(0, output_tokens=11, tpot_s=0.02, max_tbt_s=0.3),
            make_outcome(1, output_tokens=5, tpot_s=0.04, max_tbt_s=0.1),
            make_outcome(2, output_tokens=1, max_tbt_s=0.0),
        ]
        summary = summarize(outcomes)
        assert summary.tpot.mean_s == pytest.approx(0.03)
        assert summary.tpot.p50_s == pytest.approx(0.03)
        assert summary.tbt.mean_s == pytest.approx(0.4 / 3)
        assert summary.tbt.p50_s == pytest.approx(0.1)

    def test_e2e_ttfat_queueing_preemption(self):
        outcomes = [
            make_outcome(0, arrival_s=1.0, queueing_s=0.5, ttft_s=0.6, output_tokens=11, tpot_s=0.1, preempted_s=0.0),
            make_outcome(1, arrival_s=2.0, queueing_s=1.5, ttft_s=2.0, output_tokens=21, tpot_s=0.1,
                         reasoning_tokens=10, preempted_s=3.0),
        ]
        summary = summarize(outcomes)
        assert summary.e2e.mean_s == pytest.approx(((0.6 + 1.0) + (2.0 + 2.0)) / 2)
        # TTFAT from arrival: first request = TTFT 0.6; second: token 11 at 2.0 + 1.0 after arrival.
        assert summary.ttfat.mean_s == pytest.approx((0.6 + 3.0) / 2)
        assert summary.ttft.mean_s == pytest.approx((0.6 + 2.0) / 2)
        assert summary.queueing.mean_s == pytest.approx(1.0)
        assert summary.preemption.p50_s == pytest.approx(1.5)

    def test_rejected_requests_are_not_in_latencies(self):
        outcomes = [*four_ttfts(), make_outcome(9, ttft_s=50.0, rejected_reason="queue_full")]
        assert summarize(outcomes).ttft.mean_s == pytest.approx(0.25)


class TestCountsAndSLO:
    def outcomes(self) -> list[RequestOutcome]:
        slo = SLO(ttft_s=0.5, tbt_s=0.05, e2e_s=5.0)
        return [
            make_outcome(0, ttft_s=0.2, output_tokens=11, tpot_s=0.02, slo=slo, num_preemptions=2),
            make_outcome(1, ttft_s=0.8, output_tokens=21, tpot_s=0.02, slo=slo, num_migrations=1),
            make_outcome(2, rejected_reason="kv_capacity", slo=slo),
            make_outcome(3, ttft_s=3.0, output_tokens=31, tpot_s=0.5, slo=SLO()),
            make_outcome(4, rejected_reason="kv_capacity"),
            make_outcome(5, rejected_reason="queue_full"),
        ]

    def test_counts(self):
        summary = summarize(self.outcomes())
        assert (summary.arrived, summary.completed, summary.rejected) == (6, 3, 3)
        assert summary.rejected_by_reason == {"kv_capacity": 2, "queue_full": 1}
        assert (summary.preemptions, summary.migrations) == (2, 1)

    def test_rejected_count_as_misses(self):
        # Met: request 0 (all targets hold) and request 3 (no targets). Missed: 1 (TTFT 0.8 > 0.5), 2, 4, 5.
        summary = summarize(self.outcomes())
        assert summary.slo_met == 2
        assert summary.slo_attainment == pytest.approx(2 / 6)

    def test_decode_target_against_tpot_or_worst_gap(self):
        outcome = make_outcome(0, output_tokens=11, tpot_s=0.02, max_tbt_s=0.2, slo=SLO(tbt_s=0.05))
        assert summarize([outcome]).slo_met == 1
        assert summarize([outcome], tbt_slo="max_gap").slo_met == 0

    def test_ttfat_and_e2e_targets(self):
        reasoning = make_outcome(0, ttft_s=0.1, output_tokens=21, tpot_s=0.1, reasoning_tokens=10,
                                 slo=SLO(ttfat_s=1.0))  # first answer token 1.1 s after arrival
        assert summarize([reasoning]).slo_met == 0
        assert summarize([make_outcome(1, ttft_s=0.1, output_tokens=11, tpot_s=0.1, slo=SLO(e2e_s=1.1))]).slo_met == 1
        assert summarize([make_outcome(2, ttft_s=0.2, output_tokens=11, tpot_s=0.1, slo=SLO(e2e_s=1.1))]).slo_met == 0

    def test_one_token_output_meets_any_decode_target(self):
        outcome = make_outcome(0, output_tokens=1, max_tbt_s=0.0, slo=SLO(tbt_s=0.001))
        assert summarize([outcome]).slo_met == 1


class TestRatesAndCost:
    def outcomes(self) -> list[RequestOutcome]:
        slo = SLO(ttft_s=0.5)
        return [
            make_outcome(0, arrival_s=0.0, ttft_s=0.2, output_tokens=100, prompt_tokens=50, slo=slo),
            make_outcome(1, arrival_s=1.0, ttft_s=0.9, output_tokens=300, prompt_tokens=150, slo=slo),
            make_outcome(2, arrival_s=2.0, rejected_reason="kv_capacity", output_tokens=500, prompt_tokens=900),
        ]

    def test_throughput_and_goodput_over_given_duration(self):
        summary = summarize(self.outcomes(), duration_s=10.0)
        assert summary.throughput_rps == pytest.approx(0.2)
        assert summary.goodput_rps == pytest.approx(0.1)
        assert summary.output_tokens_per_s == pytest.approx(40.0)
        assert summary.goodput_tokens_per_s == pytest.approx(10.0)

    def test_tokens_per_usd_is_tokens_over_cost(self):
        summary = summarize(self.outcomes(), cost_usd=0.5)
        assert (summary.output_tokens, summary.total_tokens) == (400, 600)
        assert summary.output_tokens_per_usd == pytest.approx(400 / 0.5)
        assert summary.total_tokens_per_usd == pytest.approx(600 / 0.5)
        assert summary.goodput_tokens_per_usd == pytest.approx(100 / 0.5)  # request 1 missed its TTFT

    def test_duration_defaults_to_first_arrival_to_last_event(self):
        # Last finish: request 1 at 1.0 + 0.9 + 299 * 0.01 = 4.89; the rejection at 2.0 is earlier.
        summary = summarize(self.outcomes())
        assert summary.duration_s == pytest.approx(4.89)
        assert summary.throughput_rps == pytest.approx(2 / 4.89)

    def test_missing_or_zero_cost_gives_nan_not_inf(self):
        assert math.isnan(summarize(self.outcomes()).output_tokens_per_usd)
        summary = summarize(self.outcomes(), cost_usd=0.0)
        assert summary.cost_usd == 0.0
        assert math.isnan(summary.total_tokens_per_usd)

    @pytest.mark.parametrize(("option", "value"), [("duration_s", 0.0), ("duration_s", math.nan), ("cost_usd", -1.0),
                                                   ("cost_usd", math.inf)])
    def test_bad_duration_or_cost(self, option, value):
        with pytest.raises(ValueError, match=option):
            summarize(self.outcomes(), **{option: value})


class TestQualityAndQoE:
    def test_quality_mean_over_completed_with_quality(self):
        outcomes = [make_outcome(0, quality=0.9), make_outcome(1, quality=0.5), make_outcome(2),
                    make_outcome(3, quality=0.0, rejected_reason="kv_capacity")]
        assert summarize(outcomes).quality_mean == pytest.approx(0.7)
        assert math.isnan(summarize([make_outcome(0)]).quality_mean)

    def test_qoe_mean_and_violation_rate_counting_rejections(self):
        # Expected: first token 1.0 s after arrival, then one per 0.1 s. Request 0 on time (QoE 1),
        # request 1 one second late with 11 tokens (QoE 6/17, test_qoe), request 2 rejected.
        outcomes = [
            make_outcome(0, ttft_s=1.0, output_tokens=11, tpot_s=0.1),
            make_outcome(1, ttft_s=2.0, output_tokens=11, tpot_s=0.1),
            make_outcome(2, rejected_reason="kv_capacity"),
        ]
        summary = summarize(outcomes, qoe_targets=QoETargets(expected_ttfat_s=1.0, expected_tpot_s=0.1))
        assert summary.qoe_mean == pytest.approx((1 + 6 / 17) / 2)
        assert summary.qoe_violation_rate == pytest.approx(2 / 3)
        assert math.isnan(summarize(outcomes).qoe_mean)

    def test_qoe_needs_recorded_curves(self):
        outcome = make_outcome(42, curve=())
        with pytest.raises(ValueError, match="request 42.*token curve"):
            summarize([outcome], qoe_targets=QoETargets(0.25, 0.1))


class TestEmptyAndBadInput:
    def test_empty_gives_zero_counts_and_nan(self):
        summary = summarize([], duration_s=1.0, cost_usd=1.0, qoe_targets=QoETargets(0.25, 0.1))
        assert (summary.arrived, summary.completed, summary.rejected_by_reason) == (0, 0, {})
        for value in (summary.ttft.p99_s, summary.slo_attainment, summary.qoe_mean, summary.qoe_violation_rate,
                      summary.quality_mean):
            assert math.isnan(value)
        assert summary.throughput_rps == 0.0
        assert math.isnan(summarize([]).duration_s)

    def test_no_value_is_inf_when_everything_is_rejected(self):
        summary = summarize([make_outcome(0, rejected_reason="queue_full", slo=SLO(ttft_s=1.0))], cost_usd=0.0)
        flat = to_json_dict(summary)
        assert all(not (isinstance(v, float) and math.isinf(v)) for v in flat.values())
        assert flat["slo_attainment"] == 0.0

    def test_without_any_target_attainment_and_goodput_are_not_measured(self):
        # Three requests with a TTFT of 100 s and no target: attainment was reported as 1 before.
        outcomes = [make_outcome(i, arrival_s=float(i), ttft_s=100.0) for i in range(3)]
        summary = summarize(outcomes, cost_usd=1.0)
        assert summary.no_slo_target
        for value in (summary.slo_attainment, summary.goodput_rps, summary.goodput_tokens_per_s,
                      summary.goodput_tokens_per_usd):
            assert math.isnan(value)
        assert to_json_dict(summary)["slo_attainment"] is None
        assert summary.throughput_rps == pytest.approx(3 / (2.0 + 100.0 + 10 * 0.01))

    def test_one_request_with_a_target_makes_attainment_measured(self):
        # Request 0 has no target (met by convention), request 1 misses its 1-s TTFT target: 1 of 2.
        outcomes = [make_outcome(0, ttft_s=100.0), make_outcome(1, ttft_s=2.0, slo=SLO(ttft_s=1.0))]
        summary = summarize(outcomes)
        assert not summary.no_slo_target and summary.slo_attainment == 0.5

    def test_unknown_tbt_slo_lists_known(self):
        with pytest.raises(ValueError, match="'mean'.*tpot, max_gap"):
            summarize(four_ttfts(), tbt_slo="mean")

    def test_non_outcome_element(self):
        with pytest.raises(ValueError, match=r"outcomes\[1\] is dict"):
            summarize([make_outcome(0), {}])


class TestBreakdowns:
    def outcomes(self) -> list[RequestOutcome]:
        slo = SLO(ttft_s=0.5)
        return [
            make_outcome(0, tier=0, instance_id=3, ttft_s=0.1, output_tokens=10, slo=slo),
            make_outcome(1, tier=0, instance_id=4, ttft_s=0.3, output_tokens=20, slo=slo),
            make_outcome(2, tier=1, instance_id=3, ttft_s=0.9, output_tokens=30, slo=slo),
            make_outcome(3, tier=1, instance_id=-1, rejected_reason="kv_capacity"),
        ]

    def test_by_tier(self):
        by_tier = summarize_by(self.outcomes(), "tier", duration_s=10.0)
        assert list(by_tier) == [0, 1]
        assert by_tier[0].ttft.mean_s == pytest.approx(0.2)
        assert (by_tier[0].slo_attainment, by_tier[1].slo_attainment) == (1.0, 0.0)
        assert by_tier[1].rejected_by_reason == {"kv_capacity": 1}
        total = summarize(self.outcomes(), duration_s=10.0)
        assert sum(s.goodput_rps for s in by_tier.values()) == pytest.approx(total.goodput_rps)
        assert sum(s.output_tokens_per_s for s in by_tier.values()) == pytest.approx(total.output_tokens_per_s)
        assert math.isnan(by_tier[0].cost_usd)

    def test_by_instance_uses_whole_run_duration(self):
        by_instance = summarize_by(self.outcomes(), "instance")
        assert list(by_instance) == [-1, 3, 4]
        assert by_instance[3].completed == 2
        assert by_instance[4].duration_s == summarize(self.outcomes()).duration_s

    def test_by_phase_of_reasoning_requests(self):
        # 10 reasoning tokens 0.1 s apart from t=1.0; first answer token 0.6 s after the last one;
        # answer tokens 0.1 s apart except a 1.1 s pause between tokens 15 and 16.
        curve = ((1.0, 1), (1.9, 10), (2.5, 11), (2.9, 15), (4.0, 16), (4.4, 20))
        outcomes = [
            make_outcome(0, arrival_s=0.0, output_tokens=20, reasoning_tokens=10, curve=curve),
            make_outcome(1, output_tokens=20),  # no reasoning: not in the phase split
            make_outcome(2, output_tokens=20, reasoning_tokens=10, rejected_reason="kv_capacity"),
        ]
        phases = summarize_by(outcomes, "phase")
        reasoning, answering = phases["reasoning"], phases["answering"]
        assert reasoning.requests == answering.requests == 1
        assert reasoning.latency.mean_s == pytest.approx(1.9)
        assert reasoning.first_token_delay.mean_s == pytest.approx(1.0)
        assert reasoning.tpot.mean_s == pytest.approx(0.1)
        assert reasoning.max_tbt.mean_s == pytest.approx(0.1)
        assert answering.latency.mean_s == pytest.approx(2.5)
        assert answering.first_token_delay.mean_s == pytest.approx(0.6)
        assert answering.tpot.mean_s == pytest.approx(1.9 / 9)
        assert answering.max_tbt.mean_s == pytest.approx(1.1)

    def test_phase_edges_one_reasoning_or_one_answer_token(self):
        """A: arrival 0.5, 1 reasoning token at 1.0, answer tokens at 1.5 and 1.7. B: arrival 0,
        reasoning tokens at 1.0 and 1.2, one answer token at 2.0. C has no answer token: left out.
        A phase of one token has no TPOT and no gap (NaN, left out of the means)."""
        outcomes = [
            make_outcome(0, arrival_s=0.5, ttft_s=0.5, output_tokens=3, reasoning_tokens=1,
                         curve=((1.0, 1), (1.5, 2), (1.7, 3))),
            make_outcome(2, output_tokens=3, reasoning_tokens=3, curve=()),  # skipped, and B is still read
            make_outcome(1, arrival_s=0.0, ttft_s=1.0, output_tokens=3, reasoning_tokens=2,
                         curve=((1.0, 1), (1.2, 2), (2.0, 3))),
        ]
        phases = summarize_by(outcomes, "phase")
        reasoning, answering = phases["reasoning"], phases["answering"]
        assert reasoning.requests == answering.requests == 2
        assert reasoning.latency.mean_s == pytest.approx((0.5 + 1.2) / 2)  # to the last reasoning token
        assert reasoning.first_token_delay.mean_s == pytest.approx((0.5 + 1.0) / 2)
        assert reasoning.tpot.mean_s == pytest.approx(0.2) and reasoning.max_tbt.mean_s == pytest.approx(0.2)  # B only
        assert answering.latency.mean_s == pytest.approx((0.7 + 0.8) / 2)
        assert answering.first_token_delay.mean_s == pytest.approx((0.5 + 0.8) / 2)
        assert answering.tpot.mean_s == pytest.approx(0.2) and answering.max_tbt.mean_s == pytest.approx(0.2)  # A only
        no_curve = make_outcome(7, output_tokens=3, reasoning_tokens=1, curve=())
        with pytest.raises(ValueError, match=r"^request 7: the phase breakdown needs its token curve: "):
            summarize_by([no_curve], "phase")

    def test_phase_split_takes_no_summary_options(self):
        message = r"^the phase breakdown has only latencies: duration_s, qoe_targets and tbt_slo do not apply$"
        with pytest.raises(ValueError, match=message):
            summarize_by(self.outcomes(), "phase", duration_s=1.0)
        with pytest.raises(ValueError, match=message):
            summarize_by(self.outcomes(), "phase", qoe_targets=QoETargets(0.25, 0.1))
        with pytest.raises(ValueError, match=message):
            summarize_by(self.outcomes(), "phase", tbt_slo="max_gap")

    def test_unknown_key_lists_known(self):
        with pytest.raises(ValueError, match="'gpu'.*tier, instance, phase"):
            summarize_by(self.outcomes(), "gpu")


class TestTableAndJson:
    def test_json_dict_flat_names_and_nan_as_none(self):
        summary = summarize(four_ttfts())
        flat = to_json_dict(summary)
        assert flat["ttft_p50_s"] == pytest.approx(0.25)
        assert flat["arrived"] == 4
        assert flat["qoe_mean"] is None
        assert flat["rejected_by_reason"] == {}
        assert json.loads(json.dumps(flat, allow_nan=False)) == flat

    def test_json_dict_of_breakdown_uses_string_keys(self):
        flat = to_json_dict(summarize_by(four_ttfts(), "tier"))
        assert list(flat) == ["0"]
        assert flat["0"]["completed"] == 4

    def test_single_summary_table(self):
        table = format_table(summarize([*four_ttfts(), make_outcome(9, rejected_reason="queue_full")]))
        lines = table.splitlines()
        assert lines[0].split() == ["metric", "|", "value"]
        rows = {line.split(" | ")[0].strip(): line.split(" | ")[1].strip() for line in lines[2:]}
        assert rows["arrived"] == "5"
        assert rows["ttft_p50_s"] == "0.25"
        assert rows["rejected_by_reason[queue_full]"] == "1"
        assert rows["qoe_mean"] == "-"
        assert len({len(line) for line in lines}) == 1  # fixed width

    def test_breakdown_table_has_one_column_per_group(self):
        outcomes = [make_outcome(0, tier=0, ttft_s=0.1), make_outcome(1, tier=2, ttft_s=0.3)]
        lines = format_table(summarize_by(outcomes, "tier")).splitlines()
        assert [cell.strip() for cell in lines[0].split("|")] == ["metric", "0", "2"]
        ttft_row = next(line for line in lines if line.startswith("ttft_mean_s"))
        assert [cell.strip() for cell in ttft_row.split("|")] == ["ttft_mean_s", "0.1", "0.3"]

    def test_latency_stats_names(self):
        assert [f for f in LatencyStats.__dataclass_fields__] == ["mean_s", "p50_s", "p90_s", "p95_s", "p99_s"]
        assert "ttft" in MetricsSummary.__dataclass_fields__


def test_percentile_linear_equals_numpy_bit_for_bit():
    import numpy as np

    from simulator.metrics.stats import percentile_linear

    rng = np.random.default_rng(7)
    for trial in range(3000):
        size = int(rng.integers(1, 60))
        values = (rng.exponential(3.0, size) if trial % 2 else np.round(rng.uniform(0, 10, size), 1)).tolist()
        for q in (0, 37.5, 50, 90, 95, 99, 100):
            assert percentile_linear(values, q) == float(np.percentile(values, q)), (values, q)
    assert percentile_linear([1.0, 2.0, 3.0, 4.0], 50) == 2.5  # between the two middle ranks
    assert percentile_linear([4.0, 1.0], 95) == pytest.approx(3.85, abs=1e-12)  # sorted, 95 % of the way from 1 to 4
    with pytest.raises(ValueError, match="^percentile of no values$"):
        percentile_linear([], 95)
    with pytest.raises(ValueError, match="q must be in \\[0, 100\\], got 101"):
        percentile_linear([1.0], 101)


def test_latency_stats_percentiles_equal_numpy_bit_for_bit():
    """LatencyStats.of sorts once and interpolates by NumPy's float operations: the same
    numbers as numpy.percentile, over sizes from 1 to thousands, NaN entries left out."""
    import numpy as np

    rng = np.random.default_rng(11)
    for trial in range(600):
        size = int(rng.integers(1, 3000)) if trial % 3 == 0 else int(rng.integers(1, 40))
        values = rng.lognormal(-1.0, 1.5, size) if trial % 2 else np.round(rng.uniform(0, 5, size), 2)
        values[rng.random(size) < 0.1] = np.nan
        samples = values[~np.isnan(values)]
        stats = LatencyStats.of(values)
        if samples.size == 0:
            assert all(math.isnan(v) for v in (stats.mean_s, stats.p50_s, stats.p90_s, stats.p95_s, stats.p99_s))
            continue
        expected = np.percentile(samples, [50, 90, 95, 99], method="linear").tolist()
        assert [stats.p50_s, stats.p90_s, stats.p95_s, stats.p99_s] == expected, values
        assert stats.mean_s == float(samples.mean())
    for nothing in (np.array([]), np.array([np.nan, np.nan])):  # no sample: every field NaN
        stats = LatencyStats.of(nothing)
        assert all(math.isnan(v) for v in (stats.mean_s, stats.p50_s, stats.p90_s, stats.p95_s, stats.p99_s))


def test_mean_float64_equals_numpy_bit_for_bit():
    import numpy as np

    from simulator.metrics.stats import mean_float64

    rng = np.random.default_rng(11)
    for trial in range(3000):
        size = int(rng.integers(1, 300))  # past numpy's 8-wide unrolled blocks, where pairwise sums differ from a loop
        values = (rng.exponential(3.0, size) if trial % 2 else np.round(rng.uniform(0, 100, size), 1)).tolist()
        assert mean_float64(values) == float(np.mean(values)), values
    assert mean_float64([1.0, 2.0, 4.0]) == 7.0 / 3.0
    with pytest.raises(ValueError, match="^mean of no values$"):
        mean_float64([])


def test_mean_float64_sums_integers_in_float64_like_numpy_mean():
    import numpy as np

    from simulator.metrics.stats import mean_float64

    # 2**53 + 1 is not a float64: each "+ 1" rounds back to 2**53 (ties to even), so the float64
    # sum is 2**53, not the exact integer sum 2**53 + 2 (whose mean, 3002399751580331.33..., is
    # another float64: their spacing there is 0.5).
    values = [2**53, 1, 1]
    assert mean_float64(values) == 2.0**53 / 3 == float(np.mean(values))
