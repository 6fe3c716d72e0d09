"""The agents-vs-papers report of one scenario: ``report.md`` (per-training-seed numbers, the
IQM of every policy over training seeds x evaluation seeds and the probability-of-improvement
verdicts, rliable), ``results.json`` and ``episodes.csv``."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from agents.config import TrainConfig
from agents.statistics import BOOTSTRAP_REPS, Interval, iqm_by_metric, iqm_value
from agents.train import TrainResult
from agents.headline import better_when_higher
from experiments.agents_vs_papers.headline import Comparison, compare
from experiments.agents_vs_papers.recipe import Recipe
from experiments.agents_vs_papers.runner import AGENT_LABEL, HeuristicChoice

# Claims about agents rest on at least this many training seeds (DESIGN.md).
MIN_TRAINING_SEEDS = 3
Runs = Sequence[Sequence[Mapping[str, float]]]  # runs (training seeds; one for a heuristic) x evaluation seeds


def scores(runs: Runs, metric: str) -> np.ndarray:
    """``runs x evaluation seeds`` values of ``metric``."""
    return np.array([[row[metric] for row in run] for run in runs], dtype=float)


def pick_best(metric: str, results: Mapping[str, Runs], candidates: Sequence[str]) -> str:
    """The candidate with the best IQM of ``metric`` over its episodes (NaN means never win)."""
    if not candidates:
        raise ValueError("no candidate heuristic to pick from")
    sign = 1.0 if better_when_higher(metric) else -1.0

    def score(name: str) -> float:
        value = iqm_value(scores(results[name], metric))
        return -math.inf if math.isnan(value) else sign * value

    return max(candidates, key=score)


def comparisons(recipe: Recipe, results: Mapping[str, Runs], heuristic: str) -> list[Comparison]:
    """Agent vs ``heuristic`` on every headline metric."""
    return [compare(metric, scores(results[AGENT_LABEL], metric), scores(results[heuristic], metric))
            for metric in recipe.headline.metrics]


def reference_comparisons(recipe: Recipe, results: Mapping[str, Runs], heuristic: str | None,
                          references: Sequence[str]) -> list[tuple[str, Comparison]]:
    """Agent vs each reference heuristic (other than the compared one) on the headline metric:
    whether the agent also beats the other registered policies."""
    metric = recipe.headline.metric
    agent = scores(results[AGENT_LABEL], metric)
    return [(name, compare(metric, agent, scores(results[name], metric))) for name in references if name != heuristic]


def headline_verdict(recipe: Recipe, results: Mapping[str, Runs], verdicts: Sequence[Comparison]) -> str:
    """The verdict of the probability of improvement on the headline metric (win: its interval
    above 0.5; loss: below), unless the agent's mean over all its episodes misses the headline's
    constraint: then "loss", whatever the headline metric says. Fewer than
    ``MIN_TRAINING_SEEDS`` training seeds make it provisional."""
    runs = len(results[AGENT_LABEL])
    note = "" if runs >= MIN_TRAINING_SEEDS else (
        f" (provisional: {runs} training seed{'s' if runs > 1 else ''}; a claim needs >= {MIN_TRAINING_SEEDS})")
    constraint = recipe.headline.constraint
    if constraint is not None:
        metric, minimum = constraint
        agent_mean = float(np.nanmean(scores(results[AGENT_LABEL], metric)))
        if not agent_mean >= minimum:
            return f"loss (the agent's mean {metric} {agent_mean:.4g} misses the target >= {minimum:g}){note}"
    return verdicts[0].verdict + note


def write_report(out_dir: Path, recipe: Recipe, choice: HeuristicChoice, results: Mapping[str, Runs],
                 seeds: Sequence[int], trained: Sequence[TrainResult], quick: bool, action_space: spaces.Space,
                 deterministic: bool = True) -> str:
    """Write ``report.md``, ``results.json`` and ``episodes.csv`` into ``out_dir``; return the
    markdown. ``trained`` and ``results[AGENT_LABEL]`` are in training-seed order."""
    if len(trained) != len(results[AGENT_LABEL]):
        raise ValueError(f"{len(trained)} training runs but {len(results[AGENT_LABEL])} evaluated agent runs")
    out_dir.mkdir(parents=True, exist_ok=True)
    heuristic = choice.compared
    if heuristic is None and choice.references:
        heuristic = pick_best(recipe.headline.metric, results, choice.references)
    verdicts = comparisons(recipe, results, heuristic) if heuristic else []
    beside = reference_comparisons(recipe, results, heuristic, choice.references)
    diagnostics = [training_diagnostics(run.run_dir, action_space) for run in trained]
    train_seeds = [_train_seed(run) for run in trained]
    aggregate = {label: dict(zip(recipe.headline.metrics, iqm_by_metric(
        np.stack([scores(runs, m) for m in recipe.headline.metrics], axis=-1)))) for label, runs in results.items()}
    text = _markdown(recipe, choice, heuristic, results, seeds, trained, train_seeds, aggregate, verdicts, quick,
                     diagnostics, beside, deterministic)
    (out_dir / "report.md").write_text(text)
    summary = {
        "scenario": recipe.name, "env_id": recipe.env_id, "algo": recipe.algo, "reward": recipe.reward,
        "eval_mode": "deterministic" if deterministic else "stochastic", "train_seeds": train_seeds,
        "timesteps": [run.num_timesteps for run in trained], "train_wall_s": [run.wall_s for run in trained],
        "run_dirs": [str(run.run_dir) for run in trained], "heuristic": heuristic, "note": choice.note,
        "training": diagnostics, "seeds": list(seeds), "quick": quick,
        "metrics": {label: {m: _interval(i) for m, i in by_metric.items()} for label, by_metric in aggregate.items()},
        "per_training_seed": {str(seed): {m: _mean(run, m) for m in recipe.headline.metrics}
                              for seed, run in zip(train_seeds, results[AGENT_LABEL])},
        "comparisons": [{"metric": c.metric, **_interval(c.probability), "verdict": c.verdict} for c in verdicts],
        "headline_verdict": headline_verdict(recipe, results, verdicts) if verdicts else None,
        "reference_comparisons": [{"reference": name, "metric": c.metric, **_interval(c.probability), "verdict": c.verdict}
                                  for name, c in beside],
    }
    (out_dir / "results.json").write_text(json.dumps(summary, indent=1, allow_nan=True))
    rows = [{"policy": label, "train_seed": train_seeds[index] if label == AGENT_LABEL else "", "seed": seed, **row}
            for label, runs in results.items() for index, run in enumerate(runs) for seed, row in zip(seeds, run)]
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


def _train_seed(run: TrainResult) -> int:
    return TrainConfig.load(Path(run.run_dir) / "config.yml").seed


def _interval(interval: Interval) -> dict[str, Any]:
    return {"value": interval.value, "ci_low": interval.low, "ci_high": interval.high, "runs": interval.runs,
            "tasks": interval.tasks}


def _mean(run: Sequence[Mapping[str, float]], metric: str) -> float:
    values = np.array([row[metric] for row in run], dtype=float)
    return float(np.nanmean(values)) if np.any(~np.isnan(values)) else math.nan


def _markdown(recipe: Recipe, choice: HeuristicChoice, heuristic: str | None, results: Mapping[str, Runs],
              seeds: Sequence[int], trained: Sequence[TrainResult], train_seeds: Sequence[int],
              aggregate: Mapping[str, Mapping[str, Interval]], verdicts: Sequence[Comparison], quick: bool,
              diagnostics: Sequence[str], beside: Sequence[tuple[str, Comparison]], deterministic: bool) -> str:
    headline = recipe.headline
    labels = [AGENT_LABEL, *([heuristic] if heuristic else []), *(r for r in choice.references if r != heuristic)]
    steps = sorted({run.num_timesteps for run in trained})
    wall_min = sum(run.wall_s for run in trained) / 60
    mode = ("deterministic (the agent takes its most likely action)" if deterministic else
            "stochastic (the agent samples its action, seeded by the episode seed)")
    lines = [
        f"# Agent vs the paper's best heuristic: `{recipe.name}`" + (" (quick smoke run)" if quick else ""),
        "",
        f"Paper: {recipe.paper}. Headline metric: **{headline.title}** (`{headline.metric}`, {headline.source}; "
        f"{'higher' if better_when_higher(headline.metric) else 'lower'} is better).",
        "",
        f"**Evaluation mode: {mode}.**",
        "",
        f"- Agent: {recipe.algo} on `{recipe.env_id}`, scenario `{recipe.scenario}`, reward `{recipe.reward}`, "
        f"env overrides `{recipe.env_kwargs}`"
        + (f", for the agent alone `{recipe.agent_env_kwargs}`" if recipe.agent_env_kwargs else "")
        + f"; {len(trained)} training seed{'s' if len(trained) > 1 else ''} ({', '.join(map(str, train_seeds))}), "
        f"{' / '.join(f'{s:,}' for s in steps)} env steps each (recipe budget {recipe.timesteps:,}, about "
        f"{recipe.budget_minutes:g} min on two CPU cores), {wall_min:.1f} min of training in all; final models.",
        f"- Compared with: `{heuristic}` ({choice.note})." if heuristic else f"- Compared with: nothing ({choice.note}).",
        f"- Evaluation seeds {', '.join(map(str, seeds))} (n = {len(seeds)}, held out from training), one episode each, "
        "every policy on the same seeds.",
        "",
        "Per training seed, the agent's mean over the evaluation seeds:",
        "",
        "| training seed | " + " | ".join(headline.metrics) + " |",
        "|---:|" + "---:|" * len(headline.metrics),
    ]
    lines += [f"| {seed} | " + " | ".join(_number(_mean(run, m)) for m in headline.metrics) + " |"
              for seed, run in zip(train_seeds, results[AGENT_LABEL])]
    lines += [
        "",
        f"Aggregate: IQM over training seeds x evaluation seeds [95% stratified-bootstrap interval over both, rliable, "
        f"{BOOTSTRAP_REPS:,} resamples] (Agarwal et al., NeurIPS 2021):",
        "",
        "| metric | " + " | ".join(f"`{label}`" for label in labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    lines += [f"| {metric} | " + " | ".join(str(aggregate[label][metric]) for label in labels) + " |"
              for metric in headline.metrics]
    if verdicts:
        lines += [
            "",
            f"Probability that the agent does better than `{heuristic}` on an evaluation seed [95% interval] "
            "(win: the interval lies above 0.5; loss: below; otherwise tie):",
            "",
            "| metric | P(agent better) | verdict |",
            "|---|---:|---|",
        ]
        lines += [f"| {c.metric} | {c.probability} | {c.verdict} |" for c in verdicts]
        constraint = f" with {headline.constraint[0]} >= {headline.constraint[1]:g}" if headline.constraint else ""
        lines += ["", f"**Headline verdict: {headline_verdict(recipe, results, verdicts)}** on {headline.title}{constraint}."]
    if beside:
        lines += ["", f"Probability that the agent does better than each reference on `{headline.metric}`:", "",
                  "| reference | P(agent better) | verdict |", "|---|---:|---|"]
        lines += [f"| `{name}` | {c.probability} | {c.verdict} |" for name, c in beside]
    lines += ["", "Training, per seed:", ""]
    lines += [f"- seed {seed}: {text}; run `{run.run_dir}`" for seed, text, run in zip(train_seeds, diagnostics, trained)]
    lines += ["", f"TensorBoard: `tensorboard --logdir {Path(trained[0].run_dir).parent}`.", ""]
    return "\n".join(lines)


def _number(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.4g}"
