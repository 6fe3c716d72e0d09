"""Environment speed benchmark: env steps per second with a random masked policy for each
registered ID on a scenario, beside Gymnasium's CartPole-v1 with random actions in the same
process (the ``% CartPole`` column), and MaskablePPO training steps per second with the env's
share of the wall time, split into the simulator's (the env's ``advance``: the simulation up to
the next decision) and the observation's (``observation``: features, context, mask); the rest of
the env's share is the step's other work (action checks, apply, reward, info).

    python -m experiments.benchmarks.env_speed [--scenario NAME] [--steps 2000] [--repeats 3] [--ppo-steps 2048]
                                               [--ppo-device cpu] [--shipped-hyperparams]
                                               [--backend compiled|python]

Each ID runs on ``default`` except Cascade-v0, which needs a cascade and runs on
``cascadeserve``; ``--scenario`` runs every ID on the one named. A rate is the median of
``--repeats`` runs, each on a fresh env (one run of 2,000 steps varies by about 10 % here).
CartPole runs first and again last, ``--repeats`` times each; its rate is the median of all
of them (the machine's load may drift meanwhile). MaskablePPO trains once per ID, its networks
on ``--ppo-device`` (``cpu`` by default, as ``agents.train``; ``cuda`` on a GPU machine: SB3's
small MLP policies often run slower there, since every step's forward pass is a few kernel
launches).

The env share above is measured under one fixed, light MaskablePPO setting (one env, ``n_steps``
512, ``batch_size`` 128, ``n_epochs`` 4, SB3's default 64 x 64 networks), the same for every ID.
``--shipped-hyperparams`` measures it instead as ``python -m agents.train --algo maskable_ppo``
trains (on ``--backend``'s engine): each ID's shipped hyper-parameters (``agents/hyperparams/maskable_ppo.yml``: policy,
networks, ``n_steps``, ``n_epochs``, ``n_envs`` and vector env, reward normalisation), torch at
the run's thread count; the env share is then the training process's time inside the vector
env's ``reset``, ``step_async`` and ``step_wait`` (with ``SubprocVecEnv`` the envs step in their
own processes, so this is the time training waits for them). ``--ppo-steps`` is raised to two
rollouts (2 x ``n_envs`` x ``n_steps``) where it is less.

The first reset of the envs runs before the clock starts, and ``--shipped-hyperparams`` prints
its seconds (``set-up s``): it fits the latency model of each GPU family once per process (0.1-0.2
s a family) and builds the first clusters. A training pays it once, which is nothing in its
hundreds of thousands of steps but a tenth of these few thousand.

Each timed loop runs inside ``agents.frozen_heap`` as ``agents.train`` runs ``learn``: the
objects alive before it (torch, numpy, the env) are frozen out of the garbage collector's full
collections. ``--default-gc`` measures with the collector's default behaviour instead (what a
script of one's own that calls ``gym.make`` gets; slower by up to a fifth on the IDs that
keep many requests in flight).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

import envs
from agents.config import build_config
from agents.frozen_heap import frozen_heap
from agents.train import make_vec_env, new_model, resolve_vec_env
from envs.random_policy import random_masked_action
from simulator.backends import CLUSTERS, DEFAULT_BACKEND
from simulator.cli import command

SCENARIO_BY_ENV = {"servegym/Cascade-v0": "cascadeserve"}  # the rest run on "default"


def _timed_block(frozen: bool) -> AbstractContextManager[None]:
    return frozen_heap() if frozen else nullcontext()


def cartpole_steps_per_s(steps: int, seed: int = 0, frozen: bool = True) -> float:
    """Gymnasium's CartPole-v1 with uniformly random actions: the reference rate."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    with _timed_block(frozen):
        started = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
            if terminated or truncated:
                env.reset()
        return steps / (time.perf_counter() - started)


def env_steps_per_s(env_id: str, scenario: str, steps: int, seed: int = 0, frozen: bool = True,
                    backend: str = DEFAULT_BACKEND) -> tuple[float, int]:
    env = gym.make(env_id, scenario=scenario, backend=backend)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    done_steps = 0
    with _timed_block(frozen):
        started = time.perf_counter()
        while done_steps < steps:
            action = random_masked_action(env.action_space, env.unwrapped.action_masks(), rng)
            _, _, terminated, truncated, _ = env.step(action)
            done_steps += 1
            if terminated or truncated:
                env.reset()
        return done_steps / (time.perf_counter() - started), done_steps


class _TimedEnv(gym.Wrapper):
    """Adds up the wall time spent inside ``step`` and ``reset``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seconds = 0.0

    def step(self, action):
        started = time.perf_counter()
        result = self.env.step(action)
        self.seconds += time.perf_counter() - started
        return result

    def reset(self, **kwargs):
        started = time.perf_counter()
        result = self.env.reset(**kwargs)
        self.seconds += time.perf_counter() - started
        return result

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()


class _PartTimer:
    """Adds up the wall time an env spends in its simulator (``advance``) and its observation
    (``observation``), by wrapping those two methods on the unwrapped env."""

    PARTS = ("advance", "observation")

    def __init__(self, env: gym.Env) -> None:
        self.seconds = dict.fromkeys(self.PARTS, 0.0)
        unwrapped = env.unwrapped
        for name in self.PARTS:
            setattr(unwrapped, name, self._timed(name, getattr(unwrapped, name)))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started
        return timed


def ppo_steps_per_s(
    env_id: str, scenario: str, steps: int, frozen: bool = True, device: str = "cpu", backend: str = DEFAULT_BACKEND
) -> tuple[float, float, float, float]:
    """MaskablePPO steps per second (networks on torch ``device``) and the shares of its wall
    time spent in the env, in the env's simulator and in its observation."""
    env = _TimedEnv(gym.make(env_id, scenario=scenario, backend=backend))
    env.env.reset(seed=0)  # the process's one-off set-up, untimed (see the module's docstring)
    parts = _PartTimer(env)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=512, batch_size=128, n_epochs=4, seed=0, device=device)
    with _timed_block(frozen):
        started = time.perf_counter()
        model.learn(total_timesteps=steps)
        wall_s = time.perf_counter() - started
    return (steps / wall_s, env.seconds / wall_s, parts.seconds["advance"] / wall_s,
            parts.seconds["observation"] / wall_s)


class _TimedVecEnv(VecEnvWrapper):
    """Adds up the training process's wall time inside a vector env's reset and step."""

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        self.seconds = 0.0

    def reset(self):
        started = time.perf_counter()
        observation = self.venv.reset()
        self.seconds += time.perf_counter() - started
        return observation

    def step_async(self, actions: np.ndarray) -> None:
        started = time.perf_counter()
        self.venv.step_async(actions)
        self.seconds += time.perf_counter() - started

    def step_wait(self):
        started = time.perf_counter()
        result = self.venv.step_wait()
        self.seconds += time.perf_counter() - started
        return result


def shipped_ppo_steps_per_s(
    env_id: str, scenario: str, steps: int, frozen: bool = True, device: str = "cpu", backend: str = DEFAULT_BACKEND
) -> tuple[float, float, int, str, int, float]:
    """MaskablePPO as ``agents.train`` builds it from the shipped hyper-parameters of
    ``env_id`` (on the simulation ``backend``): its steps per second, the env's share of the wall
    time (time inside the vector env), the run's ``n_envs``, vector env and steps trained (at
    least two rollouts), and the seconds of the untimed first reset (the process's set-up). The
    vector env is ``agents.train.resolve_vec_env``'s: the native one runs the compiled engine
    only, so on the python backend ``auto`` picks ``subproc`` or ``dummy`` for every ID."""
    config = build_config(env_id, scenario, "maskable_ppo", seed=0, n_timesteps=steps, device=device,
                          overrides=[f"env_kwargs.backend={backend}"])
    rollout = config.n_envs * config.algo_kwargs["n_steps"]
    config = dataclasses.replace(config, n_timesteps=max(steps, 2 * rollout))
    vec_env = resolve_vec_env(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(config.torch_threads)
    with tempfile.TemporaryDirectory() as run_dir:
        timed = _TimedVecEnv(make_vec_env(config, Path(run_dir)))
        try:
            started = time.perf_counter()
            timed.venv.reset()  # the process's one-off set-up, untimed (see the module's docstring)
            set_up_s = time.perf_counter() - started
            model = new_model(config, timed)
            with _timed_block(frozen):
                started = time.perf_counter()
                model.learn(total_timesteps=config.n_timesteps)
                wall_s = time.perf_counter() - started
        finally:
            timed.close()
            torch.set_num_threads(threads)
    return model.num_timesteps / wall_s, timed.seconds / wall_s, config.n_envs, vec_env, model.num_timesteps, set_up_s


@command("experiments.benchmarks.env_speed")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments.benchmarks.env_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=None, help="one scenario for every ID (default: per ID)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="runs per rate; the median is printed")
    parser.add_argument("--ppo-steps", type=int, default=2048)
    parser.add_argument("--ids", default=",".join(envs.ENV_IDS))
    parser.add_argument("--ppo-device", default="cpu", help="torch device of MaskablePPO's networks (cpu, cuda)")
    parser.add_argument("--shipped-hyperparams", action="store_true",
                        help="train MaskablePPO as agents.train does, with each ID's shipped hyper-parameters")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=tuple(CLUSTERS),
                        help="the simulation engine under the envs: the compiled core (default) or the Python one")
    parser.add_argument("--default-gc", action="store_true",
                        help="time with the garbage collector's default behaviour, not inside agents.frozen_heap")
    args = parser.parse_args(argv)
    for name in ("steps", "repeats", "ppo_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    if args.ppo_device.split(":")[0] == "cuda" and not torch.cuda.is_available():
        parser.error(f"--ppo-device {args.ppo_device}: torch sees no CUDA device here")
    unknown = [env_id for env_id in args.ids.split(",") if env_id not in envs.ENV_IDS]
    if unknown:
        raise ValueError(f"--ids {','.join(unknown)}: unknown env ID; known: {', '.join(envs.ENV_IDS)}")
    if args.scenario is not None and args.scenario not in envs.scenario_names():
        raise ValueError(f"--scenario {args.scenario}: unknown; known: {', '.join(envs.scenario_names())}")
    frozen = not args.default_gc
    if args.shipped_hyperparams:
        return _print_shipped(args.ids.split(","), args.scenario, args.ppo_steps, frozen, args.ppo_device, args.backend)
    cartpole_rates = [cartpole_steps_per_s(20 * args.steps, frozen=frozen) for _ in range(args.repeats)]
    rows = []
    for env_id in args.ids.split(","):
        scenario = args.scenario or SCENARIO_BY_ENV.get(env_id, "default")
        rate = statistics.median(
            env_steps_per_s(env_id, scenario, args.steps, frozen=frozen, backend=args.backend)[0]
            for _ in range(args.repeats)
        )
        ppo = ppo_steps_per_s(env_id, scenario, args.ppo_steps, frozen=frozen, device=args.ppo_device,
                              backend=args.backend)
        rows.append((env_id, scenario, rate, *ppo))
    cartpole_rates += [cartpole_steps_per_s(20 * args.steps, frozen=frozen) for _ in range(args.repeats)]
    cartpole = statistics.median(cartpole_rates)
    print("garbage collector: " + ("default" if args.default_gc else
                                   "objects alive before each timed loop frozen (agents.frozen_heap, as agents.train)"))
    print(f"MaskablePPO on {args.ppo_device} (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    print("env share: of MaskablePPO's wall time, in the env's step and reset; simulator and observation: "
          "the parts of it in advance() and observation()")
    print(f"{'env':<24}{'scenario':<14}{'env steps/s':>12}{'% CartPole':>11}{'PPO steps/s':>13}{'env share':>11}"
          f"{'simulator':>11}{'observation':>13}")
    print(f"{'CartPole-v1':<24}{'':<14}{cartpole:>12,.0f}{1:>11.1%}")
    for env_id, scenario, rate, ppo_rate, share, simulator, observation in rows:
        print(f"{env_id:<24}{scenario:<14}{rate:>12,.0f}{rate / cartpole:>11.1%}{ppo_rate:>13,.0f}{share:>10.0%}"
              f"{simulator:>10.0%}{observation:>12.0%}")
    return 0


def _print_shipped(env_ids: list[str], scenario: str | None, steps: int, frozen: bool, device: str,
                   backend: str) -> int:
    print("MaskablePPO as agents.train runs it: the shipped hyper-parameters of each ID "
          f"(agents/hyperparams/maskable_ppo.yml), on {device}; env share: of the wall time, inside the vector env")
    print(f"{'env':<24}{'scenario':<14}{'n_envs':>7}{'vec env':>9}{'steps':>8}{'PPO steps/s':>13}{'env share':>11}"
          f"{'set-up s':>10}")
    for env_id in env_ids:
        name = scenario or SCENARIO_BY_ENV.get(env_id, "default")
        rate, share, n_envs, vec_env, trained, set_up_s = shipped_ppo_steps_per_s(env_id, name, steps, frozen, device,
                                                                                backend)
        print(f"{env_id:<24}{name:<14}{n_envs:>7}{vec_env:>9}{trained:>8,}{rate:>13,.0f}{share:>10.0%}{set_up_s:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
