"""docs/validation.md and its figure: every real point predicted vs measured, and the goals.

Rows are simulated under their engine's profile and, for comparison, under ``vidur-2024``
(servegym's behaviour before engine profiles). A point's error is ``simulated / measured - 1``
for each metric it is judged on (``fit.compared_metrics``). Summaries are per engine profile and
role (``split``): mean and median absolute error and the worst case.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.validation.cases import V06_ENGINE, V1_ENGINE, Case
from experiments.validation.fit import compared_metrics
from experiments.validation.simulate import Simulated, simulate
from experiments.validation.split import HELD_OUT, OTHER_ENGINE, TRAIN, role
from hardware.engines import get_engine

OLD_DEFAULT = "vidur-2024"
METRIC_LABELS = {"ttft_mean_ms": "TTFT mean (ms)", "tpot_mean_ms": "TPOT mean (ms)", "e2e_mean_ms": "E2E mean (ms)",
                 "request_throughput_rps": "throughput (req/s)"}


@dataclass(frozen=True)
class Row:
    """One point, one metric."""

    case: Case
    role: str
    metric: str
    measured: float
    simulated: float
    old_default: float

    @property
    def error(self) -> float:
        return self.simulated / self.measured - 1.0

    @property
    def old_error(self) -> float:
        return self.old_default / self.measured - 1.0


def evaluate(cases: Iterable[Case], progress=None) -> list[Row]:
    """Simulate every case under its engine and under the old default; one row per judged metric."""
    rows = []
    for case in cases:
        current: Simulated = simulate(case)
        old: Simulated = simulate(case, get_engine(OLD_DEFAULT))
        for metric in compared_metrics(case):
            rows.append(Row(case, role(case), metric, getattr(case.point, metric), getattr(current, metric),
                            getattr(old, metric)))
        if progress is not None:
            progress(case)
    return rows


@dataclass(frozen=True)
class Summary:
    engine: str
    role: str
    metric: str
    points: int
    mean_abs: float
    median_abs: float
    worst: float
    old_median_abs: float


def summarize(rows: list[Row]) -> list[Summary]:
    out = []
    groups = sorted({(r.case.engine if r.role != OTHER_ENGINE else "other engines", r.role, r.metric) for r in rows})
    for engine, group_role, metric in groups:
        chosen = [r for r in rows if r.role == group_role and r.metric == metric
                  and (group_role == OTHER_ENGINE or r.case.engine == engine)]
        errors = np.abs([r.error for r in chosen])
        old = np.abs([r.old_error for r in chosen])
        out.append(Summary(engine, group_role, metric, len(chosen), float(errors.mean()), float(np.median(errors)),
                           float(errors.max()), float(np.median(old))))
    return out


def _fmt_error(value: float) -> str:
    return f"{value:+.1%}" if math.isfinite(value) else "-"


def summary_table(summaries: list[Summary]) -> str:
    lines = ["| engine | role | metric | points | mean abs. error | median abs. error | worst | median, vidur-2024 |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        lines.append(f"| {s.engine} | {s.role} | {METRIC_LABELS[s.metric]} | {s.points} | {s.mean_abs:.1%} | "
                     f"{s.median_abs:.1%} | {s.worst:.1%} | {s.old_median_abs:.1%} |")
    return "\n".join(lines)


def points_table(rows: list[Row]) -> str:
    lines = ["| point | source | role | engine | GPU x TP (x DP) | model | metric | measured | simulated | error | "
             "vidur-2024 error |", "|---|---|---|---|---|---|---|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r.role, r.case.point.source, r.case.point.point_id, r.metric)):
        point, case = r.case.point, r.case
        shape = f"{point.gpu_catalog} x {case.config.tp}" + (f" x {case.replicas}" if case.replicas > 1 else "")
        lines.append(f"| `{point.point_id}` | {point.source} | {r.role} | {case.engine} | {shape} | {point.model_catalog} | "
                     f"{METRIC_LABELS[r.metric]} | {r.measured:.4g} | {r.simulated:.4g} | {_fmt_error(r.error)} | "
                     f"{_fmt_error(r.old_error)} |")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    """Predicted against measured per metric, log-log, train / held-out / other engine marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullLocator

    metrics = list(METRIC_LABELS)
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4.4))
    styles = {TRAIN: ("tab:blue", "o"), HELD_OUT: ("tab:orange", "s"), OTHER_ENGINE: ("tab:gray", "^")}
    for axis, metric in zip(axes, metrics):
        for group, (color, marker) in styles.items():
            chosen = [r for r in rows if r.metric == metric and r.role == group]
            if chosen:
                axis.scatter([r.measured for r in chosen], [r.simulated for r in chosen], c=color, marker=marker,
                             s=26, label=f"{group} ({len(chosen)})", alpha=0.85, edgecolors="none")
        values = [v for r in rows if r.metric == metric for v in (r.measured, r.simulated)]
        if values:
            low, high = min(values) / 1.5, max(values) * 1.5
            line = np.array([low, high])
            axis.plot(line, line, color="black", linewidth=0.8)
            axis.fill_between(line, line / 1.2, line * 1.2, color="black", alpha=0.07, label="within 20 %")
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_xlim(low, high)
            axis.set_ylim(low, high)
            for scale in (axis.xaxis, axis.yaxis):
                scale.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
                scale.set_major_formatter(FormatStrFormatter("%g"))
                scale.set_minor_locator(NullLocator())
        axis.set_title(METRIC_LABELS[metric])
        axis.set_xlabel("measured")
        axis.set_ylabel("simulated")
        axis.legend(fontsize=7, loc="upper left")
    figure.suptitle("servegym vs real serving runs (one marker per point)")
    figure.tight_layout()
    figure.savefig(path, dpi=130)
    plt.close(figure)


def goal_lines(rows: list[Row]) -> list[str]:
    """The issue's goals on held-out points of the engine's own version (vllm-v1)."""
    held = [r for r in rows if r.role == HELD_OUT and r.case.engine == V1_ENGINE]
    e2e = np.abs([r.error for r in held if r.metric == "e2e_mean_ms"])
    ttft = np.abs([r.error for r in held if r.metric == "ttft_mean_ms"])
    throughput = np.abs([r.error for r in held if r.metric == "request_throughput_rps"])
    lines = []
    if len(e2e):
        lines.append(f"- E2E mean, held-out {V1_ENGINE} points: median error {np.median(e2e):.1%} (goal <= 7 %), "
                     f"worst {e2e.max():.1%} (goal <= 20 %), {len(e2e)} points.")
    if len(ttft):
        lines.append(f"- TTFT mean, held-out {V1_ENGINE} points: median error {np.median(ttft):.1%}, mean "
                     f"{ttft.mean():.1%} (goal <= 25 %), {len(ttft)} points.")
    if len(throughput):
        lines.append(f"- Throughput at saturation, held-out {V1_ENGINE} points: median error {np.median(throughput):.1%}, "
                     f"worst {throughput.max():.1%} (goal within 10 %), {len(throughput)} points.")
    v06 = [r for r in rows if r.case.engine == V06_ENGINE and r.metric == "e2e_mean_ms"]
    if v06:
        errors = np.abs([r.error for r in v06])
        lines.append(f"- E2E mean, {V06_ENGINE} (not fitted; LambdaLabs vLLM 0.6.0): median error "
                     f"{np.median(errors):.1%}, worst {errors.max():.1%}, {len(v06)} points.")
    return lines
