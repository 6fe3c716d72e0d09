"""What training and evaluation show on TensorBoard and in PNGs: stable serving-metric tags,
per-tier SLO attainment, custom-scalars layouts (one chart per metric with every policy on
it) and the comparison plots of ``agents.evaluate``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from simulator.metrics import flat_metrics, summarize, summarize_by
from simulator.outcome import RequestOutcome

# Episode-metric names (``ServingEnv.episode_metrics``) logged as ``serving/<name>``.
SERVING_METRICS = (
    "ttft_p50_s",
    "ttft_p99_s",
    "tbt_p99_s",
    "tpot_p50_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "slo_attainment",
    "qoe_violation_rate",
    "goodput_rps",
    "throughput_rps",
    "cost_usd",
    "output_tokens_per_usd",
    "goodput_tokens_per_usd",
    "quality_mean",
)
TIER_PREFIX = "slo_attainment_tier"
# What ``agents.rollout.run_episode`` adds to the env's metrics.
EPISODE_METRICS = ("return", "invalid_actions")


# Episode metrics where less is better (besides every ``*_s`` latency or duration).
LOWER_IS_BETTER = frozenset({"rejected", "preemptions", "migrations", "cost_usd", "qoe_violation_rate", "invalid_actions"})


def episode_metric_names(num_tiers: int) -> list[str]:
    """Every metric an episode reports: ``simulator.metrics`` summary fields (flat names), the
    per-tier attainments and what ``run_episode`` adds."""
    summary = flat_metrics(summarize([]))
    names = [k for k, v in summary.items() if isinstance(v, (int, float))]
    return [*names, *(tier_metric(k) for k in range(num_tiers)), *EPISODE_METRICS, "steps"]


def higher_is_better(name: str) -> bool:
    """Latencies and durations (``*_s``) and ``LOWER_IS_BETTER`` are better low; rates per
    second (``*_per_s``, e.g. ``output_tokens_per_s``) and everything else better high."""
    return name.endswith("_per_s") or not (name.endswith("_s") or name in LOWER_IS_BETTER)


def tier_metric(tier: int) -> str:
    return f"{TIER_PREFIX}{tier}"


def tier_metrics(names: Sequence[str]) -> dict[int, str]:
    """``{tier: name}`` for the per-tier attainment names among ``names``."""
    return {int(name[len(TIER_PREFIX):]): name for name in names if name.startswith(TIER_PREFIX)}


def metric_names(metrics: Mapping[str, float]) -> list[str]:
    """The serving metrics present in ``metrics``, per-tier attainments after them in tier order."""
    tiers = tier_metrics(list(metrics))
    return [k for k in SERVING_METRICS if k in metrics] + [tiers[tier] for tier in sorted(tiers)]


def serving_scalars(metrics: Mapping[str, float], prefix: str = "serving/") -> dict[str, float]:
    """``{prefix + name: value}`` for the serving metrics in ``metrics``; NaN values (a metric
    that does not apply, e.g. QoE without reasoning) are not logged."""
    return {prefix + k: float(metrics[k]) for k in metric_names(metrics) if not math.isnan(metrics[k])}


def tier_slo_attainment(outcomes: Sequence[RequestOutcome], duration_s: float) -> dict[str, float]:
    """``{slo_attainment_tier<k>: attainment}`` for each tier with arrivals, via
    ``simulator.metrics.summarize_by(outcomes, "tier")``."""
    by_tier = summarize_by(outcomes, "tier", duration_s=duration_s)
    return {tier_metric(tier): summary.slo_attainment for tier, summary in sorted(by_tier.items())}


def training_layout(names: Sequence[str] = SERVING_METRICS) -> dict[str, dict[str, list]]:
    """Custom-scalars layout of a training run: the serving metrics of training episodes, and
    one chart per metric with the agent and every baseline of the periodic evaluation."""
    return {
        "serving (training episodes)": {name: ["Multiline", [f"^serving/{name}$"]] for name in names},
        "evaluation: agent vs baselines": {
            name: ["Multiline", [f"^eval/[^/]+/{name}$"]] for name in (*names, *EPISODE_METRICS)
        },
    }


def evaluation_layout(names: Sequence[str] = SERVING_METRICS) -> dict[str, dict[str, list]]:
    """Custom-scalars layout of ``agents.evaluate``: one chart per metric; each policy is a run."""
    return {
        "serving (every policy)": {name: ["Multiline", [f"^serving/{name}$"]] for name in names},
        "episode (every policy)": {name: ["Multiline", [f"^episode/{name}$"]] for name in EPISODE_METRICS},
    }


def plot_ttft_cdf(ttft_s_by_policy: Mapping[str, np.ndarray], path: Path, ttft_slo_s: float | None = None) -> None:
    """Empirical CDF of per-request TTFT (completed requests, every seed), one line per policy."""
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    for policy, ttft_s in ttft_s_by_policy.items():
        values = np.sort(np.asarray(ttft_s, dtype=float))
        if values.size:
            axes.step(values, np.arange(1, values.size + 1) / values.size, where="post", label=policy)
    if ttft_slo_s is not None:
        axes.axvline(ttft_slo_s, color="black", linestyle="--", linewidth=1, label=f"TTFT SLO {ttft_slo_s:g} s")
    if all(np.min(v) > 0 for v in ttft_s_by_policy.values() if len(v)):
        axes.set_xscale("log")
    axes.set_xlabel("TTFT (s)")
    axes.set_ylabel("fraction of completed requests")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.savefig(path, dpi=120)


def plot_tier_bars(attainment: Mapping[str, Mapping[int, tuple[float, float]]], path: Path) -> None:
    """Grouped bars of SLO attainment per priority tier, one bar per policy; error bars are the
    95% confidence half-widths. ``attainment[policy][tier] = (mean, half_width)``."""
    policies = list(attainment)
    tiers = sorted({tier for by_tier in attainment.values() for tier in by_tier})
    figure = Figure(figsize=(max(6.4, 1.2 * len(tiers) * max(len(policies), 1)), 4.2), layout="constrained")
    axes = figure.add_subplot()
    width = 0.8 / max(len(policies), 1)
    for index, policy in enumerate(policies):
        means = [attainment[policy].get(tier, (math.nan, math.nan))[0] for tier in tiers]
        errors = [np.nan_to_num(attainment[policy].get(tier, (math.nan, math.nan))[1]) for tier in tiers]
        axes.bar(np.arange(len(tiers)) + (index - (len(policies) - 1) / 2) * width, means, width, yerr=errors,
                 capsize=3, label=policy)
    axes.set_xticks(np.arange(len(tiers)), [f"tier {tier}" for tier in tiers])
    axes.set_ylabel("SLO attainment")
    axes.set_ylim(0, 1.05)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize="small")
    figure.savefig(path, dpi=120)


def plot_cost_vs_slo(points: Mapping[str, Sequence[tuple[float, float]]], path: Path) -> None:
    """Each episode's (cost, SLO attainment), one colour per policy; the large marker is the mean."""
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    for index, (policy, pairs) in enumerate(points.items()):
        cost_usd, attainment = np.asarray(pairs, dtype=float).reshape(-1, 2).T
        color = f"C{index % 10}"
        axes.scatter(cost_usd, attainment, color=color, alpha=0.5, s=18)
        axes.scatter([np.mean(cost_usd)], [np.mean(attainment)], color=color, s=90, edgecolors="black", label=policy)
    axes.set_xlabel("episode cost (USD)")
    axes.set_ylabel("SLO attainment")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.savefig(path, dpi=120)
