"""SB3 callbacks: serving metrics of training episodes on TensorBoard, periodic evaluation of
the agent against baseline policies on fixed seeds (best model kept, the baselines' levels as
reference lines), and the run's custom-scalars layout for the metrics the scenario has."""

from __future__ import annotations

import inspect
import json
import math
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat
from stable_baselines3.common.vec_env import VecNormalize
from torch.utils.tensorboard import SummaryWriter

from agents.config import sanitize, vecnormalize_path
from agents.dashboard import (
    EPISODE_METRICS,
    REFERENCE_LABEL,
    higher_is_better,
    metric_names,
    serving_scalars,
    training_layout,
)
from agents.model_files import save_vecnormalize
from agents.rollout import run_episode
from baselines import make as make_policy

AGENT_LABEL = "agent"


class AgentPolicy:
    """A trained SB3 model as a policy for ``agents.rollout.run_episode``: observations are
    scaled with the run's VecNormalize statistics (read only) when it has them, and action
    masks reach models that take them (MaskablePPO) as a copy: the env's mask is read-only,
    and torch warns about tensors made from read-only arrays."""

    def __init__(self, model: BaseAlgorithm, vec_normalize: VecNormalize | None = None) -> None:
        self.model = model
        self.vec_normalize = vec_normalize
        self._takes_masks = "action_masks" in inspect.signature(model.predict).parameters

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[Any, Any]:
        if self.vec_normalize is not None:
            observation = self.vec_normalize.normalize_obs(observation)
        kwargs = {"action_masks": None if action_masks is None else np.array(action_masks)} if self._takes_masks else {}
        return self.model.predict(observation, state=state, episode_start=episode_start,
                                  deterministic=deterministic, **kwargs)


class TrainingLayout:
    """Writes a training run's custom-scalars layout (``agents.dashboard.training_layout``) once,
    for the serving metrics that the first finished episode or evaluation reports (not NaN):
    a scenario's charts are those it has. TensorBoard keeps a run's first layout."""

    def __init__(self, with_evaluation: bool) -> None:
        self.with_evaluation = with_evaluation
        self.written = False

    def write(self, logger: Logger, metrics: Mapping[str, float]) -> None:
        if self.written:
            return
        for output in logger.output_formats:
            if isinstance(output, TensorBoardOutputFormat):
                present = {k: v for k, v in metrics.items() if not math.isnan(v)}
                output.writer.add_custom_scalars(training_layout(metric_names(present), self.with_evaluation))
                self.written = True


class ServingMetricsCallback(BaseCallback):
    """Logs each finished training episode's serving metrics (``info["episode_metrics"]``) as
    ``serving/<metric>``; episodes ending between two log dumps are averaged
    (``Logger.record_mean``). Values still pending when training ends are dumped then. The
    first episode's metrics write ``layout``."""

    def __init__(self, layout: TrainingLayout) -> None:
        super().__init__()
        self.layout = layout

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            metrics = info.get("episode_metrics")
            if metrics is not None:
                self.layout.write(self.logger, metrics)
                for tag, value in serving_scalars(metrics).items():
                    self.logger.record_mean(tag, value)
        return True

    def _on_training_end(self) -> None:
        if self.logger.name_to_value:
            self.logger.dump(self.num_timesteps)


class BaselineEvalCallback(BaseCallback):
    """At the start of training and every ``eval_freq`` env steps, runs the agent
    (``deterministic`` or sampling, seeded by the episode seed) for one episode per seed of
    ``seeds`` on a separate env and logs the mean metrics as ``eval/agent/<metric>`` beside
    ``eval/<baseline>/<metric>`` for each named baseline: the agent's learning curve against the
    baselines' levels as flat reference lines (baselines are evaluated once, at the first
    evaluation: fixed seeds give fixed results). When the agent's mean ``metric`` beats
    the best so far (higher, or lower for latencies and costs: ``higher_is_better``), the model
    and its VecNormalize statistics are saved as ``best_model.zip`` (``save_model``). Every
    evaluation is appended to ``evaluations.json`` in ``run_dir``, which also restores the best
    value when a run resumes.
    """

    def __init__(
        self,
        agent_env: gym.Env,
        baseline_env: gym.Env,
        seeds: Sequence[int],
        baselines: Sequence[str],
        eval_freq: int,
        n_envs: int,
        run_dir: Path,
        metric: str = "return",
        deterministic: bool = True,
        layout: TrainingLayout | None = None,
    ) -> None:
        super().__init__()
        if not seeds:
            raise ValueError("evaluation needs at least one seed")
        if eval_freq < 1:
            raise ValueError(f"eval_freq must be >= 1 env step, got {eval_freq}")
        self.agent_env = agent_env
        self.baseline_env = baseline_env
        self.seeds = list(seeds)
        self.baselines = list(baselines)
        self.every_calls = max(eval_freq // n_envs, 1)
        self.run_dir = Path(run_dir)
        self.metric = metric
        self.deterministic = deterministic
        self.layout = layout
        self.history_path = self.run_dir / "evaluations.json"
        self.history: list[dict[str, Any]] = (
            json.loads(self.history_path.read_text()) if self.history_path.exists() else []
        )
        self.sign = 1.0 if higher_is_better(metric) else -1.0
        self.best = max((self.sign * entry[AGENT_LABEL][metric] for entry in self.history), default=-math.inf)
        self.baseline_means: dict[str, dict[str, float]] | None = None
        self._reference_writers: dict[str, SummaryWriter] = {}

    def _on_training_start(self) -> None:
        self.evaluate()

    def _on_step(self) -> bool:
        if self.n_calls % self.every_calls == 0:
            self.evaluate()
        return True

    def evaluate(self) -> dict[str, dict[str, float]]:
        """Evaluate now, log, keep the best model; returns ``{label: mean metrics}``."""
        if self.baseline_means is None:
            self.baseline_means = {
                name: mean_metrics([run_episode(self.baseline_env, make_policy(name, self.baseline_env), seed)
                                    for seed in self.seeds])
                for name in self.baselines
            }
        vec_normalize = self.model.get_vec_normalize_env()
        agent = AgentPolicy(self.model, vec_normalize)
        agent_means = mean_metrics([run_episode(self.agent_env, agent, seed, self.deterministic) for seed in self.seeds])
        if self.metric not in agent_means:
            raise ValueError(f"evaluation metric {self.metric!r} is not an episode metric; known: {sorted(agent_means)}")
        if self.layout is not None:
            self.layout.write(self.logger, agent_means)
        means = {AGENT_LABEL: agent_means, **self.baseline_means}
        for label, values in means.items():
            for name in [*metric_names(values), *EPISODE_METRICS]:
                if name in values and not math.isnan(values[name]):
                    self.logger.record(f"eval/{label}/{name}", values[name])
        self._write_reference_lines()
        if self.sign * agent_means[self.metric] > self.best:
            self.best = self.sign * agent_means[self.metric]
            save_model(self.model, self.run_dir / "best_model.zip")
        self.logger.record(f"eval/best_{self.metric}", self.sign * self.best)
        self.history.append({"timesteps": self.num_timesteps, **means})
        self.history_path.write_text(json.dumps(self.history, indent=1, allow_nan=True))
        self.logger.dump(self.num_timesteps)
        return means


    def _write_reference_lines(self) -> None:
        """Each heuristic's levels as ``eval/reference/<metric>`` at this step in its own run,
        ``run_dir/reference_lines/<heuristic>/``: the training layout's charts draw one coloured,
        named line per run (the same values as the run's ``eval/<heuristic>/<metric>``)."""
        for name, values in (self.baseline_means or {}).items():
            if name not in self._reference_writers:
                self._reference_writers[name] = SummaryWriter(str(self.run_dir / "reference_lines" / sanitize(name)))
            writer = self._reference_writers[name]
            for metric in [*metric_names(values), *EPISODE_METRICS]:
                if metric in values and not math.isnan(values[metric]):
                    writer.add_scalar(f"eval/{REFERENCE_LABEL}/{metric}", values[metric], global_step=self.num_timesteps)
            writer.flush()

    def _on_training_end(self) -> None:
        for writer in self._reference_writers.values():
            writer.close()
        self._reference_writers.clear()


def mean_metrics(episodes: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per metric, the mean over episodes where it is not NaN (NaN when it is NaN in all)."""
    names = dict.fromkeys(name for episode in episodes for name in episode)
    means = {}
    for name in names:
        values = np.array([episode.get(name, math.nan) for episode in episodes], dtype=float)
        finite = values[~np.isnan(values)]
        means[name] = float(finite.mean()) if finite.size else math.nan
    return means


def save_model(model: BaseAlgorithm, path: Path) -> None:
    """Save ``model`` at ``path`` and its VecNormalize statistics (if any) at
    ``vecnormalize_path(path)``, statistics first; each file is written under a temporary name
    and renamed, so an interruption never leaves a partial file under the final name."""
    path = Path(path)
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is not None:
        stats = vecnormalize_path(path)
        save_vecnormalize(vec_normalize, _temporary(stats))
        os.replace(_temporary(stats), stats)
    model.save(_temporary(path))
    os.replace(_temporary(path), path)


def _temporary(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place."""
    return path.with_name(f"{path.name}.tmp")


class CheckpointEvery(BaseCallback):
    """Saves the model (``save_model``) as ``directory/model_<steps>_steps.zip`` (SB3's
    ``CheckpointCallback`` names), written atomically, at the first update boundary (a rollout's
    start) after every ``every_steps`` env steps: a checkpoint holds the parameters trained on
    exactly the steps its name counts, none gathered after its last update."""

    def __init__(self, every_steps: int, directory: Path) -> None:
        super().__init__()
        self.every_steps = every_steps
        self.directory = Path(directory)
        self.next_steps = 0

    def _on_training_start(self) -> None:
        self.next_steps = (self.model.num_timesteps // self.every_steps + 1) * self.every_steps

    def _on_rollout_start(self) -> None:
        steps = self.model.num_timesteps
        if steps >= self.next_steps:
            self.directory.mkdir(parents=True, exist_ok=True)
            save_model(self.model, self.directory / f"model_{steps}_steps.zip")
            self.next_steps = (steps // self.every_steps + 1) * self.every_steps

    def _on_step(self) -> bool:
        return True


class StopOnSignal(BaseCallback):
    """Ends training at the next env step once ``received`` is set (by a signal handler,
    ``agents.train``); ``trained_steps`` is the step count at the last update boundary (a
    rollout's start), what the model has trained on: SB3 counts the steps gathered after it too."""

    def __init__(self) -> None:
        super().__init__()
        self.received: signal.Signals | None = None
        self.trained_steps = 0

    def _on_training_start(self) -> None:
        self.trained_steps = self.model.num_timesteps

    def _on_rollout_start(self) -> None:
        self.trained_steps = self.model.num_timesteps

    def _on_step(self) -> bool:
        return self.received is None
