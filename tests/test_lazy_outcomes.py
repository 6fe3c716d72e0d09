"""Columnar outcomes (simulator.metrics.columns.LazyOutcomes, simulator.compiled.collect_columns):
the columns read from the compiled engine equal those read from the outcome objects, field by
field; summaries from either are identical; the objects are built only when read, once, equal to
an eager run's; per-tier attainment equals summarize_by's."""

from __future__ import annotations

import copy
import math
import pickle
from dataclasses import fields

import numpy as np
import pytest

from envs.presets import make_scenario
from simulator.metrics import slo_attainment_by_tier, summarize, summarize_by
from simulator.metrics.columns import LazyOutcomes, OutcomeColumns, outcome_columns
from simulator.outcome import RequestOutcome
from simulator.request import SLO

CASES = {
    "default": {},
    "multitier": {},  # three tiers, each its SLO
    "pascal": {},  # reasoning: first answer tokens after the first tokens
    "azure_code rejections": {"scenario": "multitier", "lengths": "azure_code", "rate_rps": 40.0},  # context rejects
    "mooncake": {},  # prefix caching over a trace's block hashes
}
# Migrations and preemptions: test_migration_vector_env.py compares the columns of its episodes
# with the objects' (tests/vector_checks.assert_same_outcomes; test_kv_refusals_match preempts).


def _cluster(case: str, requests_count: int = 300):
    options = dict(CASES[case])
    scenario = make_scenario(options.pop("scenario", case), episode_requests=requests_count, **options)
    cluster = scenario.build_cluster(backend="compiled")
    cluster.submit(scenario.requests(np.random.default_rng(7)))
    return cluster


def assert_same_columns(got: OutcomeColumns, want: OutcomeColumns) -> None:
    for field in fields(OutcomeColumns):
        a, b = getattr(got, field.name), getattr(want, field.name)
        assert a.dtype == b.dtype and a.shape == b.shape, field.name
        if b.dtype.kind == "f":
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a.tolist() == b.tolist(), field.name


@pytest.mark.parametrize("case", list(CASES))
def test_engine_columns_equal_the_objects_columns_and_summaries_match(case: str) -> None:
    eager = _cluster(case)
    expected = eager.run()
    cluster = _cluster(case)
    cluster.engine.run()
    cluster.collect_columns()
    lazy = cluster.outcomes
    assert isinstance(lazy, LazyOutcomes) and repr(lazy) == f"LazyOutcomes({len(expected)} outcomes, not built)"
    assert_same_columns(lazy.columns, OutcomeColumns.from_outcomes(expected))
    assert cluster.events.now_s == eager.events.now_s and cluster.arrived == eager.arrived
    kwargs = {"duration_s": eager.events.now_s, "cost_usd": eager.cost_usd()}
    assert repr(summarize(lazy, **kwargs)) == repr(summarize(expected, **kwargs))  # NaN fields: by repr
    assert repr(summarize_by(lazy, "tier")) == repr(summarize_by(expected, "tier"))
    assert "not built" in repr(lazy)  # summaries without QoE read the columns only
    if case == "pascal":  # per-tier QoE reads each tier's outcome objects (their token curves): built now
        qoe = make_scenario("pascal").qoe
        by_tier = summarize_by(lazy, "tier", qoe_targets=qoe)
        assert repr(by_tier) == repr(summarize_by(expected, "tier", qoe_targets=qoe))
        assert not math.isnan(by_tier[0].qoe_mean) and "not built" not in repr(lazy)
    assert list(map(repr, lazy)) == list(map(repr, expected))  # NaN fields: by repr
    assert repr(lazy) == f"LazyOutcomes({len(expected)} outcomes, built)"


def test_some_outcomes_collected_before_the_end_keep_their_objects() -> None:
    cluster = _cluster("default")
    cluster.advance(until_s=5.0)
    early = list(cluster.outcomes)
    assert 0 < len(early) < 300
    cluster.engine.run()
    cluster.collect_columns()
    lazy = cluster.outcomes
    assert isinstance(lazy, LazyOutcomes) and len(lazy) == 300
    assert all(a is b for a, b in zip(lazy[:len(early)], early))  # built once, kept
    assert_same_columns(lazy.columns, OutcomeColumns.from_outcomes(list(lazy)))


def _outcome(request_id: int, tier: int, slo: SLO, *, finish_s: float = 2.0, rejected: str | None = None
             ) -> RequestOutcome:
    return RequestOutcome(request_id, tier, 0, 0.0, 10, 5, 0, 0.1, 0.5, 0.5, math.nan, finish_s, 0.4, 0.0, 0, 0, (),
                          slo, rejected_reason=rejected)


def _lazy(outcomes: list[RequestOutcome], calls: list[int]) -> LazyOutcomes:
    def build() -> list[RequestOutcome]:
        calls.append(1)
        return list(outcomes)
    return LazyOutcomes(OutcomeColumns.from_outcomes(outcomes), build)


def test_lazy_outcomes_build_once_on_first_read_and_share_on_deepcopy() -> None:
    slo = SLO(ttft_s=1.0)
    outcomes = [_outcome(i, i % 2, slo) for i in range(4)]
    calls: list[int] = []
    lazy = _lazy(outcomes, calls)
    assert len(lazy) == 4 and outcome_columns(lazy) is lazy.columns and calls == []
    assert copy.deepcopy({"o": lazy})["o"] is lazy and calls == []
    subset = lazy.take(np.array([3, 1]))
    assert len(subset) == 2 and subset.columns.request_id.tolist() == [3, 1] and calls == []
    assert lazy[2] is outcomes[2] and list(lazy) == outcomes and calls == [1]
    assert list(subset) == [outcomes[3], outcomes[1]] and calls == [1]
    assert lazy == outcomes and lazy == tuple(outcomes) and lazy != outcomes[:3] and lazy != "abcd" and lazy != 4
    sent = pickle.loads(pickle.dumps(lazy))
    assert isinstance(sent, LazyOutcomes) and "not built" not in repr(sent)
    assert list(map(repr, sent)) == list(map(repr, outcomes))
    assert_same_columns(sent.columns, lazy.columns)


def test_lazy_outcomes_refuse_a_build_of_another_length() -> None:
    outcomes = [_outcome(i, 0, SLO()) for i in range(3)]
    lazy = LazyOutcomes(OutcomeColumns.from_outcomes(outcomes), lambda: outcomes[:2])
    with pytest.raises(RuntimeError, match="2 outcomes built for 3 rows"):
        list(lazy)


@pytest.mark.parametrize("tbt_slo", ["tpot", "max_gap"])
def test_per_tier_attainment_equals_summarize_by(tbt_slo: str) -> None:
    tight, loose, none = SLO(ttft_s=0.2, tbt_s=0.3), SLO(ttft_s=1.0, e2e_s=5.0), SLO()
    outcomes = [
        _outcome(0, 0, tight),  # TTFT 0.5 > 0.2: missed
        _outcome(1, 0, loose),  # met
        _outcome(2, 0, loose, rejected="exceeds_context"),  # rejected: missed
        _outcome(3, 1, loose, finish_s=6.0),  # e2e 6 > 5: missed
        _outcome(4, 1, loose),  # met
        _outcome(5, 2, none),  # tier 2 has no target: NaN
    ]
    by_tier = slo_attainment_by_tier(outcomes, tbt_slo=tbt_slo)
    expected = {tier: s.slo_attainment for tier, s in summarize_by(outcomes, "tier", tbt_slo=tbt_slo).items()}
    assert by_tier.keys() == expected.keys() == {0, 1, 2}
    assert by_tier[0] == expected[0] == pytest.approx(1 / 3) and by_tier[1] == expected[1] == 0.5
    assert math.isnan(by_tier[2]) and math.isnan(expected[2])
    calls: list[int] = []
    assert repr(slo_attainment_by_tier(_lazy(outcomes, calls), tbt_slo=tbt_slo)) == repr(by_tier) and calls == []
    with pytest.raises(ValueError, match="unknown tbt_slo 'p99'"):
        slo_attainment_by_tier(outcomes, tbt_slo="p99")
