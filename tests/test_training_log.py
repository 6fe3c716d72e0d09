"""A run's training log and progress bar across resumes (``agents.training_log``)."""

from __future__ import annotations

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from agents.training_log import ContinuedCSVOutputFormat, ContinuedLogger, StepProgressBar, planned_steps


def _ppo(n_steps: int, n_envs: int) -> PPO:
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")] * n_envs)
    return PPO("MlpPolicy", venv, n_steps=n_steps, batch_size=n_steps, n_epochs=1, seed=0, device="cpu",
               policy_kwargs={"net_arch": [8]})


def test_the_progress_bar_total_is_the_steps_learn_takes_and_it_ends_there():
    # The main job: 2 envs x 1,024 steps a rollout; 100,000 steps take 49 rollouts = 100,352 steps.
    assert planned_steps(_ppo(1024, 2), 100_000) == 100_352
    model = _ppo(32, 2)
    bar = StepProgressBar(100)
    model.learn(total_timesteps=100, callback=bar)
    assert model.num_timesteps == 128 and bar.bar.total == 128 and bar.bar.n == 128


def test_a_continued_csv_keeps_the_rows_up_to_the_checkpoint_and_drops_the_rest(tmp_path):
    path = tmp_path / "progress.csv"
    path.write_text("time/iterations,time/total_timesteps,train/loss\n1,64,\n2,128,0.5\n,,0.25\n3,192,0.1\n4,25")
    table = ContinuedCSVOutputFormat(str(path), steps=128)
    logger = ContinuedLogger(None, [table], iteration_offset=2)
    logger.record("time/iterations", 1)
    logger.record("time/total_timesteps", 192)
    logger.record("train/loss", 0.75)
    logger.dump(192)
    logger.close()
    # Rows 1-2 kept with the losses row after them (the last update before the checkpoint), the
    # rows past 128 steps and the half-written one dropped; the new row counts on from iteration 2.
    assert path.read_text() == ("time/iterations,time/total_timesteps,train/loss\n1,64,\n2,128,0.5\n,,0.25\n"
                                "3,192,0.75\n")
