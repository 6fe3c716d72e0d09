"""A scenario's headline metric and its value in one episode: an episode metric, or
``tier<k>.<name>`` (the ``simulator.metrics`` summary of priority tier k's requests alone).

A paper scenario's headline is the one its agents-vs-papers recipe names
(``agents/recipes/*.yml``, ``headline.metric``, with its ``constraint`` where it has one, e.g.
a quality target); every other scenario's is SLO attainment."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from agents.config import load_yaml
from agents.dashboard import higher_is_better
from simulator.metrics import flat_metrics, summarize_by
from simulator.outcome import RequestOutcome

TIER_METRIC = re.compile(r"tier(\d+)\.(\w+)")
RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
DEFAULT_HEADLINE = "slo_attainment"


def base_metric(name: str) -> str:
    """``tier2.ttft_p99_s`` -> ``ttft_p99_s``; an episode metric's name is its own base."""
    match = TIER_METRIC.fullmatch(name)
    return match[2] if match else name


def better_when_higher(name: str) -> bool:
    """Whether a larger value of ``name`` is better (``agents.dashboard.higher_is_better`` of its base)."""
    return higher_is_better(base_metric(name))


def headline_values(names: Sequence[str], episode: Mapping[str, float], outcomes: Sequence[RequestOutcome],
                    duration_s: float) -> dict[str, float]:
    """Each named metric of one episode: an episode metric (``agents.rollout.run_episode``'s
    dict) or ``tier<k>.<name>``, the ``simulator.metrics`` summary of tier k's requests alone
    (NaN when tier k had no request)."""
    by_tier = None
    values = {}
    for name in names:
        match = TIER_METRIC.fullmatch(name)
        if match is None:
            if name not in episode:
                raise ValueError(f"unknown headline metric {name!r}; known: {sorted(episode)} or tier<k>.<one of them>")
            values[name] = float(episode[name])
            continue
        if by_tier is None:
            summaries = summarize_by(outcomes, "tier", duration_s=duration_s)
            by_tier = {tier: flat_metrics(summary) for tier, summary in summaries.items()}
        tier, metric = int(match[1]), match[2]
        summary = by_tier.get(tier)
        if summary is not None and metric not in summary:
            raise ValueError(f"unknown per-tier metric {metric!r} in {name!r}; known: {sorted(summary)}")
        values[name] = float(summary[metric]) if summary is not None else math.nan
    return values


def scenario_headline(scenario: str, env_id: str, recipes_dir: Path = RECIPES_DIR) -> tuple[str, tuple[str, float] | None]:
    """The headline metric of the recipe for ``scenario`` on ``env_id`` and its constraint
    (``(metric, minimum)``, e.g. Cascadia's quality target, or None); ``DEFAULT_HEADLINE`` and
    no constraint for a scenario without a recipe."""
    for path in sorted(Path(recipes_dir).glob("*.yml")):
        recipe = load_yaml(path)
        if recipe.get("scenario") == scenario and recipe.get("env_id") == env_id:
            return recipe_headline(recipe)
    return DEFAULT_HEADLINE, None


def recipe_headline(recipe: Mapping) -> tuple[str, tuple[str, float] | None]:
    """A parsed recipe's headline metric and constraint (see ``scenario_headline``)."""
    headline = recipe["headline"]
    constraint = headline.get("constraint")
    return str(headline["metric"]), (str(constraint["metric"]), float(constraint["min"])) if constraint else None
