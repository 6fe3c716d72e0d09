"""Native vector env benchmark: an env ID's steps per second as a single env (python and compiled
backends) and as ``envs.vector.NativeVectorEnv`` at N = 1, 2, 4, 8 envs, beside Gymnasium's
CartPole-v1 single env in the same process, with random valid actions throughout; and, for
servegym/Routing-v0, issue #43's ratio: its steps/s per core at N = 8 over CartPole-v1's
single-env rate (per core: the total over min(8, os.cpu_count()) cores).

    python -m experiments.benchmarks.vector_env_speed [--env servegym/Routing-v0] [--scenario default]
                                                      [--steps 20000] [--repeats 3] [--sizes 1,2,4,8] [--threads N]

A rate is the median of ``--repeats`` runs of ``--steps`` env steps each (a vector step of N envs
counts N), each on fresh envs; CartPole runs first and again last (20 x ``--steps`` steps each
time) and its rate is the median of all its runs. A vector env's actions are drawn for all envs
at once (per action dimension a uniform valid entry of its mask part, a few microseconds per
call), a single env's by
``envs.random_policy``. Each timed loop runs inside ``agents.frozen_heap``, as ``agents.train`` runs
``learn``. ``--threads`` fixes the vector env's thread count (default: one per env, at most the
machine's hardware threads); the results never depend on it, the speed does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import envs  # noqa: F401  (registers the IDs)
from agents.frozen_heap import frozen_heap
from envs.vector import POOLS, NativeVectorEnv
from experiments.benchmarks.env_speed import cartpole_steps_per_s, env_steps_per_s
from simulator.cli import command

ENV_ID = "servegym/Routing-v0"
GOAL_PER_CORE = 0.25  # issue #43: Routing-v0 at N = 8 >= 25 % of CartPole-v1's single-env rate per core


def random_valid_actions(vector: NativeVectorEnv, rng: np.random.Generator) -> np.ndarray:
    """One action per env: in each action dimension a uniform valid entry of its part of the mask
    (``Discrete``: one part; ``MultiDiscrete``: one part per dimension, concatenated)."""
    masks = vector.action_masks()
    space = vector.single_action_space
    sizes = [int(space.n)] if space.shape == () else space.nvec.tolist()
    starts = np.cumsum([0] + sizes)
    choices = [(rng.random((vector.num_envs, size)) * masks[:, start:start + size]).argmax(axis=1)
               for start, size in zip(starts, sizes)]
    return choices[0] if space.shape == () else np.stack(choices, axis=1)


def vector_steps_per_s(env_id: str, num_envs: int, scenario: str, steps: int, threads: int | None,
                       seed: int = 0) -> float:
    """Env steps per second of NativeVectorEnv(num_envs) of ``env_id`` under random valid actions."""
    vector = NativeVectorEnv(num_envs, env_id=env_id, num_threads=threads, scenario=scenario, backend="compiled")
    vector.reset(seed=seed)
    rng = np.random.default_rng(seed)
    calls = max(1, steps // num_envs)
    with frozen_heap():
        started = time.perf_counter()
        for _ in range(calls):
            vector.step(random_valid_actions(vector, rng))
        elapsed = time.perf_counter() - started
    vector.close()
    return calls * num_envs / elapsed


def _positive(parser: argparse.ArgumentParser, name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"--{name} {value}: must be a positive integer")


@command("experiments.benchmarks.vector_env_speed")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments.benchmarks.vector_env_speed",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=ENV_ID, help=f"an env ID with a native vector env: {', '.join(POOLS)}")
    parser.add_argument("--scenario", default="default")
    parser.add_argument("--steps", type=int, default=20000, help="env steps per timed run (enough for every env to end episodes: resets are timed too)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per rate; the median is printed")
    parser.add_argument("--sizes", default="1,2,4,8", help="the vector env's sizes N, comma-separated")
    parser.add_argument("--threads", type=int, default=None, help="the vector env's threads (default: min(N, cores))")
    args = parser.parse_args(argv)
    for name in ("steps", "repeats", "threads"):
        _positive(parser, name, getattr(args, name))
    if args.env not in POOLS:
        raise ValueError(f"--env {args.env}: has no native vector env; known: {', '.join(POOLS)}")
    if args.scenario not in envs.scenario_names():
        raise ValueError(f"--scenario {args.scenario}: unknown; known: {', '.join(envs.scenario_names())}")
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        raise ValueError(f"--sizes {args.sizes}: must be positive integers, comma-separated") from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--sizes {args.sizes}: must be positive integers, comma-separated")
    cartpole_rates = [cartpole_steps_per_s(20 * args.steps) for _ in range(args.repeats)]
    rows = []
    for backend in ("python", "compiled"):
        rate = statistics.median(env_steps_per_s(args.env, args.scenario, args.steps, backend=backend)[0]
                                 for _ in range(args.repeats))
        rows.append((f"single env, {backend}", rate, 1))
    for size in sizes:
        rate = statistics.median(vector_steps_per_s(args.env, size, args.scenario, args.steps, args.threads)
                                 for _ in range(args.repeats))
        rows.append((f"NativeVectorEnv N={size}", rate, min(size, os.cpu_count() or 1)))
    cartpole_rates += [cartpole_steps_per_s(20 * args.steps) for _ in range(args.repeats)]
    cartpole = statistics.median(cartpole_rates)
    print(f"{args.env} on {args.scenario}, {os.cpu_count()} CPUs; CartPole-v1 runs: "
          f"{', '.join(f'{r:,.0f}' for r in cartpole_rates)} steps/s")
    print(f"{'':<28}{'env steps/s':>12}{'cores':>7}{'per core':>10}{'% CartPole/core':>17}")
    print(f"{'CartPole-v1 single env':<28}{cartpole:>12,.0f}{1:>7}{cartpole:>10,.0f}{1:>17.1%}")
    for name, rate, cores in rows:
        print(f"{name:<28}{rate:>12,.0f}{cores:>7}{rate / cores:>10,.0f}{rate / cores / cartpole:>17.1%}")
    if 8 in sizes and args.env == ENV_ID:
        rate = dict((name, rate) for name, rate, _ in rows)["NativeVectorEnv N=8"]
        per_core = rate / min(8, os.cpu_count() or 1)
        print(f"Routing-v0 steps/s per core at N=8 / CartPole-v1 single-env steps/s: {per_core / cartpole:.3f} "
              f"(goal >= {GOAL_PER_CORE})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
