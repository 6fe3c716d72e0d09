"""envs.rewards ``ttft_dense`` (and ``ttft_balance``): the tier-weighted waiting for a first token, charged per step
(hand-computed overlaps, rejections, a first token recorded ahead of the clock) and summing over
an episode to −Σ w_tier · TTFT (Little's law)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the IDs)
from envs.rewards import DenseTTFTReward
from envs.scenarios.multitier import multitier
from simulator.outcome import RequestOutcome
from simulator.request import SLO, Request
from simulator.sequence import Sequence


def fake_cluster(now_s: float, sequences: list[Sequence]) -> SimpleNamespace:
    return SimpleNamespace(events=SimpleNamespace(now_s=now_s), arrived_sequences=sequences)


def rejection(seq: Sequence, at_s: float) -> RequestOutcome:
    return RequestOutcome(
        request_id=seq.request_id, tier=seq.tier, instance_id=0, arrival_s=seq.arrival_s, prompt_tokens=1,
        output_tokens=1, reasoning_tokens=0, first_scheduled_s=math.nan, first_token_s=math.nan,
        first_answer_token_s=math.nan, reasoning_end_s=math.nan, finish_s=at_s, max_tbt_s=0.0, preempted_s=0.0,
        num_preemptions=0, num_migrations=0, token_curve=(), slo=SLO(), rejected_reason="exceeds_kv_capacity",
    )


def test_each_step_charges_the_weighted_overlap_of_every_wait_with_it():
    """K = 4 tiers, weights 8 / 4 / 2 / 1 normalised to 1 / 0.5 / 0.25 / 0.125."""
    reward = DenseTTFTReward(multitier())
    assert reward.weights == [1.0, 0.5, 0.25, 0.125]
    a, b, c = (Sequence(Request(i, arrival, 10, 5, tier=tier), False)
               for i, (arrival, tier) in enumerate([(0.5, 0), (1.0, 2), (2.5, 1)]))
    sequences: list[Sequence] = []
    reward.reset(fake_cluster(0.0, sequences))
    sequences += [a, b]
    a.first_token_s = 1.2
    assert reward(fake_cluster(2.0, sequences), []) == pytest.approx(-(1.0 * 0.7 + 0.25 * 1.0))
    sequences.append(c)
    c.first_token_s = 3.5  # recorded ahead of the clock (an iteration in progress): c still waits at 3.0
    assert reward(fake_cluster(3.0, sequences), [rejection(b, 2.4)]) == pytest.approx(-(0.25 * 0.4 + 0.5 * 0.5))
    assert reward(fake_cluster(4.0, sequences), []) == pytest.approx(-0.5 * 0.5)
    assert reward(fake_cluster(5.0, sequences), []) == 0.0


@pytest.mark.parametrize("reward", ["ttft_dense", "ttft_balance"])
def test_an_episode_sums_to_minus_the_tier_weighted_ttft(reward):
    """``ttft_balance``'s shaping telescopes to Φ(end) − Φ(start) = 0: the cluster is empty at both ends."""
    env = gym.make("servegym/Routing-v0", scenario="multitier", reward=reward, episode_requests=200)
    env.reset(seed=5)
    total, truncated, step = 0.0, False, 0
    while not truncated:
        _, step_reward, _, truncated, _ = env.step(step % 2)  # two of the four replicas: long queues
        total += step_reward
        step += 1
    outcomes = env.unwrapped.cluster.outcomes
    weights = env.unwrapped.reward_fn.weights
    assert len(outcomes) == 200 and {o.tier for o in outcomes} == {0, 1, 2, 3}
    assert total == pytest.approx(-sum(weights[o.tier] * o.ttft_s for o in outcomes), rel=1e-9)
    assert total < -200 * 0.125 * 0.5  # the queues cost: more than half a second per request on average


def test_a_new_reward_starts_as_if_reset_on_an_empty_cluster_at_time_0():
    reward = DenseTTFTReward(multitier())  # no reset
    a, b = (Sequence(Request(i, arrival, 10, 5, tier=0), False) for i, arrival in enumerate([0.5, 1.5]))
    a.first_token_s = 1.0
    # a waited 0.5 -> 1.0, b waits 1.5 -> 2.0 (no first token yet): 0.5 + 0.5, tier 0 weighs 1.
    assert reward(fake_cluster(2.0, [a, b]), []) == pytest.approx(-1.0)
    assert reward(fake_cluster(3.0, [a, b]), []) == pytest.approx(-1.0)  # b still waits


def test_a_request_waiting_at_reset_is_charged_once():
    reward = DenseTTFTReward(multitier())
    a = Sequence(Request(0, 0.5, 10, 5, tier=0), False)
    reward.reset(fake_cluster(1.0, [a]))  # a arrived before the reset and waits
    assert reward(fake_cluster(3.0, [a]), []) == pytest.approx(-2.0)  # 1.0 -> 3.0, once


def test_a_request_rejected_exactly_at_the_step_is_charged_until_then_only():
    reward = DenseTTFTReward(multitier())
    a = Sequence(Request(0, 0.5, 10, 5, tier=0), False)
    reward.reset(fake_cluster(0.0, []))
    assert reward(fake_cluster(2.0, [a]), [rejection(a, 2.0)]) == pytest.approx(-1.5)  # 0.5 -> 2.0
    assert reward(fake_cluster(3.0, [a]), []) == 0.0  # it ended: nothing after its rejection
