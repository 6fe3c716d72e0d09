"""The README's main job: baselines against a short MaskablePPO on the ``default`` scenario.

Evaluates the baselines that drive ``servegym/Routing-v0`` on held-out seeds, trains one
MaskablePPO per training seed (``agents.train``, a progress bar; periodic evaluation on two
held-out seeds draws each run's learning curve with the baselines' levels as reference lines),
evaluates each trained model on the same seeds and prints the report of ``agents.evaluate``:
the evaluation mode, IQM [95% stratified-bootstrap interval] per policy and metric over
training seeds x evaluation seeds, each training run's numbers, and the agent's probability of
improvement over each baseline on SLO attainment (``agents.statistics``, rliable). The agent's
recipe (policy, reward, budget) is ``agents/hyperparams/maskable_ppo.yml``'s Routing-v0 section.
``--quick`` (two baselines, 256 training steps, 50-request episodes, two seeds) runs in the
test suite.

Outputs under ``--out`` (default ``runs/main``): ``train/<run>/`` per training seed
(``agents.train``'s run directory: model, config, TensorBoard events) and ``eval/``
(``agents.evaluate``'s report, plots and TensorBoard runs).

    python -m experiments.main [--quick] [--timesteps 100000] [--seeds 5] [--train-seeds 0,1,2]
        [--deterministic] [--stochastic] [--out runs/main]

``--out`` is checked to be writable first; bad input prints one line ``experiments.main: error:
...`` and exits with status 2.
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
from agents.config import EVAL_MODES, TrainConfig, as_int, build_config
from agents.evaluate import (
    HEADLINE_METRIC,
    PolicyResult,
    add_mode_flags,
    build_report,
    check_writable,
    evaluate_policies,
    modes_from,
    write_report,
)
from agents.train import EVAL_SEED_BASE, train

ENV_ID = "servegym/Routing-v0"
SCENARIO = "default"
ALGO = "maskable_ppo"
# Routing baselines of the default scenario, in the README's order (the cache-aware routers apply
# because the scenario's vllm-v1 caches prefixes); a name not registered or not applicable to the
# env (``baselines.make`` raises) is left out and said so.
BASELINES = ("round_robin", "random", "least_outstanding", "least_kv", "infaas", "llumnix", "pascal",
             "llmd_scorers", "sglang_cache_aware", "dynamo_kv")
QUICK_BASELINES = ("round_robin", "least_outstanding")
FULL_TIMESTEPS = 100_000  # ~3 min on two cores
CURVE_EVALUATIONS = 4  # periodic evaluations during training, besides the one at the start


@dataclass(frozen=True)
class JobSettings:
    """What one main-job run does: baselines, training steps and env overrides, evaluation seeds
    (the first ``curve_seeds`` of them also draw the learning curve during training)."""

    baselines: tuple[str, ...]
    timesteps: int
    n_envs: int
    eval_seeds: tuple[int, ...]
    env_kwargs: dict[str, object]
    hyperparams: tuple[str, ...]
    curve_seeds: int = 2

    @property
    def eval_freq(self) -> int:
        """Env steps between two evaluations of the learning curve."""
        return max(self.timesteps // CURVE_EVALUATIONS, 1)


def settings_for(quick: bool, timesteps: int | None = None, num_seeds: int | None = None) -> JobSettings:
    """The full job (100,000 steps on two envs, 5 seeds of 1,000-request episodes) or the quick
    one (256 steps on one env, 2 seeds of 50-request episodes); ``timesteps`` / ``num_seeds``
    replace the step budget / number of seeds."""
    steps = as_int("timesteps", (256 if quick else FULL_TIMESTEPS) if timesteps is None else timesteps, minimum=1)
    count = as_int("seeds", (2 if quick else 5) if num_seeds is None else num_seeds, minimum=1)
    seeds = tuple(EVAL_SEED_BASE + i for i in range(count))
    if quick:
        return JobSettings(QUICK_BASELINES, steps, 1, seeds, {"episode_requests": 50},
                           ("n_steps=64", "batch_size=32", "n_epochs=2", "policy_kwargs.net_arch=[64,64]"), curve_seeds=1)
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


def training_config(settings: JobSettings, seed: int, baselines: Sequence[str] = (),
                    eval_mode: str = "deterministic") -> TrainConfig:
    """MaskablePPO on the default scenario (``agents/hyperparams/maskable_ppo.yml``) with the
    job's step budget and env overrides; CPU (small MLPs train fastest there). Periodic
    evaluation in ``eval_mode`` on the first ``curve_seeds`` evaluation seeds, SLO attainment
    (the table's headline) picking ``best_model.zip``, ``baselines`` as reference lines."""
    overrides = [*settings.hyperparams, *(f"env_kwargs.{k}={v}" for k, v in settings.env_kwargs.items())]
    return build_config(ENV_ID, SCENARIO, ALGO, seed, n_timesteps=settings.timesteps, n_envs=settings.n_envs,
                        device="cpu", overrides=overrides, eval_freq=settings.eval_freq,
                        eval_seeds=settings.eval_seeds[:settings.curve_seeds], eval_baselines=baselines,
                        eval_metric=HEADLINE_METRIC, eval_mode=eval_mode)


def train_seeds_from(text: str) -> list[int]:
    """``--train-seeds``: comma-separated distinct integers >= 0."""
    seeds = []
    for item in text.split(","):
        try:
            seeds.append(as_int("training seed", int(item)))
        except ValueError:
            raise ValueError(f"training seed {item!r} is not an integer >= 0 (in --train-seeds {text!r})") from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--train-seeds must be distinct, got {text!r}")
    return seeds


def evaluate_each(policies: Sequence[str], seeds: Sequence[int], env_kwargs: dict[str, object],
                  modes: Sequence[str] = ("deterministic",)) -> list[PolicyResult]:
    """``agents.evaluate.evaluate_policies`` one policy at a time (a model in each of ``modes``),
    printing a line per result."""
    results = []
    for spec in policies:
        started = time.perf_counter()
        for result in evaluate_policies(ENV_ID, SCENARIO, [spec], seeds, env_kwargs, device="cpu", modes=modes):
            attainment = sum(e["slo_attainment"] for e in result.episodes) / len(result.episodes)
            print(f"  evaluated {result.label:<34} {len(seeds)} episodes in {time.perf_counter() - started:5.1f} s, "
                  f"mean SLO attainment {attainment:.3f}", flush=True)
            results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the job; bad input (a ``ValueError`` or ``OSError``) prints one line and returns 2."""
    parser = argparse.ArgumentParser(prog="experiments.main", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two baselines, 256 steps, short episodes (tests)")
    parser.add_argument("--timesteps", type=int, help=f"training env steps (default {FULL_TIMESTEPS:,}; quick 256)")
    parser.add_argument("--seeds", type=int, help=f"evaluation seeds {EVAL_SEED_BASE}, ... (default 5; quick 2)")
    parser.add_argument("--train-seeds", default="0", help="comma-separated training seeds, one agent each (default 0)")
    add_mode_flags(parser)  # the job's default: both modes, each agent listed as [det] and [stoch]
    parser.add_argument("--out", type=Path, default=Path("runs") / "main", help="output folder (default runs/main)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (ValueError, OSError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_writable(args.out)
    settings = settings_for(args.quick, args.timesteps, args.seeds)
    train_seeds = train_seeds_from(args.train_seeds)
    modes = modes_from(args, default=EVAL_MODES)
    names, skipped = applicable_baselines(settings.baselines, training_config(settings, 0).env_kwargs)
    configs = [training_config(settings, seed, names, modes[0]) for seed in train_seeds]
    seeds = list(settings.eval_seeds)
    print(f"{SCENARIO} scenario on {ENV_ID}, reward {configs[0].env_kwargs.get('reward', 'slo')!r}, "
          f"evaluation seeds {seeds}, training seeds {train_seeds}, evaluation mode {' and '.join(modes)}")
    if skipped:
        print(f"  baselines that do not apply here, left out: {', '.join(skipped)}")
    print(f"[1/3] evaluating {len(names)} baselines")
    results = evaluate_each(names, seeds, configs[0].env_kwargs)
    models = []
    for index, config in enumerate(configs, start=1):
        print(f"[2/3] training {ALGO} seed {config.seed} ({index} of {len(configs)}) for {config.n_timesteps:,} steps "
              f"on {config.n_envs} env(s)", flush=True)
        trained = train(config, args.out / "train", progress_bar=True)
        print(f"  trained in {trained.wall_s:.0f} s ({trained.steps_per_s:.0f} steps/s): {trained.run_dir}")
        models.append(str(trained.run_dir / "final_model.zip"))
    print("[3/3] evaluating the agents")
    results += evaluate_each(models, seeds, configs[0].env_kwargs, modes)
    report = build_report(results, seeds)
    print(f"\n{report.table}", flush=True)
    write_report(results, seeds, args.out / "eval", report=report)
    print(f"tables and plots: {args.out / 'eval'}; total {time.perf_counter() - started:.0f} s")
    print(f"dashboards: tensorboard --logdir {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
