"""Metrics computed from ``RequestOutcome`` records: QoE, run summaries, breakdowns and tables."""

from simulator.metrics.breakdown import (BREAKDOWN_KEYS, PhaseSummary, slo_attainment_by_tier, summarize_by,
                                         summarize_phases)
from simulator.metrics.qoe import PASCAL_QOE_VIOLATION_BELOW, QOE_ANCHORS, QoETargets, qoe
from simulator.metrics.slo import meets_slo
from simulator.metrics.stats import LatencyStats
from simulator.metrics.summary import TBT_SLO_METRICS, MetricsSummary, summarize
from simulator.metrics.table import flat_metrics, format_table, to_json_dict
from simulator.metrics.token_curve import max_gap_s, token_time_s, validate_token_curve

__all__ = [
    "BREAKDOWN_KEYS",
    "PASCAL_QOE_VIOLATION_BELOW",
    "QOE_ANCHORS",
    "TBT_SLO_METRICS",
    "LatencyStats",
    "MetricsSummary",
    "PhaseSummary",
    "QoETargets",
    "flat_metrics",
    "format_table",
    "max_gap_s",
    "meets_slo",
    "qoe",
    "slo_attainment_by_tier",
    "summarize",
    "summarize_by",
    "summarize_phases",
    "to_json_dict",
    "token_time_s",
    "validate_token_curve",
]
