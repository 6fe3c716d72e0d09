"""What a Gymnasium or SB3 user does every day works: SB3's ``make_vec_env`` (which asks for
``render_mode="rgb_array"``), the picture it renders, ``RecordVideo`` (the ``video`` extra),
SB3's ``check_env`` on the flattened wrapper without a warning, episodes no ``TimeLimit`` cuts,
and env IDs that resolve in ``spawn``-ed worker processes through Gymnasium's ``"module:ID"`` form."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import RecordVideo, TimeLimit
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

import envs  # noqa: F401  (registers the environments)
from envs.frame import BACKGROUND, FRAME_WIDTH, HEADER_PX, KV_COLOUR, KV_PX, ROW_PX, RUNNING_COLOUR, STATE_COLOURS, STATE_PX, GAP_PX
from envs.random_policy import random_masked_action
from envs.wrappers import FlattenServingObservation

ROUTING = "servegym/Routing-v0"


def test_rgb_array_frame_draws_each_instances_state_kv_and_running_requests():
    env = gym.make(ROUTING, render_mode="rgb_array", disable_env_checker=True).unwrapped
    env.reset(seed=0)
    for _ in range(40):
        env.step(int(np.flatnonzero(env.action_masks())[0]))  # everything to the first instance
    frame = env.render()
    slots = env.scenario.max_instances
    assert frame.dtype == np.uint8 and frame.shape == (HEADER_PX + slots * ROW_PX, FRAME_WIDTH, 3)
    for slot, instance_id in enumerate(env.slot_instance_ids()):
        mid = frame[HEADER_PX + slot * ROW_PX + ROW_PX // 2]
        if instance_id is None:
            assert np.all(mid == BACKGROUND)
            continue
        instance = env.cluster.instances[instance_id]
        assert tuple(mid[0]) == STATE_COLOURS[instance.lifecycle]
        kv = mid[STATE_PX + GAP_PX:STATE_PX + GAP_PX + KV_PX]
        expected_kv_px = round(KV_PX * instance.kv.used_blocks / instance.kv.total_blocks)
        assert int(np.all(kv == KV_COLOUR, axis=1).sum()) == expected_kv_px
        requests = mid[STATE_PX + KV_PX + 2 * GAP_PX:]
        assert int(np.all(requests == RUNNING_COLOUR, axis=1).sum()) == len(instance.running)
    first = env.cluster.instances[env.slot_instance_ids()[0]]
    assert len(first.running) + len(first.waiting) > 0  # the frame above showed real load


def test_sb3_make_vec_env_builds_renders_and_steps():
    vec_env = make_vec_env(ROUTING, n_envs=2, seed=0)
    vec_env.reset()
    vec_env.step(np.zeros(2, dtype=np.int64))
    frames = vec_env.get_images()
    assert len(frames) == 2 and all(frame.ndim == 3 and frame.shape[2] == 3 for frame in frames)
    vec_env.close()


def test_module_qualified_id_resolves_in_spawned_workers():
    vec_env = make_vec_env(f"envs:{ROUTING}", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv,
                           vec_env_kwargs={"start_method": "spawn"})
    observations = vec_env.reset()
    assert observations["instances"].shape[0] == 2
    vec_env.close()


def test_reward_kwargs_build_the_same_reward_as_the_envs_own_arguments():
    by_env = gym.make("servegym/Scaling-v0", scenario="cauchy", action="one_unit", reference_tokens_per_usd=7.5e6,
                      waiting_potential=0.5, disable_env_checker=True).unwrapped
    by_kwargs = gym.make("servegym/Scaling-v0", scenario="cauchy", action="one_unit",
                         reward_kwargs={"reference_tokens_per_usd": 7.5e6, "waiting_potential": 0.5},
                         disable_env_checker=True).unwrapped
    for env in (by_env, by_kwargs):
        assert type(env.reward_fn).__name__ == "CostReward" and env.reward_fn.waiting_potential == 0.5
    rewards = []
    for env in (by_env, by_kwargs):
        env.reset(seed=0)
        rewards.append([env.step(0)[1] for _ in range(5)])
    assert rewards[0] == rewards[1]


def test_the_last_info_carries_every_request_outcome_and_rollout_returns_them():
    from agents.rollout import play_episodes

    (episode,) = play_episodes("round_robin", ROUTING, [3], episode_requests=25)
    assert len(episode.outcomes) == 25 == episode.metrics["arrived"]
    assert sorted(o.request_id for o in episode.outcomes) == list(range(25))  # each request once
    completed = [o for o in episode.outcomes if o.completed]
    assert len(completed) == episode.metrics["completed"]
    assert max(o.finish_s for o in completed) <= episode.metrics["duration_s"]


def test_every_scenario_exists_after_import_envs_alone():
    """The GPU-combo scenario ``cauchy_autoscaling`` is built in ``envs`` (its plan stored as
    data), so a fresh process that imports only ``envs`` can make every preset on Scaling-v0."""
    import subprocess
    import sys

    code = (
        "import sys, gymnasium as gym, envs\n"
        "env = gym.make('servegym/Scaling-v0', scenario='cauchy_autoscaling', episode_requests=200)\n"
        "env.reset(seed=0)\n"
        "print(len(env.unwrapped.scenario.combos), 'baselines' in sys.modules, sorted(envs.scenario_names()))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    combos, baselines_loaded, names = result.stdout.split(" ", 2)
    assert (combos, baselines_loaded) == ("12", "False")
    assert "'cauchy_autoscaling'" in names



def test_random_masked_action_draws_what_rng_choice_draws_and_refuses_an_empty_mask():
    space = gym.spaces.Discrete(9)
    masks = np.random.default_rng(5)
    mine, reference = np.random.default_rng(11), np.random.default_rng(11)
    for _ in range(500):
        mask = masks.random(9) < 0.5
        mask[int(masks.integers(9))] = True
        assert random_masked_action(space, mask, mine) == int(reference.choice(np.flatnonzero(mask)))
    with pytest.raises(ValueError, match="no valid action"):
        random_masked_action(space, np.zeros(9, dtype=bool), mine)


@pytest.mark.parametrize("env_id", sorted(envs.ENV_IDS))
def test_sb3_check_env_passes_without_a_warning_on_the_flattened_wrapper(env_id):
    env = FlattenServingObservation(gym.make(env_id, episode_requests=20))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        check_env(env, warn=True)
    env.close()


def test_routing_episode_is_one_step_per_arrival_and_no_time_limit_cuts_it():
    env = gym.make(ROUTING, episode_requests=37)
    assert env.spec.max_episode_steps is None and not any(
        isinstance(wrapper, TimeLimit) for wrapper in _wrappers(env))  # a longer episode_requests is never cut
    env.reset(seed=3)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[-1]))
        steps, done = steps + 1, terminated or truncated
    assert (steps, terminated, truncated) == (37, False, True)  # the env ends the episode itself, at its last arrival


def test_record_video_writes_an_episode(tmp_path):
    pytest.importorskip("moviepy", reason="the video extra: pip install -e '.[video]'")
    env = RecordVideo(gym.make(ROUTING, render_mode="rgb_array", episode_requests=15), video_folder=str(tmp_path),
                      episode_trigger=lambda episode: True, disable_logger=True)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
        done = terminated or truncated
    env.close()
    (video,) = tmp_path.glob("*.mp4")
    assert video.stat().st_size > 1_000


def _wrappers(env: gym.Env) -> list[gym.Env]:
    chain = [env]
    while isinstance(chain[-1], gym.Wrapper):
        chain.append(chain[-1].env)
    return chain
