"""Train a Stable-Baselines3 agent on a servegym environment, with TensorBoard serving metrics,
periodic evaluation against baselines, checkpoints and exact resume.

    python -m agents.train --env servegym/Routing-v0 --scenario default --algo maskable_ppo \\
        --timesteps 100000 --seed 0 --n-envs 2 [--device cpu|cuda|auto (default cpu)] [--hyperparams FILE] \\
        [--set key=value ...] [--eval-freq 10000 --eval-seeds 3 \\
        --eval-baselines least_outstanding,round_robin [--eval-metric slo_attainment] [--eval-stochastic]] \\
        [--checkpoint-freq 10000] [--run-dir runs]
    python -m agents.train --resume runs/<run> [--timesteps N]

A run directory ``runs/{env}__{scenario}__{algo}__{seed}__{time}`` holds ``config.yml`` (the
resolved configuration), the TensorBoard event files, ``progress.csv`` (continued by a
resume, with the iteration count going on), ``monitor/<rank>.monitor.csv``,
``checkpoints/model_<steps>_steps.zip`` (with ``model_vecnormalize_<steps>_steps.npz`` when
observations are normalised), ``final_model.zip`` and, with evaluation, ``best_model.zip`` and
``evaluations.json``. Every model file is written under a temporary name and renamed; a
checkpoint is taken at an update boundary, so it holds exactly the steps it has trained on.

Interruption: on SIGINT (Ctrl-C) or SIGTERM the command stops at the next env step, saves the
model and its VecNormalize statistics as ``checkpoints/model_<steps>_steps.zip`` with the steps
of its last update (the steps gathered after it were never trained on: they are dropped, with
their monitor rows), closes its envs (subprocess envs ignore the signals, so they close
cleanly) and exits with status 128 + the signal number (130, 143); a second signal stops it at
once. ``--resume`` continues from the
newest intact checkpoint (a truncated or corrupt newer one is skipped with a warning) and first
drops the monitor rows of episodes past it, so the monitor CSVs hold exactly the episodes the
model has trained on; their ``t`` column continues from the run's start. Saved files are loaded
without unpickling anything (``agents.model_files``; ``--trust-pickle`` for older files). Bad
input prints one line ``agents.train: error: ...`` and exits with status 2, before any env starts
(``--n-envs`` beyond what this process may open is refused, ``check_n_envs``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import CSVOutputFormat, HParam, HumanOutputFormat, TensorBoardOutputFormat
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs

import envs
from agents.callbacks import (
    BaselineEvalCallback,
    CheckpointEvery,
    ServingMetricsCallback,
    StopOnSignal,
    TrainingLayout,
    save_model,
)
from agents.config import (
    ALGORITHMS,
    DEFAULT_DEVICE,
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
from agents.frozen_heap import frozen_heap
from agents.model_files import TRUST_FLAG, load_model, load_vecnormalize
from agents.vec_env import NativeVecEnv, VecEpisodeMonitor, VecFlattenServingObservation
from agents.training_log import ContinuedCSVOutputFormat, ContinuedLogger, StepProgressBar
from baselines import make as make_policy
from envs.vector import NotCoveredError, kernel_spec
from envs.wrappers import FlattenServingObservation
from simulator.cli import command

# Evaluation seeds are 10_000, 10_001, ...: held out from the small training seeds.
EVAL_SEED_BASE = 10_000
DEFAULT_CHECKPOINT_FREQ = 10_000
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Open files an env takes in the training process: its monitor CSV in-process; with subprocess
# envs the pipe ends and process sentinel (measured: 3.5 per SubprocVecEnv worker, rounded up;
# the monitor file is then the worker's). Plus what the trainer itself keeps open.
FILES_PER_ENV = {False: 1, True: 4}
FILES_RESERVED = 256


class EpisodeTierMetrics(gym.Wrapper):
    """Adds ``slo_attainment_tier<k>`` to ``info["episode_metrics"]`` at an episode's end,
    computed from the episode's request outcomes (``simulator.metrics.summarize_by``)."""

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if "episode_metrics" in info:
            tiers = tier_slo_attainment(info["episode_outcomes"])
            info = {**info, "episode_metrics": {**info["episode_metrics"], **tiers}}
        return observation, reward, terminated, truncated, info


def make_env(env_id: str, scenario: str, env_kwargs: dict[str, Any], flat: bool) -> gym.Env:
    """``gym.make(env_id, scenario=..., **env_kwargs)`` with per-tier episode metrics, flattened
    to one ``Box`` when ``flat`` (MLP policies). YAML lists become tuples (scenario fields)."""
    if env_id not in envs.ENV_IDS:
        raise ValueError(f"unknown env {env_id!r}; known: {sorted(envs.ENV_IDS)}")
    if not isinstance(scenario, str):
        raise ValueError(f"scenario must be a scenario name, one of {envs.scenario_names()}; got {scenario!r}")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in env_kwargs.items()}
    env: gym.Env = EpisodeTierMetrics(gym.make(env_id, scenario=scenario, **kwargs))
    return FlattenServingObservation(env) if flat else env


def _monitored_env(config: TrainConfig, monitor_file: str, t_start: float | None, in_subprocess: bool) -> gym.Env:
    """A Monitor-wrapped env; a resumed run appends to its existing Monitor CSV, its ``t``
    counted from the run's ``t_start``. In a subprocess env, SIGINT and SIGTERM are ignored:
    the training process decides when to stop and closes its envs."""
    if in_subprocess:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    monitor = Monitor(make_env(config.env_id, config.scenario, config.env_kwargs, config.flat_observation),
                      filename=monitor_file, override_existing=not Path(monitor_file).exists())
    if t_start is not None:
        monitor.t_start = t_start
    return monitor


class ServingDummyVecEnv(DummyVecEnv):
    """``DummyVecEnv`` for servegym envs, with two differences that change no training. Its reward
    buffer holds float64, as ``SubprocVecEnv``'s stacked rewards do: SB3's is float32, which
    rounds rewards float32 cannot hold (e.g. the cost reward's), so the same seed trained
    differently under the two vector envs from the first update on. And a step returns a new
    list of the envs' info dicts and copies of the observation arrays, not deep copies: a
    servegym env makes a new info dict at every step and puts in it only numbers, new lists and
    dicts, a new observation and its frozen ``EpisodeOutcomes``, so nothing returned changes
    afterwards; SB3's deep copies took 15-25 µs of each env step."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        super().__init__(env_fns)
        self.buf_rews = np.zeros((self.num_envs,), dtype=np.float64)

    def step_wait(self) -> VecEnvStepReturn:
        for env_idx in range(self.num_envs):
            obs, self.buf_rews[env_idx], terminated, truncated, self.buf_infos[env_idx] = self.envs[env_idx].step(
                self.actions[env_idx])
            self.buf_dones[env_idx] = terminated or truncated
            self.buf_infos[env_idx]["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[env_idx]:
                self.buf_infos[env_idx]["terminal_observation"] = obs
                obs, self.reset_infos[env_idx] = self.envs[env_idx].reset()
            self._save_obs(env_idx, obs)
        return self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones), list(self.buf_infos)

    def _obs_from_buf(self) -> VecEnvObs:
        return dict_to_obs(self.observation_space, {key: array.copy() for key, array in self.buf_obs.items()})


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS tells it, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def uses_subprocess_envs(n_envs: int, vec_env: str, cores: int | None = None) -> bool:
    """Whether ``n_envs`` envs step in their own processes: never for one env; ``subproc``
    always; ``auto`` when ``cores`` (default ``usable_cores()``) exceed ``n_envs``, one for each
    env and one for training. With fewer, the subprocesses and the learner share the cores and
    pay a pickled round trip per step: on the 2-core machine, two envs in-process trained
    1.2-1.4x faster on every env ID (``env_speed --shipped-hyperparams``), to the same model."""
    if vec_env not in VEC_ENVS:
        raise ValueError(f"unknown vec_env {vec_env!r}; known: {list(VEC_ENVS)}")
    if n_envs <= 1 or vec_env in ("dummy", "native"):
        return False
    return vec_env == "subproc" or (usable_cores() if cores is None else cores) > n_envs


def check_n_envs(n_envs: int, vec_env: str, open_files_limit: int | None = None) -> None:
    """Raise ``ValueError`` naming ``n_envs`` when its envs would need more open files than this
    process may have (``RLIMIT_NOFILE``, or ``open_files_limit``): they would fail one by one
    after minutes of start-up, leaving their monitor files behind."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0] if open_files_limit is None else open_files_limit
    per_env = FILES_PER_ENV[uses_subprocess_envs(n_envs, vec_env)]
    if limit != resource.RLIM_INFINITY and n_envs * per_env + FILES_RESERVED > limit:
        raise ValueError(f"n_envs {n_envs}: needs about {n_envs * per_env + FILES_RESERVED:,} open files "
                         f"({per_env} per env) and this process may open {limit:,} (ulimit -n)")


def native_covers(config: TrainConfig) -> bool:
    """Whether the native vector env covers ``config``'s env (``envs.vector.kernel_spec``:
    Routing-v0, Tier-v0, Migration-v0's periodic mode and Scaling-v0 on the compiled backend, with
    the rewards its kernels compute)."""
    probe = make_env(config.env_id, config.scenario, config.env_kwargs, flat=False)
    try:
        kernel_spec(probe.unwrapped)
        return True
    except NotCoveredError:
        return False
    finally:
        probe.close()


def resolve_vec_env(config: TrainConfig) -> str:
    """The vector env ``config`` trains in: ``vec_env`` when it names one; for ``auto``, ``native``
    where ``native_covers`` the configuration, else ``subproc`` where ``uses_subprocess_envs``,
    else ``dummy``."""
    if config.vec_env != "auto":
        return config.vec_env
    if native_covers(config):
        return "native"
    return "subproc" if uses_subprocess_envs(config.n_envs, config.vec_env) else "dummy"


def make_vec_env(config: TrainConfig, run_dir: Path, t_starts: Sequence[float | None] | None = None) -> VecEnv:
    """``n_envs`` monitored envs in ``resolve_vec_env``'s vector env: a ``NativeVecEnv`` (the envs
    in the compiled core; with ``vec_env="native"``, a configuration it does not cover raises
    naming it), a ``SubprocVecEnv`` or a ``ServingDummyVecEnv``. All give the same training for the
    same seed. Action masks reach MaskablePPO through ``env_method("action_masks")`` in each.
    ``t_starts``: each rank's Monitor start time (a resumed run's)."""
    (run_dir / "monitor").mkdir(parents=True, exist_ok=True)
    t_starts = t_starts or [None] * config.n_envs
    vec_env = resolve_vec_env(config)
    if vec_env == "native":
        return native_vec_env(config, run_dir, t_starts)
    subprocess_envs = vec_env == "subproc" and config.n_envs > 1
    env_fns = [partial(_monitored_env, config, str(monitor_path(run_dir, rank)), t_starts[rank], subprocess_envs)
               for rank in range(config.n_envs)]
    return SubprocVecEnv(env_fns) if subprocess_envs else ServingDummyVecEnv(env_fns)


def native_vec_env(config: TrainConfig, run_dir: Path, t_starts: Sequence[float | None]) -> VecEnv:
    """``make_vec_env``'s ``NativeVecEnv``, monitored per env as ``_monitored_env`` monitors one."""
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in config.env_kwargs.items()}
    venv: VecEnv = NativeVecEnv(config.n_envs, env_id=config.env_id, scenario=config.scenario, **kwargs)
    if config.flat_observation:
        venv = VecFlattenServingObservation(venv)
    return VecEpisodeMonitor(venv, [str(monitor_path(run_dir, rank)) for rank in range(config.n_envs)], t_starts,
                             config.env_id, tier_slo_attainment)


def monitor_path(run_dir: Path, rank: int) -> Path:
    """The Monitor CSV of env ``rank`` in ``run_dir``."""
    return run_dir / "monitor" / f"{rank}.monitor.csv"


def rewind_monitor(path: Path, env_steps: int) -> float | None:
    """Keep only the episodes of the Monitor CSV at ``path`` that ended within its env's first
    ``env_steps`` steps (a checkpoint's), dropping any later or half-written row; returns the
    file's ``t_start`` (None when there is no file, or when a file cut short before its header
    ends is removed for a fresh one)."""
    if not path.is_file():
        return None
    lines = path.read_text().splitlines(keepends=True)
    try:
        t_start = float(json.loads(lines[0][1:])["t_start"])
        length_column = next(csv.reader([lines[1]])).index("l")
    except (IndexError, KeyError, ValueError):
        path.unlink()
        return None
    kept, steps = lines[:2], 0
    for line in lines[2:]:
        try:
            steps += int(next(csv.reader([line]))[length_column])
        except (ValueError, IndexError):
            break
        if steps > env_steps or not line.endswith("\n"):
            break
        kept.append(line)
    if len(kept) < len(lines):
        temporary = path.with_name(f"{path.name}.tmp")
        temporary.write_text("".join(kept))
        os.replace(temporary, path)
    return t_start


@dataclass(frozen=True)
class TrainResult:
    """Where a training session wrote, the model's total steps, and this session's steps and wall time."""

    run_dir: Path
    num_timesteps: int
    trained_steps: int
    wall_s: float
    interrupted_by: signal.Signals | None = None

    @property
    def steps_per_s(self) -> float:
        return self.trained_steps / self.wall_s


def train(config: TrainConfig, run_root: Path = Path("runs"), *, progress_bar: bool = False, verbose: int = 0,
          callbacks: Sequence[BaseCallback] = (), stop_on_signals: bool = False) -> TrainResult:
    """Train a new agent as ``config`` says, in a new run directory under ``run_root``
    (sets torch's thread count for this process to ``config.torch_threads``); ``callbacks``
    run beside the run's own (e.g. a sweep trial's periodic reports). With
    ``stop_on_signals`` (the command line), SIGINT / SIGTERM end training early with a
    checkpoint (module docstring; ``TrainResult.interrupted_by``)."""
    device = resolve_device(config.device)
    config = dataclasses.replace(config, device=device)
    check_n_envs(config.n_envs, config.vec_env)
    _check_setup(config)
    torch.set_num_threads(config.torch_threads)
    run_dir = _new_run_dir(Path(run_root), config)
    config.save(run_dir / "config.yml")
    venv = make_vec_env(config, run_dir)
    try:
        model = new_model(config, venv, verbose)
        logger = _logger(run_dir, verbose)
        model.set_logger(logger)
        logger.record("hparams", HParam(_hparams(config), _hparam_metrics(config)),
                      exclude=("stdout", "log", "json", "csv"))
        return _learn(model, config, run_dir, config.n_timesteps, resuming=False, progress_bar=progress_bar,
                      extra_callbacks=callbacks, stop_on_signals=stop_on_signals)
    finally:
        venv.close()


def new_model(config: TrainConfig, venv: VecEnv, verbose: int = 0) -> BaseAlgorithm:
    """An untrained model of ``config`` on ``venv`` (behind ``VecNormalize`` when the config
    normalises), on ``config.device``."""
    if config.normalize is not None:
        venv = VecNormalize(venv, **config.vec_normalize_kwargs())
    return get_algorithm(config.algo).cls(
        config.policy, venv, seed=config.seed, device=config.device, verbose=verbose,
        policy_kwargs=config.sb3_policy_kwargs(), **config.sb3_algo_kwargs(),
    )


def resume(run_dir: Path, *, timesteps: int | None = None, device: str | None = None,
           progress_bar: bool = False, verbose: int = 0, stop_on_signals: bool = False,
           trust_pickle: bool = False) -> TrainResult:
    """Continue ``run_dir`` from its newest intact checkpoint: model, VecNormalize statistics
    and the step count (``reset_num_timesteps=False``); monitor rows of episodes past the
    checkpoint are dropped first, and ``progress.csv`` goes on from the checkpoint's row with
    the same iteration count. Trains ``timesteps`` more steps, by default what is left of the
    configured ``n_timesteps``. ``stop_on_signals`` as for ``train``; nothing in the files is
    unpickled unless ``trust_pickle`` (``agents.model_files``)."""
    run_dir = Path(run_dir)
    config = TrainConfig.load(run_dir / "config.yml")
    config = dataclasses.replace(config, device=resolve_device(device or config.device))
    checkpoint, steps = latest_checkpoint(run_dir, with_stats=config.normalize is not None)
    more = as_int("timesteps", timesteps, minimum=1) if timesteps is not None else config.n_timesteps - steps
    if more <= 0:
        raise ValueError(f"{run_dir} has trained {steps} of its {config.n_timesteps} steps; pass timesteps to train more")
    config = dataclasses.replace(config, n_timesteps=steps + more)
    torch.set_num_threads(config.torch_threads)
    t_starts = [rewind_monitor(monitor_path(run_dir, rank), steps // config.n_envs) for rank in range(config.n_envs)]
    venv = make_vec_env(config, run_dir, t_starts)
    try:
        if config.normalize is not None:
            venv = load_vecnormalize(vecnormalize_path(checkpoint), venv, trust_pickle)
            venv.training = True
        model = load_model(checkpoint, config, venv, config.device, trust_pickle)
        config.save(run_dir / "config.yml")
        model.set_random_seed(config.seed + steps)
        iterations = steps // (model.n_steps * model.n_envs) if isinstance(model, OnPolicyAlgorithm) else 0
        model.set_logger(_logger(run_dir, verbose, continue_from_steps=steps, iteration_offset=iterations))
        return _learn(model, config, run_dir, more, resuming=True, progress_bar=progress_bar,
                      stop_on_signals=stop_on_signals)
    finally:
        venv.close()


@contextmanager
def _signals_stop(stop: StopOnSignal, enabled: bool) -> Iterator[None]:
    """While inside, the first SIGINT or SIGTERM sets ``stop.received`` (training ends at the
    next env step) and puts the previous handlers back, so a second one acts at once. Only
    in the main thread (Python delivers signals there), and only when ``enabled``."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def handle(signum: int, _frame: Any) -> None:
        stop.received = signal.Signals(signum)
        for number, handler in previous.items():
            signal.signal(number, handler)

    for signum in STOP_SIGNALS:
        signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _learn(model: BaseAlgorithm, config: TrainConfig, run_dir: Path, timesteps: int, *, resuming: bool,
           progress_bar: bool, extra_callbacks: Sequence[BaseCallback] = (), stop_on_signals: bool = False) -> TrainResult:
    layout = TrainingLayout(with_evaluation=config.eval_freq > 0)
    stop = StopOnSignal()
    callbacks: list[BaseCallback] = [stop, ServingMetricsCallback(layout), *extra_callbacks]
    if progress_bar:
        callbacks.append(StepProgressBar(timesteps))
    if config.checkpoint_freq > 0:
        callbacks.append(CheckpointEvery(config.checkpoint_freq, run_dir / "checkpoints"))
    if config.eval_freq > 0:
        callbacks.append(BaselineEvalCallback(
            make_env(config.env_id, config.scenario, config.env_kwargs, config.flat_observation),
            make_env(config.env_id, config.scenario, config.env_kwargs, flat=False),
            config.eval_seeds, config.eval_baselines, config.eval_freq, config.n_envs, run_dir, config.eval_metric,
            deterministic=config.eval_mode == "deterministic", layout=layout,
        ))
    start_steps = model.num_timesteps
    started = time.perf_counter()
    with _signals_stop(stop, stop_on_signals), frozen_heap():
        model.learn(total_timesteps=timesteps, callback=CallbackList(callbacks), reset_num_timesteps=not resuming)
    wall_s = time.perf_counter() - started
    if stop.received is not None:  # the steps gathered since the last update were never trained on
        model.num_timesteps = stop.trained_steps
        for rank in range(config.n_envs):
            rewind_monitor(monitor_path(run_dir, rank), model.num_timesteps // config.n_envs)
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    save_model(model, run_dir / "checkpoints" / f"model_{model.num_timesteps}_steps.zip")
    if stop.received is None:
        save_model(model, run_dir / "final_model.zip")
    return TrainResult(run_dir, model.num_timesteps, model.num_timesteps - start_steps, wall_s, stop.received)


def _check_setup(config: TrainConfig) -> None:
    """Fail before creating anything: env arguments, action space, the native vector env's
    coverage, baseline names, evaluation metric."""
    probe = make_env(config.env_id, config.scenario, config.env_kwargs, flat=False)
    try:
        check_action_space(config.algo, probe.action_space)
        if config.vec_env == "native":
            try:
                kernel_spec(probe.unwrapped)
            except NotCoveredError as error:
                raise NotCoveredError(f"{error} (here: --vec-env dummy, which trains the same, slower)") from None
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


def _logger(run_dir: Path, verbose: int, continue_from_steps: int | None = None,
            iteration_offset: int = 0) -> ContinuedLogger:
    """SB3 logger writing TensorBoard events and ``progress.csv`` into the run directory; a
    resumed run continues the CSV from ``continue_from_steps`` and its iteration count from
    ``iteration_offset`` (``agents.training_log``)."""
    csv_path = str(run_dir / "progress.csv")
    table = CSVOutputFormat(csv_path) if continue_from_steps is None else ContinuedCSVOutputFormat(csv_path, continue_from_steps)
    formats = [table, TensorBoardOutputFormat(str(run_dir))]
    # Keys up to 64 characters: at the default 36, "eval/<policy>/<metric>" tags that differ only at
    # their end would be cut to the same text, which SB3 refuses.
    human = [HumanOutputFormat(sys.stdout, max_length=64)] if verbose else []
    return ContinuedLogger(str(run_dir), human + formats, iteration_offset)


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
    """The HPARAMS tab's metric columns: with periodic evaluation, the held-out evaluation's SLO
    attainment and evaluation metric first; then the training episodes' SLO attainment and return."""
    metrics = {}
    if config.eval_freq > 0:
        metrics.update({"eval/agent/slo_attainment": 0.0, f"eval/agent/{config.eval_metric}": 0.0})
    metrics.update({"serving/slo_attainment": 0.0, "rollout/ep_rew_mean": 0.0})
    return metrics


def _eval_seeds(count: int | None) -> list[int]:
    """``count`` (default 3) held-out evaluation seeds from ``EVAL_SEED_BASE``."""
    return [EVAL_SEED_BASE + i for i in range(as_int("--eval-seeds", 3 if count is None else count, minimum=1))]


def _comma_list(text: str) -> list[str]:
    return [item for item in text.split(",") if item]


@command("agents.train")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI: bad input (a ``ValueError`` or ``OSError``) prints one line and returns 2;
    an interrupted run returns 128 + the signal number after saving (module docstring)."""
    parser = argparse.ArgumentParser(prog="agents.train", description=__doc__.splitlines()[0])
    parser.add_argument("--env", help=f"one of {sorted(envs.ENV_IDS)}")
    parser.add_argument("--scenario", help=f"one of {envs.scenario_names()} (default: default)")
    parser.add_argument("--algo", choices=sorted(ALGORITHMS))
    parser.add_argument("--timesteps", type=int, help="env steps (more steps when resuming); default: hyper-parameters")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--n-envs", type=int, help="parallel envs; default: hyper-parameters")
    parser.add_argument("--vec-env", choices=VEC_ENVS,
                        help="default: the hyper-parameters' (else auto: native where it covers the configuration, "
                             "else subproc when the machine has more cores than n-envs, else dummy); native: the envs "
                             "stepped together in the compiled core (agents.vec_env.NativeVecEnv; Routing-v0, Tier-v0, "
                             "Migration-v0, Scaling-v0)")
    parser.add_argument("--device", choices=DEVICES, help="default: cpu (faster than CUDA for these MLP policies; auto: CUDA when present)")
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
    parser.add_argument(TRUST_FLAG, action="store_true",
                        help="with --resume: load checkpoints that pickle Python objects (older VecNormalize .pkl "
                             "statistics): this runs code from the files; only for files you trust")
    parser.add_argument("--verbose", type=int, choices=(0, 1), default=1)
    args = parser.parse_args(argv)
    if args.resume is not None:
        fixed = ["env", "scenario", "algo", "seed", "n_envs", "vec_env", "hyperparams", "overrides", "eval_freq", "eval_seeds",
                 "eval_baselines", "eval_metric", "eval_stochastic", "checkpoint_freq", "torch_threads"]
        given = [name for name in fixed if getattr(args, name) is not None]
        if given:
            parser.error(f"--resume takes the run's config.yml; these cannot change: {given}")
    elif args.env is None or args.algo is None:
        parser.error("--env and --algo are required (unless --resume)")
    if args.trust_pickle and args.resume is None:
        parser.error(f"{TRUST_FLAG} goes with --resume (a new run loads no file)")
    try:
        result = _run(args)
    except KeyboardInterrupt:  # before training started, or a second Ctrl-C
        print(f"{parser.prog}: interrupted at once; checkpoints already saved are kept", file=sys.stderr)
        return 128 + signal.SIGINT
    print(f"run: {result.run_dir}")
    print(f"trained {result.trained_steps} steps (total {result.num_timesteps}) in {result.wall_s:.1f} s: "
          f"{result.steps_per_s:.0f} steps/s")
    if result.interrupted_by is not None:
        print(f"interrupted by {result.interrupted_by.name}: saved checkpoints/model_{result.num_timesteps}_steps.zip "
              "(the steps of its last update; those gathered after it were not trained on and are dropped); "
              f"continue with: python -m agents.train --resume {result.run_dir}")
        return 128 + result.interrupted_by
    return 0


def _run(args: argparse.Namespace) -> TrainResult:
    """Train or resume as the parsed command line says."""
    if args.resume is not None:
        return resume(args.resume, timesteps=args.timesteps, device=args.device,
                      progress_bar=not args.no_progress_bar, verbose=args.verbose, stop_on_signals=True,
                      trust_pickle=args.trust_pickle)
    config = build_config(
        args.env, args.scenario or "default", args.algo, 0 if args.seed is None else args.seed,
        n_timesteps=args.timesteps, n_envs=args.n_envs, device=args.device or DEFAULT_DEVICE,
        hyperparams_path=args.hyperparams, overrides=args.overrides or (),
        eval_freq=args.eval_freq or 0,
        eval_seeds=_eval_seeds(args.eval_seeds) if args.eval_freq else [],
        eval_baselines=args.eval_baselines or [], eval_metric=args.eval_metric or "return",
        checkpoint_freq=DEFAULT_CHECKPOINT_FREQ if args.checkpoint_freq is None else args.checkpoint_freq,
        torch_threads=1 if args.torch_threads is None else args.torch_threads, vec_env=args.vec_env,
        eval_mode="stochastic" if args.eval_stochastic else "deterministic",
    )
    return train(config, args.run_dir, progress_bar=not args.no_progress_bar, verbose=args.verbose,
                 stop_on_signals=True)


if __name__ == "__main__":
    sys.exit(main())
