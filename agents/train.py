"""Train a Stable-Baselines3 agent on a servegym environment, with TensorBoard serving metrics,
periodic evaluation against baselines, checkpoints and exact resume.

    python -m agents.train --env servegym/Routing-v0 --scenario default --algo maskable_ppo \\
        --timesteps 100000 --seed 0 --n-envs 2 [--device cpu|cuda|auto] [--hyperparams FILE] \\
        [--set key=value ...] [--eval-freq 10000 --eval-seeds 3 \\
        --eval-baselines least_outstanding,round_robin [--eval-metric slo_attainment] [--eval-stochastic]] \\
        [--checkpoint-freq 10000] [--run-dir runs]
    python -m agents.train --resume runs/<run> [--timesteps N]

A run directory ``runs/{env}__{scenario}__{algo}__{seed}__{time}`` holds ``config.yml`` (the
resolved configuration), the TensorBoard event files, ``progress.csv`` (and
``progress_resumed_at_<steps>.csv`` per resume), ``monitor/<rank>.monitor.csv``,
``checkpoints/model_<steps>_steps.zip`` (with ``model_vecnormalize_<steps>_steps.pkl`` when
observations are normalised), ``final_model.zip`` and, with evaluation, ``best_model.zip`` and
``evaluations.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback
from stable_baselines3.common.logger import (
    CSVOutputFormat,
    HParam,
    HumanOutputFormat,
    Logger,
    TensorBoardOutputFormat,
)
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

import envs
from agents.callbacks import BaselineEvalCallback, ServingMetricsCallback, TrainingLayout, save_model
from agents.config import (
    ALGORITHMS,
    DEVICES,
    VEC_ENVS,
    TrainConfig,
    as_int,
    build_config,
    check_action_space,
    get_algorithm,
    latest_checkpoint,
    resolve_device,
    run_name,
    vecnormalize_path,
)
from agents.dashboard import episode_metric_names, tier_slo_attainment
from baselines import make as make_policy
from envs.wrappers import FlattenServingObservation

# Evaluation seeds are 10_000, 10_001, ...: held out from the small training seeds.
EVAL_SEED_BASE = 10_000
DEFAULT_CHECKPOINT_FREQ = 10_000


class EpisodeTierMetrics(gym.Wrapper):
    """Adds ``slo_attainment_tier<k>`` to ``info["episode_metrics"]`` at an episode's end,
    computed from the episode's request outcomes (``simulator.metrics.summarize_by``)."""

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if "episode_metrics" in info:
            cluster = self.env.unwrapped.cluster
            tiers = tier_slo_attainment(cluster.outcomes, cluster.events.now_s)
            info = {**info, "episode_metrics": {**info["episode_metrics"], **tiers}}
        return observation, reward, terminated, truncated, info


def make_env(env_id: str, scenario: str, env_kwargs: dict[str, Any], flat: bool) -> gym.Env:
    """``gym.make(env_id, scenario=..., **env_kwargs)`` with per-tier episode metrics, flattened
    to one ``Box`` when ``flat`` (MLP policies). YAML lists become tuples (scenario fields)."""
    if env_id not in envs.ENV_IDS:
        raise ValueError(f"unknown env {env_id!r}; known: {sorted(envs.ENV_IDS)}")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in env_kwargs.items()}
    env: gym.Env = EpisodeTierMetrics(gym.make(env_id, scenario=scenario, **kwargs))
    return FlattenServingObservation(env) if flat else env


def _monitored_env(config: TrainConfig, monitor_file: str) -> gym.Env:
    """A Monitor-wrapped env; a resumed run appends to its existing Monitor CSV."""
    return Monitor(make_env(config.env_id, config.scenario, config.env_kwargs, config.flat_observation),
                   filename=monitor_file, override_existing=not Path(monitor_file).exists())


def make_vec_env(config: TrainConfig, run_dir: Path) -> VecEnv:
    """``n_envs`` monitored envs: ``SubprocVecEnv`` when more than one (unless ``vec_env`` is
    ``dummy``), else ``DummyVecEnv``. Action masks reach MaskablePPO through
    ``env_method("action_masks")`` either way."""
    (run_dir / "monitor").mkdir(parents=True, exist_ok=True)
    env_fns = [partial(_monitored_env, config, str(run_dir / "monitor" / f"{rank}.monitor.csv"))
               for rank in range(config.n_envs)]
    return SubprocVecEnv(env_fns) if config.n_envs > 1 and config.vec_env == "subproc" else DummyVecEnv(env_fns)


@dataclass(frozen=True)
class TrainResult:
    """Where a training session wrote, the model's total steps, and this session's steps and wall time."""

    run_dir: Path
    num_timesteps: int
    trained_steps: int
    wall_s: float

    @property
    def steps_per_s(self) -> float:
        return self.trained_steps / self.wall_s


def train(config: TrainConfig, run_root: Path = Path("runs"), *, progress_bar: bool = False, verbose: int = 0) -> TrainResult:
    """Train a new agent as ``config`` says, in a new run directory under ``run_root``
    (sets torch's thread count for this process to ``config.torch_threads``)."""
    device = resolve_device(config.device)
    config = dataclasses.replace(config, device=device)
    _check_setup(config)
    torch.set_num_threads(config.torch_threads)
    run_dir = _new_run_dir(Path(run_root), config)
    config.save(run_dir / "config.yml")
    venv = make_vec_env(config, run_dir)
    try:
        if config.normalize is not None:
            venv = VecNormalize(venv, **config.vec_normalize_kwargs())
        model = get_algorithm(config.algo).cls(
            config.policy, venv, seed=config.seed, device=device, verbose=verbose,
            policy_kwargs=config.sb3_policy_kwargs(), **config.sb3_algo_kwargs(),
        )
        logger = _logger(run_dir, verbose)
        model.set_logger(logger)
        logger.record("hparams", HParam(_hparams(config), _hparam_metrics(config)),
                      exclude=("stdout", "log", "json", "csv"))
        return _learn(model, config, run_dir, config.n_timesteps, resuming=False, progress_bar=progress_bar)
    finally:
        venv.close()


def resume(run_dir: Path, *, timesteps: int | None = None, device: str | None = None,
           progress_bar: bool = False, verbose: int = 0) -> TrainResult:
    """Continue ``run_dir`` from its latest checkpoint: model, VecNormalize statistics and the
    step count (``reset_num_timesteps=False``). Trains ``timesteps`` more steps, by default
    what is left of the configured ``n_timesteps``."""
    run_dir = Path(run_dir)
    config = TrainConfig.load(run_dir / "config.yml")
    config = dataclasses.replace(config, device=resolve_device(device or config.device))
    checkpoint, steps = latest_checkpoint(run_dir)
    more = as_int("timesteps", timesteps, minimum=1) if timesteps is not None else config.n_timesteps - steps
    if more <= 0:
        raise ValueError(f"{run_dir} has trained {steps} of its {config.n_timesteps} steps; pass timesteps to train more")
    config = dataclasses.replace(config, n_timesteps=steps + more)
    torch.set_num_threads(config.torch_threads)
    venv = make_vec_env(config, run_dir)
    try:
        if config.normalize is not None:
            venv = VecNormalize.load(str(vecnormalize_path(checkpoint)), venv)
            venv.training = True
        model = get_algorithm(config.algo).cls.load(checkpoint, env=venv, device=config.device)
        config.save(run_dir / "config.yml")
        model.set_random_seed(config.seed + steps)
        model.set_logger(_logger(run_dir, verbose, f"progress_resumed_at_{steps}.csv"))
        return _learn(model, config, run_dir, more, resuming=True, progress_bar=progress_bar)
    finally:
        venv.close()


def _learn(model: BaseAlgorithm, config: TrainConfig, run_dir: Path, timesteps: int, *, resuming: bool,
           progress_bar: bool) -> TrainResult:
    layout = TrainingLayout(with_evaluation=config.eval_freq > 0)
    callbacks: list[BaseCallback] = [ServingMetricsCallback(layout)]
    if config.checkpoint_freq > 0:
        callbacks.append(CheckpointCallback(
            save_freq=max(config.checkpoint_freq // config.n_envs, 1), save_path=str(run_dir / "checkpoints"),
            name_prefix="model", save_vecnormalize=True,
        ))
    if config.eval_freq > 0:
        callbacks.append(BaselineEvalCallback(
            make_env(config.env_id, config.scenario, config.env_kwargs, config.flat_observation),
            make_env(config.env_id, config.scenario, config.env_kwargs, flat=False),
            config.eval_seeds, config.eval_baselines, config.eval_freq, config.n_envs, run_dir, config.eval_metric,
            deterministic=config.eval_mode == "deterministic", layout=layout,
        ))
    start_steps = model.num_timesteps
    started = time.perf_counter()
    model.learn(total_timesteps=timesteps, callback=CallbackList(callbacks), reset_num_timesteps=not resuming,
                progress_bar=progress_bar)
    wall_s = time.perf_counter() - started
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    save_model(model, run_dir / "checkpoints" / f"model_{model.num_timesteps}_steps.zip")
    save_model(model, run_dir / "final_model.zip")
    return TrainResult(run_dir, model.num_timesteps, model.num_timesteps - start_steps, wall_s)


def _check_setup(config: TrainConfig) -> None:
    """Fail before creating anything: env arguments, action space, baseline names, evaluation metric."""
    probe = make_env(config.env_id, config.scenario, config.env_kwargs, flat=False)
    try:
        check_action_space(config.algo, probe.action_space)
        known = episode_metric_names(probe.unwrapped.scenario.num_tiers)
        if config.eval_metric not in known:
            raise ValueError(f"unknown evaluation metric {config.eval_metric!r}; known: {known}")
        for name in config.eval_baselines:
            make_policy(name, probe)
    finally:
        probe.close()


def _new_run_dir(run_root: Path, config: TrainConfig) -> Path:
    """A fresh ``run_root/run_name``; ``_2``, ``_3``, ... when two runs start in the same second."""
    base = run_root / run_name(config, datetime.now().strftime("%Y%m%d-%H%M%S"))
    candidate, suffix = base, 1
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = base.with_name(f"{base.name}_{suffix}")


def _logger(run_dir: Path, verbose: int, csv_name: str = "progress.csv") -> Logger:
    """SB3 logger writing TensorBoard events and ``csv_name`` into the run directory (a resumed
    run writes its own CSV: SB3 would overwrite ``progress.csv``)."""
    formats = [CSVOutputFormat(str(run_dir / csv_name)), TensorBoardOutputFormat(str(run_dir))]
    return Logger(str(run_dir), ([HumanOutputFormat(sys.stdout)] if verbose else []) + formats)


def _hparams(config: TrainConfig) -> dict[str, Any]:
    """Flat hyper-parameters for TensorBoard's HPARAMS tab (non-scalars as text)."""
    values: dict[str, Any] = {
        "algo": config.algo, "env_id": config.env_id, "scenario": config.scenario, "seed": config.seed,
        "n_envs": config.n_envs, "n_timesteps": config.n_timesteps, "policy": config.policy,
        "normalize": config.normalize is not None,
    }
    if config.eval_freq > 0:
        values.update({"eval_metric": config.eval_metric, "eval_mode": config.eval_mode})
    sections = {"": config.algo_kwargs, "env.": config.env_kwargs, "policy.": config.policy_kwargs}
    for prefix, section in sections.items():
        for key, value in section.items():
            values[prefix + key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    return values


def _hparam_metrics(config: TrainConfig) -> dict[str, float]:
    """The HPARAMS tab's metric columns: training episodes' SLO attainment and return and, with
    periodic evaluation, the held-out evaluation's SLO attainment and evaluation metric."""
    metrics = {"serving/slo_attainment": 0.0, "rollout/ep_rew_mean": 0.0}
    if config.eval_freq > 0:
        metrics.update({"eval/agent/slo_attainment": 0.0, f"eval/agent/{config.eval_metric}": 0.0})
    return metrics


def _eval_seeds(count: int | None) -> list[int]:
    """``count`` (default 3) held-out evaluation seeds from ``EVAL_SEED_BASE``."""
    return [EVAL_SEED_BASE + i for i in range(as_int("--eval-seeds", 3 if count is None else count, minimum=1))]


def _comma_list(text: str) -> list[str]:
    return [item for item in text.split(",") if item]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", help=f"one of {sorted(envs.ENV_IDS)}")
    parser.add_argument("--scenario", help=f"one of {envs.scenario_names()} (default: default)")
    parser.add_argument("--algo", choices=sorted(ALGORITHMS))
    parser.add_argument("--timesteps", type=int, help="env steps (more steps when resuming); default: hyper-parameters")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--n-envs", type=int, help="parallel envs; default: hyper-parameters")
    parser.add_argument("--vec-env", choices=VEC_ENVS, help="subproc (default) or dummy, when n-envs > 1")
    parser.add_argument("--device", choices=DEVICES, help="default: auto (CUDA when present)")
    parser.add_argument("--torch-threads", type=int, help="torch intra-op threads (default 1)")
    parser.add_argument("--hyperparams", type=Path, help="YAML file (default: agents/hyperparams/<algo>.yml)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", metavar="KEY=VALUE",
                        help="hyper-parameter overrides, e.g. learning_rate=1e-4 env_kwargs.episode_requests=100")
    parser.add_argument("--eval-freq", type=int, help="evaluate every this many env steps (default 0: never)")
    parser.add_argument("--eval-seeds", type=int, help=f"number of evaluation seeds, {EVAL_SEED_BASE}, ... (default 3)")
    parser.add_argument("--eval-baselines", type=_comma_list, help="comma-separated baseline policy names")
    parser.add_argument("--eval-metric", help="mean episode metric that picks best_model.zip (default: return)")
    parser.add_argument("--eval-stochastic", action="store_true", default=None,
                        help="the evaluation samples the agent's actions (seeded by the episode seed); default: deterministic")
    parser.add_argument("--checkpoint-freq", type=int,
                        help=f"env steps between checkpoints (default {DEFAULT_CHECKPOINT_FREQ}, 0: final only)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    parser.add_argument("--run-dir", type=Path, default=Path("runs"), help="where run directories go (default runs)")
    parser.add_argument("--no-progress-bar", action="store_true")
    parser.add_argument("--verbose", type=int, choices=(0, 1), default=1)
    args = parser.parse_args(argv)
    if args.resume is not None:
        fixed = ["env", "scenario", "algo", "seed", "n_envs", "vec_env", "hyperparams", "overrides", "eval_freq", "eval_seeds",
                 "eval_baselines", "eval_metric", "eval_stochastic", "checkpoint_freq", "torch_threads"]
        given = [name for name in fixed if getattr(args, name) is not None]
        if given:
            parser.error(f"--resume takes the run's config.yml; these cannot change: {given}")
        result = resume(args.resume, timesteps=args.timesteps, device=args.device,
                        progress_bar=not args.no_progress_bar, verbose=args.verbose)
    else:
        if args.env is None or args.algo is None:
            parser.error("--env and --algo are required (unless --resume)")
        config = build_config(
            args.env, args.scenario or "default", args.algo, 0 if args.seed is None else args.seed,
            n_timesteps=args.timesteps, n_envs=args.n_envs, device=args.device or "auto",
            hyperparams_path=args.hyperparams, overrides=args.overrides or (),
            eval_freq=args.eval_freq or 0,
            eval_seeds=_eval_seeds(args.eval_seeds) if args.eval_freq else [],
            eval_baselines=args.eval_baselines or [], eval_metric=args.eval_metric or "return",
            checkpoint_freq=DEFAULT_CHECKPOINT_FREQ if args.checkpoint_freq is None else args.checkpoint_freq,
            torch_threads=1 if args.torch_threads is None else args.torch_threads, vec_env=args.vec_env,
            eval_mode="stochastic" if args.eval_stochastic else "deterministic",
        )
        result = train(config, args.run_dir, progress_bar=not args.no_progress_bar, verbose=args.verbose)
    print(f"run: {result.run_dir}")
    print(f"trained {result.trained_steps} steps (total {result.num_timesteps}) in {result.wall_s:.1f} s: "
          f"{result.steps_per_s:.0f} steps/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
