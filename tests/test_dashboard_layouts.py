"""agents.dashboard and agents.interval_plot: the training layout charts only the metrics given,
puts the agent's curve beside each heuristic's reference run, keeps the tiers in one chart; the
comparison chart ranks policies best first, highlights agents, draws targets and says which
direction is better."""

from __future__ import annotations

import math
import re

import pytest

from agents.dashboard import training_layout
from agents.interval_plot import AGENT_COLORS, Target, interval_figure, panel_title, policy_colors, unit
from agents.statistics import Interval

METRICS = ["ttft_p99_s", "slo_attainment", "slo_attainment_tier0", "slo_attainment_tier1"]
EVALUATION = "periodic evaluation on held-out seeds: agent vs heuristics (x: env steps)"
NAN = Interval(math.nan, math.nan, math.nan, 1, 0)


def _matches(layout: dict, tag: str) -> list[str]:
    return [chart for category in layout.values() for chart, (_, regexes) in category.items()
            if any(re.match(regex, tag) for regex in regexes)]


def test_training_layout_charts_the_given_metrics_and_the_tiers_together():
    layout = training_layout(METRICS, with_evaluation=False)
    (serving,) = layout.values()
    assert list(serving) == ["ttft_p99_s", "slo_attainment", "slo_attainment per tier"]
    assert _matches(layout, "serving/slo_attainment_tier1") == ["slo_attainment per tier"]
    assert _matches(layout, "serving/slo_attainment") == ["slo_attainment"]
    assert _matches(layout, "serving/qoe_violation_rate") == []


def test_evaluation_charts_put_the_agent_beside_each_heuristics_reference_run_first():
    layout = training_layout(METRICS, with_evaluation=True)
    assert list(layout)[0] == EVALUATION  # the first category TensorBoard shows
    evaluation = layout[EVALUATION]
    assert list(evaluation) == ["ttft_p99_s (lower is better)", "slo_attainment (higher is better)",
                                "slo_attainment_tier0 (higher is better)", "slo_attainment_tier1 (higher is better)",
                                "return (higher is better)", "invalid_actions (lower is better)"]
    for tag in ("eval/agent/slo_attainment", "eval/reference/slo_attainment"):
        assert _matches({EVALUATION: evaluation}, tag) == ["slo_attainment (higher is better)"]
    # the run's own copies of the heuristics' levels stay out: one line per run, coloured by run
    assert _matches(layout, "eval/round_robin/slo_attainment") == []
    assert _matches(layout, "eval/best_slo_attainment") == []


def test_units_and_directions_are_read_off_metric_names():
    assert [unit(m) for m in ("ttft_p99_s", "cost_usd", "goodput_rps", "output_tokens_per_usd", "slo_attainment",
                              "slo_attainment_tier2", "tier1.e2e_p95_s", "quality_mean")] == [
        "s", "USD", "requests/s", "tokens/USD", "fraction of requests", "fraction of requests", "s", ""]
    assert panel_title("ttft_p99_s", False) == "ttft_p99_s (s)\n← lower is better"
    assert panel_title("quality_mean", True) == "quality_mean\nhigher is better →"


def test_every_policy_gets_its_own_colour_agents_warm():
    colors = policy_colors(["a", "h1", "b", "h2"], agents={"a", "b"})
    assert len(set(colors.values())) == 4
    assert colors["a"] == AGENT_COLORS[0] and colors["b"] == AGENT_COLORS[1]


@pytest.mark.parametrize("higher", [True, False])
def test_interval_figure_ranks_best_on_top_and_leaves_out_policies_without_a_value(higher):
    intervals = {"low": {"m": Interval(0.2, 0.1, 0.3, 1, 5)}, "high": {"m": Interval(0.8, 0.7, 0.9, 3, 5)},
                 "none": {"m": NAN}}
    figure = interval_figure(intervals, ["m"], {"m": higher}, agents={"high"})
    (axes,) = figure.axes
    labels = [text.get_text() for text in axes.get_yticklabels()]  # bottom to top
    assert labels == (["low", "high"] if higher else ["high", "low"])
    bars = sorted(axes.patches, key=lambda bar: bar.get_y())
    assert [(round(bar.get_x(), 6), round(bar.get_width(), 6)) for bar in bars] == (
        [(0.1, 0.2), (0.7, 0.2)] if higher else [(0.7, 0.2), (0.1, 0.2)])  # the intervals
    bold = {text.get_text(): text.get_fontweight() for text in axes.get_yticklabels()}
    assert bold["high"] == "bold" and bold["low"] == "normal"
    assert "higher is better" in axes.get_title() if higher else "lower is better" in axes.get_title()


def test_interval_figure_draws_the_target_and_ranks_a_policy_missing_it_last():
    intervals = {"fast": {"m": Interval(0.9, 0.8, 1.0, 1, 5), "q": Interval(70, 69, 71, 1, 5)},
                 "good": {"m": Interval(0.5, 0.4, 0.6, 1, 5), "q": Interval(75, 74, 76, 1, 5)}}
    figure = interval_figure(intervals, ["m", "q"], {"m": True, "q": True}, targets=[Target("q", 72.0)],
                             missed={"fast"}, title="t")
    first, second = figure.axes[:2]
    assert [text.get_text() for text in first.get_yticklabels()] == ["fast  (misses target)", "good"]
    assert [line.get_xdata()[0] for line in second.get_lines() if line.get_linestyle() == "--"] == [72.0]
    legend_texts = [text.get_text() for text in figure.legends[0].get_texts()]
    assert "target: q >= 72" in legend_texts and "trained agent (bold)" in legend_texts


def test_interval_figure_refuses_when_no_policy_has_the_metric():
    with pytest.raises(ValueError, match="no policy has a value of m"):
        interval_figure({"a": {"m": NAN}}, ["m"], {"m": True})


def test_per_instance_prefix_cache_metrics_get_one_chart_each():
    from agents.dashboard import metric_names, training_layout

    metrics = {"slo_attainment": 0.9, "prefix_cache_hit_rate": 0.3, "prefix_hit_rate_i1": 0.2, "prefix_hit_rate_i0": 0.4,
               "prefix_cached_blocks_i0": 10.0, "prefix_miss_tokens_i0": 5.0}
    names = metric_names(metrics)
    assert names == ["slo_attainment", "prefix_cache_hit_rate", "prefix_hit_rate_i0", "prefix_hit_rate_i1",
                     "prefix_cached_blocks_i0"]
    serving = training_layout(names, with_evaluation=False)["serving metrics of training episodes (x: env steps)"]
    assert serving["prefix_hit_rate per instance"] == ["Multiline", ["^serving/prefix_hit_rate_i\\d+$"]]
    assert "prefix_hit_rate_i0" not in serving and "prefix_cache_hit_rate" in serving
