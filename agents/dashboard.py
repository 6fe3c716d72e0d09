"""What training and evaluation show on TensorBoard and in PNGs: stable serving-metric tags,
per-tier SLO attainment, the training run's custom-scalars layout (one chart per metric the
scenario has) and the episode plots of ``agents.evaluate`` (the interval charts are
``agents.interval_plot``'s)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from agents.interval_plot import policy_colors
from simulator.metrics import flat_metrics, slo_attainment_by_tier, summarize
from simulator.metrics.prefix_cache import INSTANCE_SUFFIX
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
    "prefix_cache_hit_rate",
    "prefix_cache_gpu_hit_rate",
    "prefix_cache_cached_blocks",
)
TIER_PREFIX = "slo_attainment_tier"
# Per-instance prefix-cache metrics (``simulator.metrics.prefix_cache``), one chart each for all instances.
INSTANCE_CACHE_METRICS = ("prefix_hit_rate", "prefix_cached_blocks")
# What ``agents.rollout.run_episode`` adds to the env's metrics.
EPISODE_METRICS = ("return", "invalid_actions")
# The comparison chart's panels besides the headline metric, where the scenario has them.
KEY_METRICS = ("slo_attainment", "ttft_p99_s", "e2e_p99_s", "goodput_rps", "cost_usd", "quality_mean")
# The label of the heuristics' reference lines in the training layout (``eval/reference/<metric>``).
REFERENCE_LABEL = "reference"
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


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


def instance_cache_metrics(names: Sequence[str]) -> list[str]:
    """The per-instance prefix-cache metrics among ``names`` (``INSTANCE_CACHE_METRICS`` of each
    instance), by metric then instance id."""
    found = []
    for metric in INSTANCE_CACHE_METRICS:
        head = metric + INSTANCE_SUFFIX
        ids = sorted(int(name[len(head):]) for name in names if name.startswith(head) and name[len(head):].isdigit())
        found += [f"{head}{i}" for i in ids]
    return found


def metric_names(metrics: Mapping[str, float]) -> list[str]:
    """The serving metrics present in ``metrics``, per-tier attainments after them in tier order,
    then the per-instance prefix-cache metrics."""
    names = list(metrics)
    tiers = tier_metrics(names)
    return ([k for k in SERVING_METRICS if k in metrics] + [tiers[tier] for tier in sorted(tiers)]
            + instance_cache_metrics(names))


def serving_scalars(metrics: Mapping[str, float], prefix: str = "serving/") -> dict[str, float]:
    """``{prefix + name: value}`` for the serving metrics in ``metrics``; NaN values (a metric
    that does not apply, e.g. QoE without reasoning) are not logged."""
    return {prefix + k: float(metrics[k]) for k in metric_names(metrics) if not math.isnan(metrics[k])}


def tier_slo_attainment(outcomes: Sequence[RequestOutcome]) -> dict[str, float]:
    """``{slo_attainment_tier<k>: attainment}`` for each tier with arrivals, via
    ``simulator.metrics.slo_attainment_by_tier`` (``summarize_by(outcomes, "tier")``'s attainments)."""
    return {tier_metric(tier): attainment for tier, attainment in sorted(slo_attainment_by_tier(outcomes).items())}


def training_layout(metrics: Sequence[str], with_evaluation: bool) -> dict[str, dict[str, list]]:
    """Custom-scalars layout of a training run, for the serving ``metrics`` its episodes report
    (no empty chart for a metric the scenario lacks): the serving metrics of training episodes,
    the per-tier attainments together in one chart, and with periodic evaluation one chart per
    metric (and return, invalid actions) with the agent's learning curve (``eval/agent/<metric>``
    of the run) and each heuristic's level as a reference line: ``eval/reference/<metric>`` of
    the run ``reference_lines/<heuristic>`` (one run each, so each line has its colour and the
    run list names it)."""
    tiers = tier_metrics(metrics)
    per_instance = set(instance_cache_metrics(metrics))
    serving = {name: ["Multiline", [f"^serving/{name}$"]] for name in metrics
               if name not in tiers.values() and name not in per_instance}
    if tiers:
        serving["slo_attainment per tier"] = ["Multiline", [f"^serving/{TIER_PREFIX}\\d+$"]]
    for metric in INSTANCE_CACHE_METRICS:
        if any(name.startswith(metric + INSTANCE_SUFFIX) for name in per_instance):
            serving[f"{metric} per instance"] = ["Multiline", [f"^serving/{metric}{INSTANCE_SUFFIX}\\d+$"]]
    layout = {}
    if with_evaluation:
        layout["periodic evaluation on held-out seeds: agent vs heuristics (x: env steps)"] = {
            f"{name} ({'higher' if higher_is_better(name) else 'lower'} is better)":
                ["Multiline", [f"^eval/(agent|{REFERENCE_LABEL})/{name}$"]] for name in (*metrics, *EPISODE_METRICS)}
    layout["serving metrics of training episodes (x: env steps)"] = serving
    return layout


def plot_ttft_cdf(ttft_s_by_policy: Mapping[str, np.ndarray], path: Path, ttft_slo_s: float | None = None,
                  agents: Collection[str] = ()) -> None:
    """Empirical CDF of per-request TTFT (completed requests, every seed), one line per policy
    (agents in warm colours; line styles differ, so identical policies' lines both show)."""
    figure = Figure(figsize=(9.0, 4.8), layout="constrained")
    axes = figure.add_subplot()
    colors = policy_colors(list(ttft_s_by_policy), agents)
    for index, (policy, ttft_s) in enumerate(ttft_s_by_policy.items()):
        values = np.sort(np.asarray(ttft_s, dtype=float))
        if values.size:
            axes.step(values, np.arange(1, values.size + 1) / values.size, where="post", label=policy,
                      color=colors[policy], linestyle=LINE_STYLES[index % len(LINE_STYLES)],
                      linewidth=2.2 if policy in agents else 1.5)
    if ttft_slo_s is not None:
        axes.axvline(ttft_slo_s, color="black", linestyle="--", linewidth=1, label=f"TTFT SLO {ttft_slo_s:g} s")
    if all(np.min(v) > 0 for v in ttft_s_by_policy.values() if len(v)):
        axes.set_xscale("log")
    axes.set_title("Time to first token of every completed request (further left and steeper is better)")
    axes.set_xlabel("TTFT (s)")
    axes.set_ylabel("fraction of completed requests")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    figure.savefig(path, dpi=120)


def plot_cost_vs_slo(points: Mapping[str, Sequence[tuple[float, float]]], path: Path, agents: Collection[str] = ()) -> None:
    """Each episode's (cost, SLO attainment), one colour and marker per policy; the large marker
    is the mean (marker shapes differ, so identical policies' points both show)."""
    figure = Figure(figsize=(9.0, 4.8), layout="constrained")
    axes = figure.add_subplot()
    colors = policy_colors(list(points), agents)
    for index, (policy, pairs) in enumerate(points.items()):
        cost_usd, attainment = np.asarray(pairs, dtype=float).reshape(-1, 2).T
        marker = MARKERS[index % len(MARKERS)]
        axes.scatter(cost_usd, attainment, color=colors[policy], marker=marker, alpha=0.45, s=20)
        axes.scatter([np.mean(cost_usd)], [np.mean(attainment)], color=colors[policy], marker=marker,
                     s=150 if policy in agents else 100, edgecolors="black", label=policy)
    axes.set_title("Cost and SLO attainment of each episode (large marker: the mean; up and left is better)")
    axes.set_xlabel("episode GPU cost (USD)")
    axes.set_ylabel("SLO attainment (fraction of requests)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    figure.savefig(path, dpi=120)
