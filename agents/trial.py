"""One sweep trial, run by Ray Tune: ``agents.train`` for one cell, hyper-parameter assignment
and training seed (the same run directory and TensorBoard logs as ``python -m agents.train``),
then the trained agent and the cell's heuristics on the held-out evaluation seeds.

The trial writes ``evaluation.json`` (every episode of the agent and of each heuristic, with the
cell's headline metric) into its run directory and reports the mean headline metric to Tune
as ``score`` (negated where lower is better, so a sweep always maximises). A trial that Tune
starts again finds that file when an earlier attempt finished (an interruption can fall between
the two) and reports it instead of training again; an unfinished attempt is removed and redone. Under ASHA it also
reports a held-out evaluation every ``timesteps / reports`` steps. A heuristic's episodes
depend only on the scenario, its arguments, the seeds and the code beneath the agents
(``code_fingerprint``), so the first trial of a cell evaluates them and stores them under
``<sweep>/heuristics/``; later trials read them back, and a sweep resumed after that code
changed evaluates them again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import ray
from ray import tune
from ray.tune.search.repeater import TRIAL_INDEX
from stable_baselines3.common.callbacks import BaseCallback

import baselines
import envs
import hardware
import simulator
from agents.callbacks import AgentPolicy
from agents.evaluate import load_agent
from agents.headline import better_when_higher, headline_values
from agents.rollout import PolicyLike, play_episode
from agents.sweep_config import Cell, SweepConfig, searched
from agents.train import make_env, train

EVALUATION_FILE = "evaluation.json"
RUNS_DIR = "runs"
HEURISTICS_DIR = "heuristics"


def run_trial(params: dict[str, Any], sweep: SweepConfig, root: str) -> None:
    """Tune's function trainable: ``params`` holds ``cell`` (an index into ``sweep.cells``),
    ``hyperparams`` (the searched entries' assignment) and ``seed``, or Optuna's repeat index
    (``sweep.train_seeds[index]``); ``root`` is the sweep directory (shared by every node)."""
    cell = sweep.cells[params["cell"]]
    seed = int(params["seed"]) if "seed" in params else sweep.train_seeds[params[TRIAL_INDEX]]
    assignment = dict(params["hyperparams"])
    run_root = Path(root) / RUNS_DIR / tune.get_context().get_trial_id()
    finished = sorted(run_root.glob(f"*/{EVALUATION_FILE}"))
    if finished:  # an attempt that finished before an interruption kept Tune from recording it
        tune.report(_summary(json.loads(finished[0].read_text())))
        return
    if run_root.exists():  # an interrupted attempt of this trial: start it afresh
        shutil.rmtree(run_root)
    config = sweep.train_config(cell, seed, assignment)
    callbacks: list[BaseCallback] = []
    if sweep.scheduler == "asha":
        every = max(cell.timesteps // sweep.asha["reports"], 1)
        callbacks.append(PeriodicEvaluation(cell, sweep.eval_seeds, every, config.flat_observation))
    result = train(config, run_root, callbacks=callbacks)
    record = {
        "trial_id": tune.get_context().get_trial_id(), "cell": cell.index, "board": cell.board,
        "scenario": cell.scenario, "env_id": cell.env_id, "env_kwargs": cell.env_kwargs, "algo": cell.algo,
        "reward": cell.reward, "metric": cell.metric, "constraint": cell.constraint, "seed": seed,
        "hyperparams": assignment, "searched": sorted(searched(cell.hyperparams)), "timesteps": result.num_timesteps,
        "run_dir": str(result.run_dir), "node_id": ray.get_runtime_context().get_node_id(),
        "agent": _agent_rows(cell, result.run_dir, config.flat_observation, sweep.eval_seeds),
        "heuristics": {name: heuristic_rows(Path(root), cell, name, sweep.eval_seeds) for name in cell.heuristics},
    }
    _write_json(result.run_dir / EVALUATION_FILE, record)
    tune.report(_summary(record))


def _agent_rows(cell: Cell, run_dir: Path, flat: bool, seeds: Sequence[int]) -> list[dict[str, float]]:
    """The trained run's ``final_model.zip`` on the evaluation seeds, in the agent's env."""
    env = make_env(cell.env_id, cell.scenario, cell.agent_env, flat)
    try:
        policy, _ = load_agent(run_dir / "final_model.zip", env)
        return episode_rows(env, policy, cell.metric, seeds, deterministic=True)
    finally:
        env.close()


def _summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a finished trial reports to Tune: its score and each heuristic's mean headline metric."""
    metric = record["metric"]
    return {**score(metric, record["agent"]), "node_id": record["node_id"], "run_dir": record["run_dir"],
            "seed": record["seed"], **{f"heuristic_{name}": mean_metric(rows, metric)
                                      for name, rows in record["heuristics"].items()}}


def score(metric: str, rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """What a trial reports: the mean of ``metric`` over the episodes, and ``score`` (that mean,
    negated when lower is better)."""
    mean = mean_metric(rows, metric)
    return {metric: mean, "score": mean if better_when_higher(metric) else -mean}


def mean_metric(rows: Sequence[Mapping[str, float]], metric: str) -> float:
    """The mean of ``metric`` over the episodes where it is a number (NaN when none is)."""
    values = np.array([row[metric] for row in rows], dtype=float)
    return float(np.nanmean(values)) if np.any(~np.isnan(values)) else float("nan")


def episode_rows(env: gym.Env, policy: PolicyLike, metric: str, seeds: Sequence[int],
                 deterministic: bool = True) -> list[dict[str, float]]:
    """One row per seed: the episode's metrics, its seed and the headline ``metric``; a trained
    policy takes its most likely action unless ``deterministic`` is False (``agents.rollout``)."""
    rows = []
    for seed in seeds:
        episode = play_episode(env, policy, seed, deterministic)
        values = headline_values([metric], episode.metrics, episode.outcomes, episode.metrics["duration_s"])
        rows.append({**episode.metrics, **values, "seed": float(seed)})
    return rows


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 (16 hex digits) of every file, code and data, of the packages a heuristic's episodes
    depend on (hardware, simulator, envs, baselines): stored episodes are read back only by the code
    that made them (a profile or planner fix changes episodes without changing their arguments)."""
    digest = hashlib.sha256()
    for package in (hardware, simulator, envs, baselines):
        package_dir = Path(package.__file__).parent
        for path in sorted(p for p in package_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(path.relative_to(package_dir.parent).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def heuristic_rows(root: Path, cell: Cell, name: str, seeds: Sequence[int]) -> list[dict[str, float]]:
    """Heuristic ``name``'s episode rows on the cell's env, from ``root/heuristics/`` when a trial
    of the sweep has stored them (the same scenario, arguments, seeds, metric and code), else run
    now and stored."""
    key = {"scenario": cell.scenario, "env_id": cell.env_id, "env_kwargs": cell.plain_env, "heuristic": name,
           "seeds": list(seeds), "metric": cell.metric, "code": code_fingerprint()}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = root / HEURISTICS_DIR / f"{name}__{digest}.json"
    if path.is_file():
        return json.loads(path.read_text())["rows"]
    env = make_env(cell.env_id, cell.scenario, cell.plain_env, flat=False)
    try:
        rows = episode_rows(env, baselines.make(name, env), cell.metric, seeds)
    finally:
        env.close()
    _write_json(path, {"key": key, "rows": rows})
    return rows


class PeriodicEvaluation(BaseCallback):
    """Every ``every`` env steps (before the last), evaluates the agent being trained on the
    held-out seeds and reports ``score`` to Tune (ASHA's rungs)."""

    def __init__(self, cell: Cell, seeds: Sequence[int], every: int, flat: bool) -> None:
        super().__init__()
        self.cell, self.seeds, self.every = cell, list(seeds), every
        self.env = make_env(cell.env_id, cell.scenario, cell.agent_env, flat)
        self.next_report = every

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_report and self.num_timesteps < self.cell.timesteps:
            self.next_report += self.every
            policy = AgentPolicy(self.model, self.model.get_vec_normalize_env())
            tune.report(score(self.cell.metric, episode_rows(self.env, policy, self.cell.metric, self.seeds)))
        return True

    def _on_training_end(self) -> None:
        self.env.close()


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(partial, path)
