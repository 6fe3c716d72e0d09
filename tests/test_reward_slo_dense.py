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
