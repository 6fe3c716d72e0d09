"""envs.rewards ``slo_dense`` (and ``slo_balance``): every SLO miss charged once, at the moment it
is certain (a passed TTFT deadline, a passed TPOT deadline, or the request's end), so an
episode's return is exactly −Σ over missed requests of w_tier / max w."""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the IDs)
from envs.rewards import SLOMissReward
from envs.scenarios.default import default
from simulator.metrics import meets_slo
from simulator.outcome import RequestOutcome
from simulator.request import SLO, Request
from simulator.sequence import Sequence

TARGET = SLO(ttft_s=1.0, tbt_s=0.1)


def fake_cluster(now_s: float, sequences: list[Sequence]) -> SimpleNamespace:
    return SimpleNamespace(events=SimpleNamespace(now_s=now_s), arrived_sequences=sequences)


def outcome(seq: Sequence, first_token_s: float, finish_s: float, rejected: bool = False) -> RequestOutcome:
    return RequestOutcome(
        request_id=seq.request_id, tier=seq.tier, instance_id=0, arrival_s=seq.arrival_s, prompt_tokens=10,
        output_tokens=seq.output_tokens, reasoning_tokens=0, first_scheduled_s=math.nan, first_token_s=first_token_s,
        first_answer_token_s=math.nan, reasoning_end_s=math.nan, finish_s=finish_s, max_tbt_s=0.0, preempted_s=0.0,
        num_preemptions=0, num_migrations=0, token_curve=(), slo=TARGET,
        rejected_reason="exceeds_kv_capacity" if rejected else None,
    )


def test_each_miss_is_charged_once_when_it_becomes_certain():
    """a: first token at 0.5 s, 11 tokens, so its TPOT deadline is 0.5 + 0.1 x 10 = 1.5 s; it ends
    at 2.0 s (TPOT 0.15 s, a miss already charged). b: no first token by its deadline 0.2 + 1 = 1.2 s.
    c: rejected at 0.3 s, before its TTFT deadline 1.3 s. d: first token at 0.6 s, ends at 1.4 s,
    before its TPOT deadline 0.6 + 0.1 x 10 = 1.6 s (met)."""
    reward = SLOMissReward(default())
    a, b, c, d = (Sequence(Request(i, arrival, 10, 11, slo=TARGET), False)
                  for i, arrival in enumerate([0.0, 0.2, 0.25, 0.3]))
    sequences: list[Sequence] = []
    reward.reset(fake_cluster(0.0, sequences))
    sequences += [a, b, c, d]
    a.first_token_s, d.first_token_s = 0.5, 0.6
    assert reward(fake_cluster(0.4, sequences), [outcome(c, math.nan, 0.3, rejected=True)]) == -1.0  # c
    assert reward(fake_cluster(1.0, sequences), []) == 0.0
    assert reward(fake_cluster(1.25, sequences), []) == -1.0  # b's TTFT deadline passed
    assert reward(fake_cluster(1.45, sequences), [outcome(d, 0.6, 1.4)]) == 0.0
    assert reward(fake_cluster(1.55, sequences), []) == -1.0  # a's TPOT deadline passed, a still decoding
    b.first_token_s = 1.7
    assert reward(fake_cluster(2.5, sequences), [outcome(a, 0.5, 2.0), outcome(b, 1.7, 2.4)]) == 0.0
    assert reward(fake_cluster(9.0, sequences), []) == 0.0


@pytest.mark.parametrize(("scenario", "reward", "rate_rps"), [
    ("default", "slo_dense", 13.0), ("default", "slo_dense", 20.0), ("default", "slo_balance", 16.0),
    ("multitier", "slo_dense", None),
])
def test_an_episode_sums_to_minus_the_tier_weighted_misses(scenario, reward, rate_rps):
    """Over a whole episode every miss is charged exactly once (and ``slo_balance``'s shaping
    telescopes to 0): the return is −Σ over missed requests of w_tier / max w."""
    overrides = {} if rate_rps is None else {"rate_rps": rate_rps}
    env = gym.make("servegym/Routing-v0", scenario=scenario, reward=reward, episode_requests=300, **overrides)
    env.reset(seed=3)
    total, truncated, step = 0.0, False, 0
    while not truncated:
        _, step_reward, _, truncated, _ = env.step(step % 3)  # three replicas only: queues and misses
        total += step_reward
        step += 1
    outcomes = env.unwrapped.cluster.outcomes
    weights = env.unwrapped.reward_fn.weights
    missed = [o for o in outcomes if not meets_slo(o)]
    assert len(outcomes) == 300 and 30 < len(missed) < 300
    assert total == pytest.approx(-sum(weights[o.tier] for o in missed), rel=1e-12)


def test_a_new_reward_starts_as_if_reset_on_an_empty_cluster_at_time_0():
    """a: no first token by its deadline 1.0 s; b: rejected at 0.5 s; c: first token at 0.75 s, in
    time (deadline 1.5 s), 11 tokens, so its TPOT deadline is 0.75 + 0.1 x 10 = 1.75 s."""
    reward = SLOMissReward(default())  # no reset
    a, b, c = (Sequence(Request(i, arrival, 10, 11, slo=TARGET), False) for i, arrival in enumerate([0.0, 0.25, 0.5]))
    c.first_token_s = 0.75
    assert reward(fake_cluster(1.5, [a, b, c]), [outcome(b, math.nan, 0.5, rejected=True)]) == -2.0  # a and b
    assert reward(fake_cluster(2.0, [a, b, c]), []) == -1.0  # c still decoding after 1.75 s


def test_deadlines_falling_exactly_on_a_step():
    """a: arrives at 0.5 s, TTFT deadline 1.5 s = the step, no first token: a miss at that step.
    b: first token exactly at its TTFT deadline 0.25 + 1 = 1.25 s (met); TPOT deadline 1.25 + 1.0
    = 2.25 s: still decoding then could end in time, so the miss is charged after 2.25 s."""
    reward = SLOMissReward(default())
    reward.reset(fake_cluster(0.0, []))
    a, b = (Sequence(Request(i, arrival, 10, 11, slo=TARGET), False) for i, arrival in enumerate([0.5, 0.25]))
    b.first_token_s = 1.25
    assert reward(fake_cluster(1.5, [a, b]), []) == -1.0  # a only
    assert reward(fake_cluster(2.25, [a, b]), []) == 0.0
    assert reward(fake_cluster(2.5, [a, b]), []) == -1.0  # b


def test_every_deadline_a_step_passes_is_handled_in_that_step():
    """c is rejected (charged through its outcome) and has the earliest TTFT deadline (1.0 s);
    d and e get no first token by theirs (1.1 s, 1.2 s): all three are charged at the 1.5 s step."""
    reward = SLOMissReward(default())
    reward.reset(fake_cluster(0.0, []))
    c, d, e = (Sequence(Request(i, arrival, 10, 11, slo=TARGET), False) for i, arrival in enumerate([0.0, 0.1, 0.2]))
    assert reward(fake_cluster(1.5, [c, d, e]), [outcome(c, math.nan, 0.4, rejected=True)]) == -3.0
    assert reward(fake_cluster(2.0, [c, d, e]), []) == 0.0


def test_tpot_deadlines_only_for_requests_with_a_decode_target_and_more_than_one_token():
    """All arrive at 0 s with their first token at 0.5 s (in time) and are still running at 1.5 s.
    one: a single token has no gap, no TPOT deadline. two: 2 tokens, TPOT deadline 0.6 s: a miss.
    no_tbt: a TTFT target only. e2e_only: no TTFT target, so no TTFT deadline either."""
    reward = SLOMissReward(default())
    reward.reset(fake_cluster(0.0, []))
    one = Sequence(Request(0, 0.0, 10, 1, slo=TARGET), False)
    two = Sequence(Request(1, 0.0, 10, 2, slo=TARGET), False)
    no_tbt = Sequence(Request(2, 0.0, 10, 11, slo=SLO(ttft_s=1.0)), False)
    e2e_only = Sequence(Request(3, 0.0, 10, 11, slo=SLO(e2e_s=5.0)), False)
    sequences = [one, two, no_tbt, e2e_only]
    for seq in sequences:
        seq.first_token_s = 0.5
    assert reward(fake_cluster(1.5, sequences), []) == -1.0  # two only
    assert reward(fake_cluster(10.0, sequences), []) == 0.0


def test_requests_arrived_before_the_reset_are_watched():
    reward = SLOMissReward(default())
    a = Sequence(Request(0, 0.0, 10, 11, slo=TARGET), False)
    reward.reset(fake_cluster(0.5, [a]))
    assert reward(fake_cluster(1.5, [a]), []) == -1.0  # no first token by 1.0 s
