"""The comparison chart of every evaluation and leaderboard: each policy's IQM with its 95%
interval on one or more metrics (``rliable.plot_utils.plot_interval_estimates``), ranked best
on top, trained agents in warm colours and bold, heuristics in cool ones, the better direction
and the unit in each panel's title, a target (a quality constraint) as a dashed line, and a legend."""

from __future__ import annotations

import io
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from rliable import plot_utils

from agents.statistics import CONFIDENCE, Interval

AGENT_COLORS = ("#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22")
HEURISTIC_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#7f7f7f", "#393b79", "#637939", "#5254a3",
                    "#6b6ecf", "#8c6d31", "#3182bd", "#31a354", "#756bb1", "#636363")
UNITS = (("_per_usd", "tokens/USD"), ("_rps", "requests/s"), ("_usd", "USD"), ("_s", "s"))
FRACTIONS = frozenset({"slo_attainment", "qoe_violation_rate"})


@dataclass(frozen=True)
class Target:
    """A line a policy must reach on ``metric``: ``value`` is a minimum, or a maximum when
    ``at_least`` is False (drawn in that metric's panel; a policy's label says when it misses)."""

    metric: str
    value: float
    at_least: bool = True

    def __str__(self) -> str:
        return f"{self.metric} {'>=' if self.at_least else '<='} {self.value:g}"


def unit(metric: str) -> str:
    """The unit of a metric, read off its name (``_s`` seconds, ``_usd`` dollars, ...); '' when none."""
    base = metric.split(".")[-1]
    if base in FRACTIONS or base.startswith("slo_attainment"):
        return "fraction of requests"
    return next((text for suffix, text in UNITS if base.endswith(suffix)), "")


def panel_title(metric: str, higher_is_better: bool) -> str:
    """``slo_attainment (fraction of requests)`` over ``higher is better ->`` (or ``<- lower``)."""
    name = f"{metric} ({unit(metric)})" if unit(metric) else metric
    return f"{name}\n{'higher is better →' if higher_is_better else '← lower is better'}"


def policy_colors(policies: Sequence[str], agents: Collection[str]) -> dict[str, str]:
    """A distinct colour per policy: agents from ``AGENT_COLORS``, heuristics from ``HEURISTIC_COLORS``."""
    colors, counts = {}, {True: 0, False: 0}
    for policy in policies:
        is_agent = policy in agents
        palette = AGENT_COLORS if is_agent else HEURISTIC_COLORS
        colors[policy] = palette[counts[is_agent] % len(palette)]
        counts[is_agent] += 1
    return colors


def interval_figure(intervals: Mapping[str, Mapping[str, Interval]], metrics: Sequence[str],
                    higher_is_better: Mapping[str, bool], agents: Collection[str] = (),
                    targets: Sequence[Target] = (), missed: Collection[str] = (), title: str = "",
                    note: str = "") -> Figure:
    """Every policy of ``intervals`` (``{policy: {metric: Interval}}``) on each of ``metrics``,
    one panel each, ranked on the first metric (best on top; a policy in ``missed``, missing a
    target, below the rest and labelled so). ``agents`` are highlighted. A policy without a
    value on the first metric is left out. ``note`` goes under the panels."""
    first = metrics[0]
    shown = [p for p in intervals if not math.isnan(intervals[p][first].value)]
    if not shown:
        raise ValueError(f"no policy has a value of {first}")
    sign = 1.0 if higher_is_better[first] else -1.0
    ranked = sorted(shown, key=lambda p: (p not in missed, sign * intervals[p][first].value))  # worst first: bottom
    labels = {p: f"{p}{'  (misses target)' if p in missed else ''}" for p in ranked}
    points = {labels[p]: np.array([intervals[p][m].value for m in metrics]) for p in ranked}
    bounds = {labels[p]: np.array([[intervals[p][m].low for m in metrics],
                                   [intervals[p][m].high for m in metrics]]) for p in ranked}
    colors = {labels[p]: c for p, c in policy_colors(ranked[::-1], agents).items()}
    figure, axes = plot_utils.plot_interval_estimates(
        points, bounds, [panel_title(m, higher_is_better[m]) for m in metrics], algorithms=list(points),
        colors=colors, subfigure_width=4.6, row_height=0.5, xlabel="")
    plt.close(figure)  # rliable made it with pyplot: keep pyplot from holding every figure
    axes = np.atleast_1d(axes)
    scale = plt.rcParams["font.size"] / 10.0
    left_in = 0.3 + 0.085 * scale * max(len(label) for label in points)
    width_in = left_in + 4.4 * len(metrics) + 0.4
    top_in = ((1.2 if title else 0.8) + (0.3 if note else 0.0)) * scale
    narrow = width_in < 10 * scale or len(metrics) == 1
    bottom_in = (0.75 + 0.25 * (len(targets) > 0) if narrow else 0.45) * scale + 0.35 * scale
    figure.set_size_inches(max(width_in, 8.0), top_in + bottom_in + 0.26 * scale * len(ranked) + 0.3)
    for index, (axis, metric) in enumerate(zip(axes, metrics)):
        axis.title.set_fontsize("large")
        axis.tick_params(labelsize="medium")
        _pad_limits(axis, [bounds[label][:, index] for label in bounds] + [[t.value for t in targets if t.metric == metric]])
        axis.scatter([points[label][index] for label in points], np.arange(len(points)), s=36, zorder=3,
                     c=[colors[label] for label in points], edgecolors="black", linewidths=0.6)
        for target in targets:
            if target.metric == metric:
                axis.axvline(target.value, color="black", linestyle="--", linewidth=1.2)
    for text, policy in zip(axes[0].get_yticklabels(), ranked):
        text.set_fontsize("medium")
        if policy in agents:
            text.set_fontweight("bold")
            text.set_color(colors[labels[policy]])
    handles = [Patch(color=AGENT_COLORS[0], alpha=0.75, label="trained agent (bold)"),
               Patch(color=HEURISTIC_COLORS[0], alpha=0.75, label="heuristic"),
               Patch(facecolor="white", edgecolor="black", label=f"bar: {CONFIDENCE:.0%} interval"),
               Line2D([], [], color="black", marker="o", linestyle="", label="dot: IQM")]
    handles += [Line2D([], [], color="black", linestyle="--", label=f"target: {t}") for t in targets]
    height_in = figure.get_figheight()
    figure.legend(handles=handles, loc="lower center", ncol=2 if narrow else 6,
                  fontsize="medium", frameon=False, bbox_to_anchor=(0.5, 0.0))
    if title:
        figure.suptitle(title, fontsize="x-large")
    if note:
        figure.text(0.5, 1 - 0.55 * scale / height_in, note, ha="center", va="top", fontsize="medium", color="#444444")
    figure.subplots_adjust(left=left_in / figure.get_figwidth(), right=0.97, top=1 - top_in / height_in,
                           bottom=bottom_in / height_in, wspace=0.12)
    return figure


def png_bytes(figure: Figure, dpi: int = 110) -> bytes:
    """``figure`` as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()



def _pad_limits(axis: plt.Axes, values: Sequence[Sequence[float]], pad: float = 0.06) -> None:
    """x limits spanning every finite value with ``pad`` of the span on each side, so a point at
    the edge (an attainment of 1) stays visible."""
    finite = [v for group in values for v in group if not math.isnan(v)]
    if not finite:
        return
    low, high = min(finite), max(finite)
    margin = pad * (high - low) if high > low else max(abs(high) * 0.05, 0.01)
    axis.set_xlim(low - margin, high + margin)
