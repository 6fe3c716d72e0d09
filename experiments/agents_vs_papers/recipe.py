"""Training recipes of the agents-vs-papers experiment: one YAML per paper scenario in
``agents/recipes/`` (env, scenario, reward, algorithm, budget, env_kwargs, the paper's best
heuristic and its headline metric), read strictly."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import baselines  # noqa: F401  (registers the scenarios built by baselines, e.g. cauchy_autoscaling)
import envs
from agents.config import as_int, deep_merge, get_algorithm, load_yaml

RECIPES_DIR = Path(__file__).resolve().parent.parent.parent / "agents" / "recipes"
KEYS = frozenset({
    "paper", "env_id", "scenario", "algo", "timesteps", "budget_minutes", "n_envs", "env_kwargs", "hyperparams",
    "heuristics", "references", "headline", "eval_seeds", "quick", "agent_env_kwargs",
})
AGENT_ONLY_ENV_KEYS = frozenset({"action", "observe_episode_quality"})  # the agent's action and observation; the simulation stays the heuristics'
HEADLINE_KEYS = frozenset({"metric", "title", "source", "also", "constraint"})
CONSTRAINT_KEYS = frozenset({"metric", "min"})
QUICK_KEYS = frozenset({"timesteps", "n_envs", "eval_seeds", "env_kwargs", "hyperparams"})


@dataclass(frozen=True)
class Headline:
    """The paper's headline metric (``metric``, the win / loss criterion), the other
    metrics reported beside it (``also``) and the target the agent must meet for a win
    (``constraint``). Names are episode metrics (``simulator.metrics``
    flat names, and ``return``: the summed reward, i.e. the agent's training objective) or
    ``tier<k>.<name>`` for priority tier k (``experiments.agents_vs_papers.headline``)."""

    metric: str
    title: str
    source: str
    also: tuple[str, ...] = ()
    constraint: tuple[str, float] | None = None  # (metric, minimum), e.g. Cascadia's quality target

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *self.also)


@dataclass(frozen=True)
class Recipe:
    """How the agent for one paper scenario is trained and what it is compared with.

    ``heuristics``: the paper's best heuristic first, then fall-backs, tried in order (the first
    registered for ``env_id`` is the comparison); ``references``: more heuristics shown beside.
    ``env_kwargs`` (reward included) serve training and evaluation alike; ``agent_env_kwargs``
    (only ``AGENT_ONLY_ENV_KEYS``) set the agent's action interface where the heuristics drive
    another one, e.g. Scaling-v0's exactly masked ``action="one_unit"``. ``timesteps`` is the
    full budget, ``budget_minutes`` its measured wall time on two CPU cores (at most 60)."""

    name: str
    paper: str
    env_id: str
    scenario: str
    algo: str
    timesteps: int
    budget_minutes: float
    n_envs: int
    headline: Headline
    heuristics: tuple[str, ...]
    references: tuple[str, ...] = ()
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    hyperparams: dict[str, Any] = field(default_factory=dict)
    eval_seeds: int = 5
    agent_env_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_env(self) -> dict[str, Any]:
        """The agent's env arguments: ``env_kwargs`` and its ``agent_env_kwargs``."""
        return {**self.env_kwargs, **self.agent_env_kwargs}

    @property
    def reward(self) -> str:
        return str(self.env_kwargs.get("reward", "slo"))

    def overrides(self) -> list[str]:
        """``agents.config.build_config`` overrides for training: hyper-parameters and the agent's
        ``env_kwargs.*`` (values as JSON, which YAML reads)."""
        return [f"{k}={json.dumps(v)}" for k, v in self.hyperparams.items()] + [
            f"env_kwargs.{k}={json.dumps(v)}" for k, v in self.agent_env.items()
        ]


def recipe_names() -> list[str]:
    return sorted(path.stem for path in RECIPES_DIR.glob("*.yml"))


def load_recipe(name: str, quick: bool = False, directory: Path = RECIPES_DIR) -> Recipe:
    """The recipe ``<directory>/<name>.yml``; ``quick`` applies its ``quick`` section (a tiny run for tests)."""
    path = Path(directory) / f"{name}.yml"
    if not path.is_file():
        known = sorted(p.stem for p in Path(directory).glob("*.yml"))
        raise ValueError(f"unknown recipe {name!r}; known: {known}")
    data = load_yaml(path)
    if not isinstance(data, Mapping):
        raise ValueError(f"{path} is not a mapping")
    _check_keys(f"{path}", data, KEYS)
    quick_section = data.get("quick") or {}
    _check_keys(f"{path} quick", quick_section, QUICK_KEYS)
    if quick:
        data = deep_merge({k: v for k, v in data.items() if k != "quick"}, quick_section)
    headline = data.get("headline")
    if not isinstance(headline, Mapping):
        raise ValueError(f"{path} needs a headline mapping with {sorted(HEADLINE_KEYS)}")
    _check_keys(f"{path} headline", headline, HEADLINE_KEYS)
    recipe = Recipe(
        name=name,
        paper=str(_required(path, data, "paper")),
        env_id=str(_required(path, data, "env_id")),
        scenario=str(_required(path, data, "scenario")),
        algo=str(_required(path, data, "algo")),
        timesteps=as_int("timesteps", _required(path, data, "timesteps"), minimum=1),
        budget_minutes=float(_required(path, data, "budget_minutes")),
        n_envs=as_int("n_envs", data.get("n_envs", 2), minimum=1),
        headline=Headline(str(headline["metric"]), str(headline["title"]), str(headline["source"]),
                          tuple(headline.get("also") or ()), _constraint(path, headline)),
        heuristics=tuple(_required(path, data, "heuristics")),
        references=tuple(data.get("references") or ()),
        env_kwargs=dict(data.get("env_kwargs") or {}),
        hyperparams=dict(data.get("hyperparams") or {}),
        eval_seeds=as_int("eval_seeds", data.get("eval_seeds", 5), minimum=2),
        agent_env_kwargs=dict(data.get("agent_env_kwargs") or {}),
    )
    _check_recipe(path, recipe)
    return recipe


def _constraint(path: Path, headline: Mapping[str, Any]) -> tuple[str, float] | None:
    constraint = headline.get("constraint")
    if constraint is None:
        return None
    if not isinstance(constraint, Mapping) or set(constraint) != CONSTRAINT_KEYS:
        raise ValueError(f"{path} headline constraint must be a mapping with exactly {sorted(CONSTRAINT_KEYS)}, "
                         f"got {constraint!r}")
    minimum = constraint["min"]
    if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or not math.isfinite(minimum):
        raise ValueError(f"{path} headline constraint min must be a finite number, got {minimum!r}")
    metric = str(constraint["metric"])
    if metric not in headline.get("also", ()):
        raise ValueError(f"{path} headline constraint metric {metric!r} must be one of the reported 'also' metrics")
    return metric, float(minimum)


def _check_recipe(path: Path, recipe: Recipe) -> None:
    get_algorithm(recipe.algo)
    if recipe.env_id not in envs.ENV_IDS:
        raise ValueError(f"{path}: unknown env {recipe.env_id!r}; known: {sorted(envs.ENV_IDS)}")
    if recipe.scenario not in envs.scenario_names():
        raise ValueError(f"{path}: unknown scenario {recipe.scenario!r}; known: {envs.scenario_names()}")
    if not 0 < recipe.budget_minutes <= 60:
        raise ValueError(f"{path}: budget_minutes must be in (0, 60], got {recipe.budget_minutes!r}")
    if not recipe.heuristics:
        raise ValueError(f"{path}: heuristics must name at least the paper's best heuristic")
    other = sorted(set(recipe.agent_env_kwargs) - AGENT_ONLY_ENV_KEYS)
    if other:
        raise ValueError(f"{path}: agent_env_kwargs may set only {sorted(AGENT_ONLY_ENV_KEYS)} (the agent's action "
                         f"and observation), not {other}: the agent and the heuristics must run the same simulation")


def _required(path: Path, data: Mapping[str, Any], key: str) -> Any:
    if data.get(key) is None:
        raise ValueError(f"{path} does not set {key!r}")
    return data[key]


def _check_keys(where: str, data: Any, known: frozenset[str]) -> None:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a mapping, got {data!r}")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
