"""RequestTable (simulator.request_table) and generate_request_table: the same requests as
generate_requests, drawn alike; objects made once, on first read; the compiled cluster takes an
untouched table's columns whole and gives the outcomes of the list."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from envs.presets import make_scenario
from simulator.compiled import CompiledCluster
from simulator.instance import InstanceConfig
from simulator.request import SLO, Request
from simulator.request_table import RequestTable, arrival_times_s
from simulator.workloads import (
    GammaArrivals,
    PoissonArrivals,
    generate_request_table,
    generate_requests,
    length_sampler,
)

GPU, MODEL = "A100-80GB", "Llama-2-7B"
TIER_SLOS = [SLO(ttft_s=0.5, tbt_s=0.1), SLO(ttft_s=2.0), SLO()]
WORKLOADS = {
    "sharegpt, one SLO": (PoissonArrivals(8.0), "sharegpt", {"slo": SLO(ttft_s=1.0)}),
    "three tiers, an SLO function": (GammaArrivals(4.0, 2.0), "azure_conv",
                                     {"priorities": "enterprise", "num_tiers": 3, "slo": TIER_SLOS.__getitem__}),
    "reasoning lengths": (PoissonArrivals(2.0), "servegen_deepseek_r1", {}),
}


def _pair(workload: str, count: int = 700, seed: int = 5) -> tuple[list[Request], RequestTable, np.random.Generator,
                                                                   np.random.Generator]:
    arrivals, lengths, options = WORKLOADS[workload]
    listed_rng, table_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    listed = generate_requests(arrivals, length_sampler(lengths), count, listed_rng, **options)
    table = generate_request_table(arrivals, length_sampler(lengths), count, table_rng, **options)
    return listed, table, listed_rng, table_rng


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_a_table_holds_the_requests_of_generate_requests(workload: str) -> None:
    listed, table, listed_rng, table_rng = _pair(workload)
    assert isinstance(table, RequestTable) and table.untouched and len(table) == len(listed)
    assert listed_rng.random() == table_rng.random()  # the same draws: the generators end alike
    assert arrival_times_s(table) == [r.arrival_s for r in listed] and table.untouched
    assert table.slo == [r.slo for r in listed]
    assert len({id(s) for s in table.slo}) == len(set(table.tier.tolist()))  # each tier's one SLO, shared
    assert list(map(repr, table)) == list(map(repr, listed))
    assert all(type(a.prompt_tokens) is int and type(a.arrival_s) is float for a in table)


def test_objects_are_made_once_on_first_read_and_keep_changes() -> None:
    _, table, _, _ = _pair("three tiers, an SLO function", count=50)
    fifth = table[5]
    assert not table.untouched and repr(table) == "RequestTable(50 requests, 1 made)"
    assert table[5] is fifth and table[-45] is fifth and table[4:6][1] is fifth
    fifth.prompt_tokens = 999  # a caller's change stays: the object is the request now
    everything = list(table)
    assert everything[5] is fifth and table[5].prompt_tokens == 999 and repr(table) == "RequestTable(50 requests, 50 made)"
    assert arrival_times_s(table) == [r.arrival_s for r in everything]
    with pytest.raises(IndexError):
        table[50]
    assert pickle.loads(pickle.dumps(table)) == everything  # made objects travel as a list


def test_an_untouched_table_pickles_as_columns() -> None:
    _, table, _, _ = _pair("sharegpt, one SLO", count=40)
    sent = pickle.loads(pickle.dumps(table))
    assert isinstance(sent, RequestTable) and sent.untouched and table.untouched
    assert sent == table and table != list(table)[:39] and table != "requests" and table != 40


def test_bad_columns_raise_naming_them() -> None:
    ids, arrivals, ints = np.arange(3), np.array([0.0, 1.0, 2.0]), np.array([5, 5, 5])
    with pytest.raises(ValueError, match="1-D of one length"):
        RequestTable(ids, arrivals[:2], ints, ints, ints * 0, ints * 0, {0: SLO()})
    with pytest.raises(ValueError, match="column prompt_tokens must be integer, got float64"):
        RequestTable(ids, arrivals, ints * 1.0, ints, ints * 0, ints * 0, {0: SLO()})
    with pytest.raises(ValueError, match=r"no SLO for tier\(s\) \[2\]"):
        RequestTable(ids, arrivals, ints, ints, ints * 0, np.array([0, 2, 0]), {0: SLO()})


class FloatLengths:
    """A sampler whose lengths are floats (>= 1): no table; the list, which the cluster refuses."""

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return np.full(n, 10.0 + rng.random()), np.full(n, 4.0)


def test_lengths_that_are_not_integers_give_the_list() -> None:
    requests = generate_request_table(PoissonArrivals(1.0), FloatLengths(), 3, np.random.default_rng(0))
    assert type(requests) is list and isinstance(requests[0].prompt_tokens, float)


def _cluster() -> CompiledCluster:
    cluster = CompiledCluster({GPU: 2}, router="least_loaded")
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
    return cluster


@pytest.mark.parametrize("workload", list(WORKLOADS)[:2])
def test_the_compiled_cluster_takes_the_columns_and_gives_the_lists_outcomes(workload: str) -> None:
    listed, table, _, _ = _pair(workload, count=400)
    expected = _cluster().run(listed)
    cluster = _cluster()
    cluster.submit(table)
    cluster.engine.run()
    cluster.collect_columns()
    assert table.untouched and "not built" in repr(cluster.outcomes)  # nothing made on the way
    assert list(map(repr, cluster.outcomes)) == list(map(repr, expected))
    assert cluster.submitted_requests is table and arrival_times_s(cluster.submitted_requests) == [
        r.arrival_s for r in listed]
    _, again, _, _ = _pair(workload, count=400)
    unkept = CompiledCluster({GPU: 2}, router="least_loaded", keep_sequences=False)
    for _ in range(2):
        unkept.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
    assert list(map(repr, unkept.run(again))) == list(map(repr, expected)) and again.untouched


def test_a_bad_table_is_named_as_the_list_would_be() -> None:
    table = RequestTable(np.arange(3), np.array([0.0, 0.5, 0.25]), np.array([5, 5, 5]), np.array([5, 5, 5]),
                         np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64), {0: SLO()})
    with pytest.raises(ValueError, match="requests must be sorted by arrival; request 2 arrives at 0.25 s after 0.5 s"):
        _cluster().submit(table)
    late = RequestTable(np.arange(1), np.array([math.inf]), np.array([5]), np.array([5]), np.zeros(1, dtype=np.int64),
                        np.zeros(1, dtype=np.int64), {0: SLO()})
    with pytest.raises(ValueError, match=r"request 0: arrival_s must be a number in \[0, 1e\+09\] s, got inf"):
        _cluster().submit(late)


def test_scenarios_draw_tables_and_traces_lists() -> None:
    rng = np.random.default_rng(0)
    assert isinstance(make_scenario("default", episode_requests=20).requests(rng), RequestTable)
    assert type(make_scenario("mooncake", episode_requests=20).requests(rng)) is list  # a trace's block hashes
