"""agents.noop_prior: the first policy holds with probability e^b / (e^b + n − 1), the bias
survives save / load, and bad arguments are named."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.config import ServegymMaskablePPO
from envs.scaling import ScalingEnv

ROOM = {"gpu_inventory": {"A100-80GB": 5, "L40S": 5}, "max_instances": 10}


def one_unit_env(**kwargs):
    return ScalingEnv("default", action=kwargs.pop("action", "one_unit"), episode_requests=50, scaling_window_s=2.0,
                      **ROOM, **kwargs)


def first_probabilities(model, env) -> np.ndarray:
    obs, _ = env.reset(seed=0)
    tensor, _ = model.policy.obs_to_tensor(obs)
    return model.policy.get_distribution(tensor).distribution.probs.detach().numpy()[0]


@pytest.mark.parametrize("logit", [0.0, 3.0, 5.0])
def test_first_policy_holds_with_the_softmax_probability_of_the_bias(logit):
    env = one_unit_env()
    env.reset(seed=0)
    assert env.action_masks().all()  # every action open at reset: the softmax is over all 5
    model = ServegymMaskablePPO("NoOpPriorPolicy", env, policy_kwargs={"noop_logit": logit}, seed=0)
    probabilities = first_probabilities(model, env)
    expected = math.exp(logit) / (math.exp(logit) + env.action_space.n - 1)
    assert probabilities[0] == pytest.approx(expected, abs=0.01)  # the other logits start within ~0.01 of 0
    assert probabilities[1:] == pytest.approx((1 - expected) / 4, abs=0.01)


def test_bias_and_arguments_survive_save_and_load(tmp_path):
    env = one_unit_env()
    model = ServegymMaskablePPO("NoOpPriorPolicy", env, policy_kwargs={"noop_logit": 4.0, "noop_action": 2}, seed=1)
    model.save(tmp_path / "model.zip")
    loaded = ServegymMaskablePPO.load(tmp_path / "model.zip")
    assert loaded.policy._noop == (2, 4.0)
    assert np.array_equal(first_probabilities(loaded, env), first_probabilities(model, env))
    assert int(np.argmax(first_probabilities(loaded, env))) == 2


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="needs a Discrete action space, got MultiDiscrete"):
        ServegymMaskablePPO("NoOpPriorPolicy", one_unit_env(action="per_kind"), policy_kwargs={"noop_logit": 1.0})
    with pytest.raises(ValueError, match=r"noop_action must be an action of Discrete\(5\), got 5"):
        ServegymMaskablePPO("NoOpPriorPolicy", one_unit_env(), policy_kwargs={"noop_action": 5})
    with pytest.raises(ValueError, match="noop_logit must be a finite number, got nan"):
        ServegymMaskablePPO("NoOpPriorPolicy", one_unit_env(), policy_kwargs={"noop_logit": float("nan")})
