"""QoE (PASCAL Fig. 3, after Andes) and token-curve helpers, against hand-computed areas."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.metrics import QoETargets, max_gap_s, qoe, token_time_s, validate_token_curve
from simulator.outcome import RequestOutcome
from simulator.request import SLO


def on_pace_curve(start_s: float, tokens: int, tpot_s: float) -> tuple[tuple[float, int], ...]:
    """First token at ``start_s``, then one every ``tpot_s``."""
    return ((start_s, 1), (start_s + (tokens - 1) * tpot_s, tokens))


def delayed_qoe(tokens: int, tpot_s: float, delay_s: float) -> float:
    """Hand formula: on-pace delivery ``delay_s`` late. Ramp area (n-1)*tpot*(n+1)/2 under both
    curves; the expected curve also holds n tokens for the extra ``delay_s`` before the window ends."""
    ramp_area = (tokens - 1) * tpot_s * (tokens + 1) / 2
    return ramp_area / (ramp_area + tokens * delay_s)


def finished_outcome(curve, *, arrival_s: float = 0.0, reasoning_tokens: int = 0, rejected: str | None = None):
    output_tokens = curve[-1][1]
    return RequestOutcome(
        request_id=7,
        tier=0,
        instance_id=0,
        arrival_s=arrival_s,
        prompt_tokens=16,
        output_tokens=output_tokens,
        reasoning_tokens=reasoning_tokens,
        first_scheduled_s=arrival_s,
        first_token_s=curve[0][0],
        first_answer_token_s=token_time_s(curve, reasoning_tokens + 1),
        reasoning_end_s=token_time_s(curve, reasoning_tokens) if reasoning_tokens else math.nan,
        finish_s=curve[-1][0],
        max_tbt_s=0.1,
        preempted_s=0.0,
        num_preemptions=0,
        num_migrations=0,
        token_curve=curve,
        slo=SLO(),
        rejected_reason=rejected,
    )


class TestQoEHandComputed:
    def test_delivery_exactly_on_expected_curve_scores_one(self):
        curve = on_pace_curve(start_s=10.25, tokens=50, tpot_s=0.1)
        assert qoe(curve, arrival_s=10.0, expected_ttfat_s=0.25, expected_tpot_s=0.1) == pytest.approx(1.0, abs=1e-12)

    def test_one_second_late_on_pace_gives_six_seventeenths(self):
        # 11 tokens at 0.1 s: ramp area 1.0 * (1 + 11) / 2 = 6; expected holds 11 tokens 1 s longer: 6 / (6 + 11).
        curve = on_pace_curve(start_s=1.0, tokens=11, tpot_s=0.1)
        assert qoe(curve, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1) == pytest.approx(6 / 17)

    @pytest.mark.parametrize(("tokens", "tpot_s", "delay_s"), [(2, 0.5, 0.25), (100, 0.05, 2.0), (7, 0.1, 0.3)])
    def test_late_start_matches_area_formula(self, tokens, tpot_s, delay_s):
        curve = on_pace_curve(start_s=3.0 + delay_s, tokens=tokens, tpot_s=tpot_s)
        got = qoe(curve, arrival_s=2.0, expected_ttfat_s=1.0, expected_tpot_s=tpot_s)
        assert got == pytest.approx(delayed_qoe(tokens, tpot_s, delay_s))

    def test_half_speed_delivery(self):
        # 11 tokens every 0.2 s from the expected start: digested area 2.0 * 12 / 2 = 12;
        # expected area to t = 2.0: 1.0 * 12 / 2 + 11 * 1.0 = 17.
        curve = on_pace_curve(start_s=0.0, tokens=11, tpot_s=0.2)
        assert qoe(curve, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1) == pytest.approx(12 / 17)

    def test_fig3_burst_pause_starvation(self):
        # Pace 1 token/s, expected (0,1)->(8,9). Delivered: 4 tokens in the first second, pause to t=8,
        # then 2 tokens/s. Digested: (0,1) (1,2) (4,5) catches up, flat to 8, (10,7), buffer drained (12,9).
        # Digested area 1.5 + 10.5 + 20 + 12 + 16 = 60; expected area 40 + 9 * 4 = 76.
        curve = ((0.0, 1), (1.0, 5), (8.0, 5), (10.0, 9))
        assert qoe(curve, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=1.0) == pytest.approx(60 / 76)

    def test_faster_than_expected_from_the_expected_start_is_paced_to_exactly_one(self):
        curve = on_pace_curve(start_s=0.25, tokens=40, tpot_s=0.01)
        assert qoe(curve, arrival_s=0.0, expected_ttfat_s=0.25, expected_tpot_s=0.1) == pytest.approx(1.0)

    def test_early_first_token_is_capped_at_one(self):
        # Digested curve 1 s ahead of the expected one: its area is larger (ratio (6 + 11) / 6 > 1).
        curve = on_pace_curve(start_s=0.0, tokens=11, tpot_s=0.1)
        assert qoe(curve, arrival_s=0.0, expected_ttfat_s=1.0, expected_tpot_s=0.1) == 1.0

    def test_single_token_on_time_is_one_and_late_is_zero(self):
        assert qoe(((0.2, 1),), arrival_s=0.0, expected_ttfat_s=0.25, expected_tpot_s=0.1) == 1.0
        assert qoe(((0.3, 1),), arrival_s=0.0, expected_ttfat_s=0.25, expected_tpot_s=0.1) == 0.0


class TestReasoningAnswerTokens:
    # 10 reasoning tokens then 11 answer tokens, all 0.1 s apart: token k at 0.9 + 0.1 k.
    curve = ((1.0, 1), (3.0, 21))

    def test_arrival_anchor_counts_only_answer_tokens(self):
        # First answer token (token 11) at 2.0, expected at 0 + 1.0: one second late, 11 answer tokens.
        got = qoe(self.curve, arrival_s=0.0, expected_ttfat_s=1.0, expected_tpot_s=0.1, answer_start_token=10)
        assert got == pytest.approx(6 / 17)

    def test_reasoning_end_anchor_starts_at_last_reasoning_token(self):
        # Last reasoning token at 1.9; TTFAT target 0.1 puts the expected first answer token at 2.0.
        got = qoe(
            self.curve, arrival_s=0.0, expected_ttfat_s=0.1, expected_tpot_s=0.1, answer_start_token=10,
            anchor="reasoning_end",
        )
        assert got == pytest.approx(1.0)
        late = qoe(
            self.curve, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1, answer_start_token=10,
            anchor="reasoning_end",
        )
        assert late == pytest.approx(delayed_qoe(11, 0.1, 0.1))

    def test_first_answer_token_anchor_judges_pace_only(self):
        slow = ((1.0, 1), (1.9, 10), (2.0, 11), (4.0, 21))  # answer tokens every 0.2 s
        got = qoe(slow, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1, answer_start_token=10,
                  anchor="first_answer_token")
        assert got == pytest.approx(12 / 17)  # same as half-speed delivery of 11 tokens

    def test_outcome_gives_arrival_and_reasoning_tokens(self):
        outcome = finished_outcome(self.curve, reasoning_tokens=10)
        assert qoe(outcome, expected_ttfat_s=1.0, expected_tpot_s=0.1) == pytest.approx(6 / 17)


class TestQoEInputChecks:
    def test_unknown_anchor_lists_known(self):
        with pytest.raises(ValueError, match="'finish'.*arrival, reasoning_end, first_answer_token"):
            qoe(((0.0, 1),), arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1, anchor="finish")

    @pytest.mark.parametrize(("ttfat_s", "tpot_s"), [(-0.1, 0.1), (math.nan, 0.1), (0.25, 0.0), (0.25, math.inf)])
    def test_bad_targets(self, ttfat_s, tpot_s):
        with pytest.raises(ValueError, match="expected_t"):
            qoe(((0.0, 1),), arrival_s=0.0, expected_ttfat_s=ttfat_s, expected_tpot_s=tpot_s)

    @pytest.mark.parametrize(
        ("curve", "message"),
        [
            ((), "empty"),
            (((1.0, 2), (0.5, 3)), "must not go back"),
            (((0.0, 3), (1.0, 2)), "must not go back"),
            (((0.0, 1.5),), "integer"),
            (((0.0, 0),), "at least 1"),
            (((math.nan, 1),), "finite"),
        ],
    )
    def test_bad_curves(self, curve, message):
        with pytest.raises(ValueError, match=message):
            qoe(curve, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1)

    def test_no_answer_tokens(self):
        with pytest.raises(ValueError, match="no answer tokens"):
            qoe(((0.0, 1), (1.0, 5)), arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1, answer_start_token=5)

    def test_negative_answer_start(self):
        with pytest.raises(ValueError, match="-1"):
            qoe(((0.0, 1),), arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1, answer_start_token=-1)

    def test_bare_curve_needs_arrival(self):
        with pytest.raises(ValueError, match="arrival_s is required"):
            qoe(((0.0, 1),), expected_ttfat_s=0.0, expected_tpot_s=0.1)

    def test_outcome_with_explicit_arrival_is_ambiguous(self):
        outcome = finished_outcome(((1.0, 1), (2.0, 11)))
        with pytest.raises(ValueError, match="come from the outcome"):
            qoe(outcome, arrival_s=0.0, expected_ttfat_s=0.0, expected_tpot_s=0.1)

    def test_rejected_outcome_has_no_qoe(self):
        outcome = finished_outcome(((1.0, 1),), rejected="kv_capacity")
        with pytest.raises(ValueError, match="rejected.*kv_capacity"):
            qoe(outcome, expected_ttfat_s=0.0, expected_tpot_s=0.1)

    def test_targets_record_checks_threshold_and_anchor(self):
        with pytest.raises(ValueError, match="violation_below"):
            QoETargets(0.25, 0.1, violation_below=1.5)
        with pytest.raises(ValueError, match="unknown QoE anchor 'end'"):
            QoETargets(0.25, 0.1, anchor="end")


def random_curves():
    """Curves as (gap_s, new_tokens) steps from a random start; zero gaps and zero new tokens allowed."""
    steps = st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(0, 30)), min_size=0, max_size=8)
    return st.tuples(st.floats(0.0, 5.0), st.integers(1, 5), steps).map(_build_curve)


def _build_curve(spec):
    start_s, first_tokens, steps = spec
    curve, time_s, tokens = [(start_s, first_tokens)], start_s, first_tokens
    for gap_s, new_tokens in steps:
        time_s, tokens = time_s + gap_s, tokens + new_tokens
        curve.append((time_s, tokens))
    return tuple(curve)


class TestQoEProperties:
    @settings(max_examples=200, deadline=None)
    @given(curve=random_curves(), ttfat_s=st.floats(0.0, 3.0), tpot_s=st.floats(0.01, 1.0), shift_s=st.floats(0.0, 4.0))
    def test_in_unit_interval_and_never_improved_by_delay(self, curve, ttfat_s, tpot_s, shift_s):
        score = qoe(curve, arrival_s=0.0, expected_ttfat_s=ttfat_s, expected_tpot_s=tpot_s)
        later = tuple((time_s + shift_s, tokens) for time_s, tokens in curve)
        later_score = qoe(later, arrival_s=0.0, expected_ttfat_s=ttfat_s, expected_tpot_s=tpot_s)
        assert 0.0 <= later_score <= score + 1e-9 <= 1.0 + 1e-9


class TestTokenCurve:
    curve = ((1.0, 1), (1.9, 10), (2.5, 11), (2.9, 15), (4.0, 16), (4.4, 20))

    def test_token_times_interpolate_and_jump_after_pause(self):
        assert token_time_s(self.curve, 1) == 1.0
        assert token_time_s(self.curve, 5) == pytest.approx(1.4)
        assert token_time_s(self.curve, 11) == pytest.approx(2.5)
        assert token_time_s(self.curve, 16) == pytest.approx(4.0)
        assert token_time_s(self.curve, 18) == pytest.approx(4.2)

    def test_max_gap_in_token_ranges(self):
        assert max_gap_s(self.curve, 1, 10) == pytest.approx(0.1)
        assert max_gap_s(self.curve, 10, 11) == pytest.approx(0.6)
        assert max_gap_s(self.curve, 11, 20) == pytest.approx(1.1)  # tokens 15 -> 16 across the pause
        assert math.isnan(max_gap_s(self.curve, 20, 20))

    def test_token_index_outside_curve(self):
        with pytest.raises(ValueError, match="21 outside 1..20"):
            token_time_s(self.curve, 21)

    @settings(max_examples=200, deadline=None)
    @given(curve=random_curves(), data=st.data())
    def test_max_gap_equals_token_by_token_scan(self, curve, data):
        validate_token_curve(curve)
        total = curve[-1][1]
        after = data.draw(st.integers(0, total))
        last = data.draw(st.integers(after, total))
        gaps = [token_time_s(curve, k) - token_time_s(curve, k - 1) for k in range(max(after + 1, 2), last + 1)]
        got = max_gap_s(curve, after, last)
        if gaps:
            assert got == pytest.approx(max(gaps))
        else:
            assert math.isnan(got)


def test_violation_threshold_is_in_0_exclusive_to_1_inclusive():
    assert QoETargets(0.25, 0.1, violation_below=1.0).violation_below == 1.0
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"^violation_below must be in \(0, 1\], got {bad!r}$"):
            QoETargets(0.25, 0.1, violation_below=bad)


def test_no_answer_tokens_names_the_delivered_count():
    curve = ((1.0, 1), (2.0, 2), (3.0, 4))
    with pytest.raises(ValueError, match=r"^no answer tokens: answer_start_token 4 >= 4 delivered$"):
        qoe(curve, expected_ttfat_s=0.25, expected_tpot_s=0.1, arrival_s=0.0, answer_start_token=4)


def test_an_outcome_brings_its_own_arrival():
    done = RequestOutcome(
        request_id=0, tier=0, instance_id=0, arrival_s=0.0, prompt_tokens=1, output_tokens=2, reasoning_tokens=0,
        first_scheduled_s=0.0, first_token_s=1.0, first_answer_token_s=1.0, reasoning_end_s=math.nan, finish_s=2.0,
        max_tbt_s=1.0, preempted_s=0.0, num_preemptions=0, num_migrations=0, token_curve=((1.0, 1), (2.0, 2)), slo=SLO(),
    )
    with pytest.raises(ValueError, match=r"^arrival_s and answer_start_token come from the outcome; pass them only with a bare curve$"):
        qoe(done, expected_ttfat_s=0.25, expected_tpot_s=0.1, arrival_s=0.0)


@pytest.mark.parametrize("start", [0, 1, 2])
def test_anchors_equal_the_arrival_anchor_moved_to_their_moment(start):
    """``reasoning_end`` anchors at the last reasoning token (token ``start``; arrival when there
    is none), ``first_answer_token`` at the first answer token (interpolated inside a step of the
    curve): each is the ``arrival`` anchor with the arrival moved there."""
    curve = ((1.0, 2), (3.0, 6), (4.0, 9))
    targets = {"expected_ttfat_s": 0.25, "expected_tpot_s": 0.2}
    arrival_s = 0.5

    def at(anchor, arrival):
        return qoe(curve, **targets, arrival_s=arrival, answer_start_token=start, anchor=anchor)

    reasoning_end_s = token_time_s(curve, start) if start else arrival_s
    assert at("reasoning_end", arrival_s) == at("arrival", reasoning_end_s)
    assert at("first_answer_token", arrival_s) == at("arrival", token_time_s(curve, start + 1))
    assert at("arrival", arrival_s) < 1.0  # every anchor's QoE below the cap, so a moved anchor shows


def _reference_read(delivered: list[tuple[float, float]], rate: float, t: float) -> float:
    """Tokens read by ``t`` by a reader who never reads faster than ``rate`` nor ahead of
    delivery: ``min over s <= t of D(s) + rate * (t - s)``, D the piecewise-linear delivery
    (flat after its last point). The minimum over s sits at one of D's points or at s = t."""
    candidates = [_curve_at(delivered, t)] + [y + rate * (t - s) for s, y in delivered if s <= t]
    return min(candidates)


def _curve_at(points: list[tuple[float, float]], t: float) -> float:
    """The piecewise-linear curve through ``points`` at ``t`` (flat after the last point; the
    last of several points at one time counts)."""
    if t >= points[-1][0]:
        return points[-1][1]
    for (t0, y0), (t1, y1) in zip(points, points[1:]):
        if t0 <= t < t1:
            return y0 + (y1 - y0) * (t - t0) / (t1 - t0)
    raise AssertionError(t)


def _random_delivery(rng) -> list[tuple[float, float]]:
    times, counts = [0.0], [1.0]
    for _ in range(int(rng.integers(1, 12))):
        times.append(times[-1] + float(rng.choice([0.0, 0.25, 0.5, rng.exponential(0.4)])))
        counts.append(counts[-1] + float(rng.integers(0, 6)))
    return list(zip(times, counts))


@pytest.mark.parametrize("seed", range(300))
def test_digested_curve_is_the_slowest_reader_that_keeps_pace_and_never_reads_ahead(seed):
    import numpy as np

    from simulator.metrics.qoe import _digested_curve

    rng = np.random.default_rng(seed)
    delivered = _random_delivery(rng)
    rate = float(rng.choice([2.0, 4.0, 8.0, rng.uniform(0.5, 20.0)]))
    digested = _digested_curve(delivered, rate)
    assert [t for t, _ in digested] == sorted(t for t, _ in digested)
    probes = sorted({t for t, _ in delivered + digested} | {t + 0.1 for t, _ in delivered + digested})
    probes += [(a + b) / 2 for a, b in zip(probes, probes[1:])]
    for t in probes:
        assert _curve_at(digested, t) == pytest.approx(_reference_read(delivered, rate, t), rel=1e-9, abs=1e-9), (
            delivered, rate, t)


@pytest.mark.parametrize(
    "delivered,rate,expected",
    [
        # Delivery at exactly the pace, no backlog: the reader follows it.
        ([(0.0, 1.0), (1.0, 5.0), (2.0, 9.0)], 4.0, [(0.0, 1.0), (1.0, 5.0), (2.0, 9.0)]),
        # A burst of 4 tokens at t=0, then delivery at 0.5 token/s: read at 4 token/s until
        # 1 + 4 t = 5 + 0.5 t, at t = 8/7 s.
        ([(0.0, 1.0), (0.0, 5.0), (2.0, 6.0)], 4.0, [(0.0, 1.0), (8.0 / 7.0, 5.0 + 0.5 * 8.0 / 7.0), (2.0, 6.0)]),
        # A backlog of half a token, delivery at 0.25 token/s: read at 1 token/s until
        # 1 + t = 1.5 + 0.25 t, at t = 2/3 s.
        ([(0.0, 1.0), (0.0, 1.5), (4.0, 2.5)], 1.0, [(0.0, 1.0), (2.0 / 3.0, 1.5 + 0.25 * 2.0 / 3.0), (4.0, 2.5)]),
    ],
)
def test_digested_curve_catches_up_where_pace_meets_delivery(delivered, rate, expected):
    from simulator.metrics.qoe import _digested_curve

    digested = _digested_curve(delivered, rate)
    assert len(digested) == len(expected)
    assert [value for point in digested for value in point] == pytest.approx(
        [value for point in expected for value in point], rel=1e-12)


def test_the_last_reasoning_token_is_not_an_answer_point():
    # Reasoning ends with token 10 at t=1.0; answer tokens 11..20 arrive by t=1.1, the 11th at
    # 1.01 (interpolated), far faster than the pace of 10 tokens/s. The reader reads 1 token at
    # 1.01, 1 + 0.9 = 1.9 by 1.1, and the last of the 10 at 1.1 + 8.1 / 10 = 1.91.
    # Digested area from 1.01 to 1.91: 0.09 (1 + 1.9) / 2 + 0.81 (1.9 + 10) / 2 = 4.95.
    # Expected (start 0.5, 10 tokens at 0.1 s): 0.9 (1 + 10) / 2 + 10 (1.91 - 1.4) = 10.05.
    curve = ((0.0, 1), (1.0, 10), (1.1, 20))
    got = qoe(curve, arrival_s=0.0, expected_ttfat_s=0.5, expected_tpot_s=0.1, answer_start_token=10)
    assert got == pytest.approx(4.95 / 10.05, rel=1e-9)
