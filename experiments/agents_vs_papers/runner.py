"""Train a recipe's agent on each training seed, run the agents and the heuristics on the same
held-out seeds, and collect each episode's headline metrics."""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym

import baselines
from agents.config import TrainConfig, build_config, config_path_for
from agents.evaluate import load_agent
from agents.headline import headline_values
from agents.rollout import play_episode
from agents.train import EVAL_SEED_BASE, TrainResult, make_env, train
from experiments.agents_vs_papers.recipe import Recipe

AGENT_LABEL = "agent"


@dataclass(frozen=True)
class HeuristicChoice:
    """The heuristic the agent is compared with, the references beside it, and why (a note
    for the report when the paper's best heuristic is not registered)."""

    compared: str | None
    references: tuple[str, ...]
    note: str


def usable_policies(recipe: Recipe, names: Sequence[str]) -> list[str]:
    """The names among ``names`` that ``baselines.make`` builds for the recipe's env and scenario."""
    env = make_env(recipe.env_id, recipe.scenario, recipe.env_kwargs, flat=False)
    usable = []
    for name in names:
        try:
            baselines.make(name, env)
        except ValueError:
            continue
        usable.append(name)
    env.close()
    return usable


def choose_heuristics(recipe: Recipe) -> HeuristicChoice:
    """The first of ``recipe.heuristics`` registered for the env and scenario (``baselines.make``
    builds it; the paper's best when it is); when none is, every registered policy that applies
    becomes a reference and the comparison is against the best of them on the headline metric
    (``report.pick_best``)."""
    usable = usable_policies(recipe, recipe.heuristics)
    if usable:
        chosen = usable[0]
        references = tuple(usable_policies(recipe, [n for n in recipe.references if n != chosen]))
        note = ("the paper's best heuristic" if chosen == recipe.heuristics[0] else
                f"the paper's best heuristic {recipe.heuristics[0]!r} is not registered for this env and scenario; "
                f"its fall-back {chosen!r} is used")
        return HeuristicChoice(chosen, references, note)
    registered = tuple(usable_policies(recipe, baselines.policy_names(recipe.env_id)))
    if not registered:
        return HeuristicChoice(None, (), f"no heuristic of {list(recipe.heuristics)} nor any other policy is registered "
                                         f"for {recipe.env_id} on {recipe.scenario!r}: the agent is reported alone")
    return HeuristicChoice(None, registered, f"none of {list(recipe.heuristics)} is registered for {recipe.env_id} on "
                                             f"{recipe.scenario!r}; the agent is compared with the best registered "
                                             "heuristic on the headline metric")


def action_space_of(recipe: Recipe) -> gym.spaces.Space:
    """The action space of the agent's env (for the report's entropy diagnostic)."""
    env = make_env(recipe.env_id, recipe.scenario, recipe.agent_env, flat=False)
    space = env.action_space
    env.close()
    return space


def eval_seeds(recipe: Recipe) -> list[int]:
    """Held-out evaluation seeds ``agents.train.EVAL_SEED_BASE``, ... (training uses small seeds)."""
    return [EVAL_SEED_BASE + i for i in range(recipe.eval_seeds)]


def recipe_config(recipe: Recipe, seed: int, timesteps: int | None = None) -> TrainConfig:
    """The training configuration of ``recipe`` on training seed ``seed`` (budget ``timesteps`` if given)."""
    return build_config(recipe.env_id, recipe.scenario, recipe.algo, seed, n_timesteps=timesteps or recipe.timesteps,
                        n_envs=recipe.n_envs, device="cpu", overrides=recipe.overrides())


def train_agent(recipe: Recipe, run_root: Path, seed: int, timesteps: int | None = None) -> TrainResult:
    """``agents.train.train`` with the recipe's algorithm, hyper-parameters, env and budget (or ``timesteps``)."""
    return train(recipe_config(recipe, seed, timesteps), run_root, progress_bar=True)


def finished_run(recipe: Recipe, run_root: Path, seed: int, timesteps: int | None = None) -> TrainResult | None:
    """The newest run directory under ``run_root`` that trained exactly this recipe's configuration
    on ``seed`` to its end (``final_model.zip``; an interrupted run has none), or None. Its steps
    and wall time are the last ones its ``progress.csv`` logged (whole seconds, as SB3 logs them)."""
    config = recipe_config(recipe, seed, timesteps)
    matches = [path.parent for path in sorted(Path(run_root).glob("*/config.yml"))
               if (path.parent / "final_model.zip").is_file() and TrainConfig.load(path) == config]
    if not matches:
        return None
    run_dir = max(matches, key=lambda path: path.name)
    with open(run_dir / "progress.csv", newline="") as handle:
        logged = [row for row in csv.DictReader(handle) if row.get("time/time_elapsed")]
    if not logged:
        raise ValueError(f"{run_dir / 'progress.csv'} logged no training progress; delete the run or train it again")
    steps = int(float(logged[-1]["time/total_timesteps"]))
    return TrainResult(run_dir, steps, steps, float(logged[-1]["time/time_elapsed"]))


def episode_rows(recipe: Recipe, policy_env: gym.Env, policy, seeds: Sequence[int],
                 deterministic: bool = True) -> list[dict[str, float]]:
    """One row of headline metrics per seed (plus the env's episode metrics), in seed order."""
    rows = []
    for seed in seeds:
        episode = play_episode(policy_env, policy, seed, deterministic)
        values = headline_values(recipe.headline.metrics, episode.metrics, episode.outcomes, episode.metrics["duration_s"])
        rows.append({**episode.metrics, **values})
    return rows


def evaluate_all(recipe: Recipe, model_paths: Sequence[Path], heuristics: Sequence[str], seeds: Sequence[int],
                 deterministic: bool = True, trust_pickle: bool = False) -> dict[str, list[list[dict[str, float]]]]:
    """Per policy label, its runs' episode rows on ``seeds``: ``agent`` one run per model (training
    seed, in the order given; ``deterministic`` or sampled actions; ``trust_pickle``: as
    ``agents.evaluate.load_agent``), each heuristic one run; prints a line per run."""
    if not model_paths:
        raise ValueError("no trained model to evaluate")
    results: dict[str, list[list[dict[str, float]]]] = {AGENT_LABEL: []}
    plain = make_env(recipe.env_id, recipe.scenario, recipe.env_kwargs, flat=False)
    for model_path in model_paths:
        started = time.perf_counter()
        config = TrainConfig.load(config_path_for(model_path))
        agent_env = make_env(recipe.env_id, recipe.scenario, recipe.agent_env, flat=config.flat_observation)
        policy, _ = load_agent(model_path, agent_env, trust_pickle=trust_pickle)
        results[AGENT_LABEL].append(episode_rows(recipe, agent_env, policy, seeds, deterministic))
        agent_env.close()
        print(f"  evaluated {AGENT_LABEL} (training seed {config.seed}) {len(seeds)} episodes in "
              f"{time.perf_counter() - started:5.1f} s", flush=True)
    for label in heuristics:
        started = time.perf_counter()
        results[label] = [episode_rows(recipe, plain, baselines.make(label, plain), seeds)]
        print(f"  evaluated {label:<24} {len(seeds)} episodes in {time.perf_counter() - started:5.1f} s", flush=True)
    plain.close()
    return results
