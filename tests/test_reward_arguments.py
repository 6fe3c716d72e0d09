"""Reward constructors (``envs.rewards``): each argument accepted up to its bounds and refused
just past them with a message naming it, the defaults the papers give, and what a reward builds
from the scenario (Cascadia §3.3's utopia and nadir; ``make_reward``'s argument lists)."""

from __future__ import annotations

import pytest

from envs.presets import make_scenario
from envs.rewards import CostReward, QualityReward, make_reward
from simulator.cascade_quality import stage_mean_scores


@pytest.fixture(scope="module")
def cascadeserve():
    return make_scenario("cascadeserve")


def test_quality_reward_defaults_bounds_and_its_utopia_and_nadir(cascadeserve):
    """q_min 80 and μ 100 by default (Cascadia's example); q_min in [0, 100] and μ >= 0 inclusive;
    z₂ and z₁ the first and the last of the four models' mean scores, under the difficulty asked."""
    reward = QualityReward(cascadeserve)
    assert (reward.quality_min, reward.penalty_mu) == (80.0, 100.0)
    means = stage_mean_scores(cascadeserve.cascade)
    assert len(means) == 4 and (reward.nadir, reward.utopia) == (means[0], means[3])
    harder = stage_mean_scores(cascadeserve.cascade, difficulty_mean=0.5)
    shifted = QualityReward(cascadeserve, difficulty_mean=0.5)
    assert (shifted.nadir, shifted.utopia) == (harder[0], harder[3]) != (means[0], means[3])
    for quality_min in (0.0, 100.0):
        assert QualityReward(cascadeserve, quality_min=quality_min).quality_min == quality_min
    assert QualityReward(cascadeserve, penalty_mu=0.0).penalty_mu == 0.0
    for quality_min in (-0.5, 100.5):
        with pytest.raises(ValueError, match=f"^quality_min must be in \\[0, 100\\], got {quality_min}$"):
            QualityReward(cascadeserve, quality_min=quality_min)
    with pytest.raises(ValueError, match="^penalty_mu must be >= 0, got -1.0$"):
        QualityReward(cascadeserve, penalty_mu=-1.0)


def test_quality_reward_needs_a_cascade_whose_last_model_scores_above_its_first(cascadeserve):
    with pytest.raises(ValueError, match="^reward 'quality' needs a cascade of at least two models; scenario 'default' "
                                         "has cascade=\\[\\]$"):
        QualityReward(make_scenario("default"))
    with pytest.raises(ValueError, match="^the cascade's last model \\(OpenLlama-3B, mean score 42.47\\) must score "
                                         "above its first \\(Llama-2-70B, 74.38\\)$"):
        QualityReward(cascadeserve.with_overrides(cascade=("Llama-2-70B", "Llama-2-13B", "OpenLlama-3B")))
    with pytest.raises(ValueError, match="must score above its first \\(Llama-2-7B, 50.03\\)$"):  # equal: not above
        QualityReward(cascadeserve.with_overrides(cascade=("Llama-2-7B", "Llama-2-7B")))


def test_cost_reward_takes_any_positive_reference_price(cascadeserve):
    assert CostReward(cascadeserve, reference_tokens_per_usd=0.5).usd_weight == 0.5 / 1000.0
    with pytest.raises(ValueError, match="^reference_tokens_per_usd must be a positive finite number, got 0$"):
        CostReward(cascadeserve, reference_tokens_per_usd=0)


def test_make_reward_lists_the_arguments_a_reward_takes_through_its_bases(cascadeserve):
    """``quality_episode``'s ``__init__`` passes ``**kwargs`` on, so it takes ``quality``'s."""
    taken = "\\['quality_min', 'penalty_mu', 'kind', 'difficulty_mean'\\]"
    for name in ("quality", "quality_episode"):
        with pytest.raises(ValueError, match=f"^reward '{name}' takes no argument\\(s\\) \\['bogus'\\]; it takes: {taken}$"):
            make_reward(name, cascadeserve, bogus=1)
    with pytest.raises(ValueError, match="^reward 'slo' takes no argument\\(s\\) \\['bogus'\\]; it takes: \\[\\]$"):
        make_reward("slo", cascadeserve, bogus=1)
    assert make_reward("quality_episode", cascadeserve, penalty_mu=50.0).penalty_mu == 50.0
