"""agents.dashboard: training and evaluation layouts stay apart (their tag patterns never match
each other's tags), charts exist only for the metrics given, the tiers share one chart."""

from __future__ import annotations

import re

from agents.dashboard import evaluation_layout, iqm_bars_figure, training_layout
from agents.statistics import Interval

METRICS = ["ttft_p99_s", "slo_attainment", "slo_attainment_tier0", "slo_attainment_tier1"]


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


def test_evaluation_charts_put_the_agent_beside_each_heuristic():
    layout = training_layout(METRICS, with_evaluation=True)
    evaluation = layout["train: periodic evaluation, agent vs heuristics (x: env steps)"]
    assert list(evaluation) == [*METRICS, "return", "invalid_actions"]
    for tag in ("eval/agent/slo_attainment", "eval/round_robin/slo_attainment"):
        assert _matches(layout, tag) == ["slo_attainment"]
    assert _matches(layout, "eval/best_slo_attainment") == []


def test_training_and_evaluation_layouts_never_share_a_tag():
    train = training_layout(METRICS, with_evaluation=True)
    compare = evaluation_layout(METRICS)
    assert not set(train) & set(compare)
    for metric in METRICS:
        assert _matches(compare, f"compare/{metric}") == [metric]
        assert _matches(compare, f"serving/{metric}") == [] and _matches(compare, f"eval/agent/{metric}") == []
        assert _matches(train, f"compare/{metric}") == []


def test_iqm_bars_draw_one_bar_per_policy_with_its_interval():
    figure = iqm_bars_figure({"a": Interval(0.5, 0.4, 0.7, 3, 5), "b": Interval(0.9, 0.85, 0.95, 1, 5),
                              "c": Interval(float("nan"), float("nan"), float("nan"), 1, 0)}, "slo_attainment")
    (axes,) = figure.axes
    assert [patch.get_height() for patch in axes.patches] == [0.5, 0.9]  # NaN policy left out
    assert [label.get_text() for label in axes.get_xticklabels()] == ["a", "b"]


def test_per_instance_prefix_cache_metrics_get_one_chart_each():
    from agents.dashboard import metric_names, training_layout

    metrics = {"slo_attainment": 0.9, "prefix_cache_hit_rate": 0.3, "prefix_hit_rate_i1": 0.2, "prefix_hit_rate_i0": 0.4,
               "prefix_cached_blocks_i0": 10.0, "prefix_miss_tokens_i0": 5.0}
    names = metric_names(metrics)
    assert names == ["slo_attainment", "prefix_cache_hit_rate", "prefix_hit_rate_i0", "prefix_hit_rate_i1",
                     "prefix_cached_blocks_i0"]
    serving = training_layout(names, with_evaluation=False)["train: serving metrics of training episodes (x: env steps)"]
    assert serving["prefix_hit_rate per instance"] == ["Multiline", ["^serving/prefix_hit_rate_i\\d+$"]]
    assert "prefix_hit_rate_i0" not in serving and "prefix_cache_hit_rate" in serving
