"""The agents-vs-papers report of one scenario: ``report.md`` (headline table with 95% CIs and
the paired verdicts), ``results.json`` and ``episodes.csv``."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gymnasium import spaces

from agents.evaluate import mean_ci
from agents.train import TrainResult
from experiments.agents_vs_papers.headline import Comparison, better_when_higher, compare
from experiments.agents_vs_papers.recipe import Recipe
from experiments.agents_vs_papers.runner import AGENT_LABEL, HeuristicChoice


def pick_best(metric: str, results: Mapping[str, Sequence[Mapping[str, float]]], candidates: Sequence[str]) -> str:
    """The candidate with the best mean ``metric`` over its episodes (NaN means never win)."""
    if not candidates:
        raise ValueError("no candidate heuristic to pick from")
    sign = 1.0 if better_when_higher(metric) else -1.0

    def score(name: str) -> float:
        mean = mean_ci([row[metric] for row in results[name]])[0]
        return -math.inf if math.isnan(mean) else sign * mean

    return max(candidates, key=score)


def comparisons(recipe: Recipe, results: Mapping[str, Sequence[Mapping[str, float]]], heuristic: str) -> list[Comparison]:
    """Agent vs ``heuristic`` on every headline metric, paired by seed."""
    return [compare(metric, [r[metric] for r in results[AGENT_LABEL]], [r[metric] for r in results[heuristic]])
            for metric in recipe.headline.metrics]


def reference_comparisons(recipe: Recipe, results: Mapping[str, Sequence[Mapping[str, float]]], heuristic: str | None,
                          references: Sequence[str]) -> list[tuple[str, Comparison]]:
    """Agent vs each reference heuristic (other than the compared one) on the headline metric,
    paired by seed: whether the agent also beats the other registered policies."""
    metric = recipe.headline.metric
    agent = [r[metric] for r in results[AGENT_LABEL]]
    return [(name, compare(metric, agent, [r[metric] for r in results[name]])) for name in references if name != heuristic]


def headline_verdict(recipe: Recipe, results: Mapping[str, Sequence[Mapping[str, float]]],
                     verdicts: Sequence[Comparison]) -> str:
    """The paired verdict on the headline metric, unless the agent misses the headline's
    constraint on average: then "loss", whatever the headline metric says."""
    constraint = recipe.headline.constraint
    if constraint is not None:
        metric, minimum = constraint
        agent_mean = mean_ci([row[metric] for row in results[AGENT_LABEL]])[0]
        if not agent_mean >= minimum:
            return f"loss (the agent's mean {metric} {agent_mean:.4g} misses the target >= {minimum:g})"
    return verdicts[0].verdict


def write_report(out_dir: Path, recipe: Recipe, choice: HeuristicChoice, results: Mapping[str, Sequence[Mapping[str, float]]],
                 seeds: Sequence[int], trained: TrainResult, quick: bool, action_space: spaces.Space) -> str:
    """Write ``report.md``, ``results.json`` and ``episodes.csv`` into ``out_dir``; return the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    heuristic = choice.compared
    if heuristic is None and choice.references:
        heuristic = pick_best(recipe.headline.metric, results, choice.references)
    verdicts = comparisons(recipe, results, heuristic) if heuristic else []
    beside = reference_comparisons(recipe, results, heuristic, choice.references)
    diagnostics = training_diagnostics(trained.run_dir, action_space)
    text = _markdown(recipe, choice, heuristic, results, seeds, trained, verdicts, quick, diagnostics, beside)
    (out_dir / "report.md").write_text(text)
    summary = {
        "scenario": recipe.name, "env_id": recipe.env_id, "algo": recipe.algo, "reward": recipe.reward,
        "timesteps": trained.num_timesteps, "train_wall_s": trained.wall_s, "run_dir": str(trained.run_dir),
        "heuristic": heuristic, "note": choice.note, "training": diagnostics, "seeds": list(seeds), "quick": quick,
        "metrics": {label: {m: _stats(rows, m) for m in recipe.headline.metrics} for label, rows in results.items()},
        "comparisons": [{"metric": c.metric, "mean_difference": c.mean_difference, "ci95": c.half_width, "n": c.n,
                         "verdict": c.verdict} for c in verdicts],
        "headline_verdict": headline_verdict(recipe, results, verdicts) if verdicts else None,
        "reference_comparisons": [{"reference": name, "metric": c.metric, "mean_difference": c.mean_difference,
                                   "ci95": c.half_width, "n": c.n, "verdict": c.verdict} for name, c in beside],
    }
    (out_dir / "results.json").write_text(json.dumps(summary, indent=1, allow_nan=True))
    rows = [{"policy": label, "seed": seed, **row} for label, episodes in results.items() for seed, row in zip(seeds, episodes)]
    with open(out_dir / "episodes.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for row in rows for k in row)), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return text


def training_diagnostics(run_dir: Path, action_space: spaces.Space) -> str:
    """What the training curve says: the first and last ``rollout/ep_rew_mean`` and the final
    policy entropy (``-train/entropy_loss``) against the uniform policy's (ln n per action
    dimension): a policy still near uniform has learnt little, and its deterministic argmax
    then follows small logit differences, often sending every decision the same way."""
    with open(Path(run_dir) / "progress.csv") as handle:
        rows = list(csv.DictReader(handle))
    returns = [float(r["rollout/ep_rew_mean"]) for r in rows if r.get("rollout/ep_rew_mean")]
    parts = []
    if returns:
        parts.append(f"mean training-episode return {returns[0]:.4g} at the first log, {returns[-1]:.4g} at the last")
    if isinstance(action_space, spaces.Box):
        stds = [float(r["train/std"]) for r in rows if r.get("train/std")]
        if stds:
            width = float((action_space.high - action_space.low).mean())
            parts.append(f"final Gaussian std {stds[-1]:.3g} (mean over action dimensions), "
                         f"{stds[-1] / width:.1%} of the action range")
        return "; ".join(parts) if parts else "no training log"
    entropies = [-float(r["train/entropy_loss"]) for r in rows if r.get("train/entropy_loss")]
    sizes = [action_space.n] if isinstance(action_space, spaces.Discrete) else list(action_space.nvec)
    uniform = float(sum(math.log(n) for n in sizes))
    if entropies:
        parts.append(f"final policy entropy {entropies[-1]:.3g} nats, {entropies[-1] / uniform:.0%} of the uniform "
                     f"policy's {uniform:.3g} (masked actions aside)")
    return "; ".join(parts) if parts else "no training log"


def _stats(rows: Sequence[Mapping[str, float]], metric: str) -> dict[str, Any]:
    mean, half_width, n = mean_ci([row[metric] for row in rows])
    return {"mean": mean, "ci95": half_width, "n": n}


def _cell(rows: Sequence[Mapping[str, float]], metric: str) -> str:
    mean, half_width, _ = mean_ci([row[metric] for row in rows])
    if math.isnan(mean):
        return "–"
    return f"{mean:.4g}" if math.isnan(half_width) else f"{mean:.4g} ± {half_width:.2g}"


def _markdown(recipe: Recipe, choice: HeuristicChoice, heuristic: str | None, results, seeds, trained: TrainResult,
              verdicts: Sequence[Comparison], quick: bool, diagnostics: str,
              beside: Sequence[tuple[str, Comparison]] = ()) -> str:
    headline = recipe.headline
    labels = [AGENT_LABEL, *([heuristic] if heuristic else []), *(r for r in choice.references if r != heuristic)]
    lines = [
        f"# Agent vs the paper's best heuristic: `{recipe.name}`" + (" (quick smoke run)" if quick else ""),
        "",
        f"Paper: {recipe.paper}. Headline metric: **{headline.title}** (`{headline.metric}`, {headline.source}; "
        f"{'higher' if better_when_higher(headline.metric) else 'lower'} is better).",
        "",
        f"- Agent: {recipe.algo} on `{recipe.env_id}`, scenario `{recipe.scenario}`, reward `{recipe.reward}`, "
        f"env overrides `{recipe.env_kwargs}`"
        + (f", for the agent alone `{recipe.agent_env_kwargs}`" if recipe.agent_env_kwargs else "")
        + f"; trained {trained.num_timesteps:,} env steps "
        f"(recipe budget {recipe.timesteps:,}, about {recipe.budget_minutes:g} min on two CPU cores) in "
        f"{trained.wall_s / 60:.1f} min ({trained.steps_per_s:.0f} steps/s); final model, deterministic actions.",
        f"- Compared with: `{heuristic}` ({choice.note})." if heuristic else f"- Compared with: nothing ({choice.note}).",
        f"- Seeds {', '.join(map(str, seeds))} (n = {len(seeds)}, held out from training), one episode each, every "
        "policy on the same seeds; ± is the 95% confidence half-width (Student t, n − 1 degrees of freedom).",
        "",
        "| metric | " + " | ".join(f"`{label}`" for label in labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    lines += [f"| {metric} | " + " | ".join(_cell(results[label], metric) for label in labels) + " |"
              for metric in headline.metrics]
    if verdicts:
        lines += [
            "",
            f"Agent − `{heuristic}`, paired by seed (win / loss: the 95% interval of the difference excludes 0 on the "
            "better / worse side; otherwise tie):",
            "",
            "| metric | agent − heuristic | verdict |",
            "|---|---:|---|",
        ]
        lines += [f"| {c.metric} | {c.mean_difference:+.4g} ± {c.half_width:.2g} | {c.verdict} |" for c in verdicts]
        lines += ["", f"**Headline verdict: {headline_verdict(recipe, results, verdicts)}** on {headline.title}."]
    if beside:
        lines += ["", f"Agent − each reference on `{headline.metric}`, paired by seed:", "",
                  "| reference | agent − reference | verdict |", "|---|---:|---|"]
        lines += [f"| `{name}` | {c.mean_difference:+.4g} ± {c.half_width:.2g} | {c.verdict} |" for name, c in beside]
    lines += ["", f"Training: {diagnostics}."]
    lines += ["", f"Training run (TensorBoard: `tensorboard --logdir {trained.run_dir}`): `{trained.run_dir}`.", ""]
    return "\n".join(lines)
