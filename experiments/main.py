"""The README's main job: baselines against a short MaskablePPO on the ``default`` scenario.

Evaluates the baselines that drive ``servegym/Routing-v0`` on held-out seeds, trains a short
MaskablePPO (``agents.train``, two envs, a progress bar), evaluates it on the same seeds and
prints the comparison table (mean ± 95% confidence half-width, ``agents.evaluate``) and the
TensorBoard command. The agent is ``agents/hyperparams/maskable_ppo.yml``'s Routing-v0 recipe:
the permutation-equivariant ``InstanceScoringPolicy`` (``agents.policies``) and the dense
``latency_balance`` reward (``envs.rewards``). The full run takes about five minutes on two
cores; ``--quick`` (two baselines, 256 training steps, 50-request episodes, two seeds) runs in
the test suite.

Outputs under ``--out`` (default ``runs/main``): ``train/<run>/`` (``agents.train``'s run
directory: model, config, TensorBoard events) and ``eval/`` (``agents.evaluate``'s table,
plots and one TensorBoard run per policy).

    python -m experiments.main [--quick] [--timesteps 100000] [--seeds 5] [--out runs/main]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym

import baselines
from agents.config import TrainConfig, as_int, build_config
from agents.evaluate import PolicyResult, evaluate_policies, write_report
from agents.train import EVAL_SEED_BASE, train

ENV_ID = "servegym/Routing-v0"
SCENARIO = "default"
ALGO = "maskable_ppo"
# Routing baselines of the default scenario, in the README's order; a name not registered or
# not applicable to the env (``baselines.make`` raises) is left out and said so.
BASELINES = ("round_robin", "random", "least_outstanding", "least_kv", "infaas", "llumnix", "pascal")
QUICK_BASELINES = ("round_robin", "least_outstanding")
FULL_TIMESTEPS = 100_000  # ~3 min on two cores


@dataclass(frozen=True)
class JobSettings:
    """What one main-job run does: baselines, training steps and env overrides, evaluation seeds."""

    baselines: tuple[str, ...]
    timesteps: int
    n_envs: int
    eval_seeds: tuple[int, ...]
    env_kwargs: dict[str, object]
    hyperparams: tuple[str, ...]


def settings_for(quick: bool, timesteps: int | None = None, num_seeds: int | None = None) -> JobSettings:
    """The full job (100,000 steps on two envs, 5 seeds of 1,000-request episodes) or the quick
    one (256 steps on one env, 2 seeds of 50-request episodes); ``timesteps`` / ``num_seeds``
    replace the step budget / number of seeds."""
    steps = as_int("timesteps", (256 if quick else FULL_TIMESTEPS) if timesteps is None else timesteps, minimum=1)
    count = as_int("seeds", (2 if quick else 5) if num_seeds is None else num_seeds, minimum=1)
    seeds = tuple(EVAL_SEED_BASE + i for i in range(count))
    if quick:
        return JobSettings(QUICK_BASELINES, steps, 1, seeds, {"episode_requests": 50},
                           ("n_steps=64", "batch_size=32", "n_epochs=2", "policy_kwargs.net_arch=[64,64]"))
    return JobSettings(BASELINES, steps, 2, seeds, {}, ())


def applicable_baselines(names: Sequence[str], env_kwargs: dict[str, object]) -> tuple[list[str], list[str]]:
    """(names that ``baselines.make`` builds for the job's env, names it cannot build); a name
    not registered at all is an error."""
    unknown = [name for name in names if name not in baselines.policy_names()]
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; known: {baselines.policy_names()}")
    env = gym.make(ENV_ID, scenario=SCENARIO, **env_kwargs)
    usable, skipped = [], []
    for name in names:
        try:
            baselines.make(name, env)
            usable.append(name)
        except ValueError:
            skipped.append(name)
    env.close()
    return usable, skipped


def training_config(settings: JobSettings, seed: int) -> TrainConfig:
    """MaskablePPO on the default scenario (``agents/hyperparams/maskable_ppo.yml``) with the
    job's step budget and env overrides; CPU (small MLPs train fastest there)."""
    overrides = [*settings.hyperparams, *(f"env_kwargs.{k}={v}" for k, v in settings.env_kwargs.items())]
    return build_config(ENV_ID, SCENARIO, ALGO, seed, n_timesteps=settings.timesteps, n_envs=settings.n_envs,
                        device="cpu", overrides=overrides)


def evaluate_each(policies: Sequence[str], seeds: Sequence[int], env_kwargs: dict[str, object]) -> list[PolicyResult]:
    """``agents.evaluate.evaluate_policies`` one policy at a time, printing a line per policy."""
    results = []
    for spec in policies:
        started = time.perf_counter()
        (result,) = evaluate_policies(ENV_ID, SCENARIO, [spec], seeds, env_kwargs, device="cpu")
        attainment = sum(e["slo_attainment"] for e in result.episodes) / len(result.episodes)
        print(f"  evaluated {result.label:<28} {len(seeds)} episodes in {time.perf_counter() - started:5.1f} s, "
              f"mean SLO attainment {attainment:.3f}", flush=True)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two baselines, 256 steps, short episodes (tests)")
    parser.add_argument("--timesteps", type=int, help=f"training env steps (default {FULL_TIMESTEPS:,}; quick 256)")
    parser.add_argument("--seeds", type=int, help=f"evaluation seeds {EVAL_SEED_BASE}, ... (default 5; quick 2)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument("--out", type=Path, default=Path("runs") / "main", help="output folder (default runs/main)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    settings = settings_for(args.quick, args.timesteps, args.seeds)
    config = training_config(settings, as_int("--seed", args.seed))
    names, skipped = applicable_baselines(settings.baselines, config.env_kwargs)
    seeds = list(settings.eval_seeds)
    print(f"{SCENARIO} scenario on {ENV_ID}, reward {config.env_kwargs.get('reward', 'slo')!r}, seeds {seeds}")
    if skipped:
        print(f"  baselines that do not apply here, left out: {', '.join(skipped)}")
    print(f"[1/3] evaluating {len(names)} baselines")
    results = evaluate_each(names, seeds, config.env_kwargs)
    print(f"[2/3] training {ALGO} for {config.n_timesteps:,} steps on {config.n_envs} env(s)", flush=True)
    trained = train(config, args.out / "train", progress_bar=True)
    print(f"  trained in {trained.wall_s:.0f} s ({trained.steps_per_s:.0f} steps/s): {trained.run_dir}")
    print("[3/3] evaluating the agent")
    results += evaluate_each([str(trained.run_dir / "final_model.zip")], seeds, config.env_kwargs)
    table = write_report(results, seeds, args.out / "eval")
    print(f"\n{table}")
    print(f"tables and plots: {args.out / 'eval'}; total {time.perf_counter() - started:.0f} s")
    print(f"dashboards: tensorboard --logdir {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
