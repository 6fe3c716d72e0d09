"""The router registry (``simulator.routers``): names resolve to fresh routers, ``Cluster`` takes a
name, bad names and options are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.routers import ROUTERS, make_router, register_router, router_names
from simulator.routers.freeness import freest_instance
from simulator.routers.least_loaded import LeastLoadedRouter
from simulator.routers.round_robin import RoundRobinRouter
from simulator.routers.session import SessionAffinityRouter
from simulator.sequence import Sequence

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

GPU, MODEL = "A100-80GB", "Llama-2-7B"
OTHER_MODEL = "Llama-3.1-8B"


def cluster_of(router: str, count: int = 3) -> Cluster:
    cluster = Cluster({GPU: count}, router=router)
    for _ in range(count):
        cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL), ready_now=True)
    return cluster


def test_cluster_resolves_router_names_through_the_registry():
    assert isinstance(cluster_of("round_robin").router, RoundRobinRouter)
    assert isinstance(cluster_of("least_loaded").router, LeastLoadedRouter)
    assert make_router("round_robin") is not make_router("round_robin")  # per-episode state


def test_round_robin_cycles_and_least_loaded_takes_the_emptiest_lowest_id_first():
    requests = [Request(i, 0.0, 100, 400) for i in range(5)]
    outcomes = cluster_of("round_robin").run(requests)
    assert [o.instance_id for o in sorted(outcomes, key=lambda o: o.request_id)] == [0, 1, 2, 0, 1]
    outcomes = cluster_of("least_loaded").run([Request(i, 0.0, 100, 400) for i in range(5)])
    assert [o.instance_id for o in sorted(outcomes, key=lambda o: o.request_id)] == [0, 1, 2, 0, 1]


def test_bad_names_and_options_are_refused():
    with pytest.raises(ValueError, match="unknown router 'nearest'; known: \\['least_loaded', 'llumnix', 'round_robin', 'session_affinity'"):
        Cluster({GPU: 1}, router="nearest")
    with pytest.raises(ValueError, match="router 'llumnix' cannot take options {}"):
        make_router("llumnix")
    with pytest.raises(ValueError, match="router 'round_robin' is already registered"):
        register_router("round_robin", RoundRobinRouter)


def test_a_registered_router_is_available_by_name():
    register_router("always_last", lambda: (lambda cluster, seq: cluster.routable_ids()[-1]))
    try:
        assert "always_last" in router_names()
        outcomes = cluster_of("always_last").run([Request(i, 0.0, 100, 10) for i in range(3)])
        assert {o.instance_id for o in outcomes} == {2}
    finally:
        del ROUTERS["always_last"]


def test_session_affinity_keeps_a_conversation_on_one_instance_and_balances_the_rest():
    cluster = cluster_of("session_affinity", count=4)
    turns = [Request(i, 10.0 * i, 100, 5, session_id=i % 6) for i in range(30)]
    turns += [Request(30 + i, 400.0 + i, 100, 400) for i in range(4)]  # no session: fewest requests
    outcomes = {o.request_id: o.instance_id for o in cluster.run(turns)}
    by_session: dict[int, set[int]] = {}
    for request in turns[:30]:
        by_session.setdefault(request.session_id, set()).add(outcomes[request.request_id])
    assert all(len(instances) == 1 for instances in by_session.values())
    assert len({next(iter(s)) for s in by_session.values()}) > 1  # six sessions do not all hash to one instance
    assert sorted(outcomes[30 + i] for i in range(4)) == [0, 1, 2, 3]


def test_a_session_moves_only_when_its_instance_leaves():
    router = SessionAffinityRouter()
    before = {session: router.owner(session, [0, 1, 2, 3]) for session in range(200)}
    after = {session: router.owner(session, [0, 1, 3]) for session in range(200)}
    moved = [session for session in range(200) if before[session] != after[session]]
    assert moved and all(before[session] == 2 for session in moved)


def mixed_model_cluster(models: list[str], track_arrays: bool) -> Cluster:
    cluster = Cluster({GPU: len(models)}, router=None, track_arrays=track_arrays)
    for model in models:
        cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=model), ready_now=True)
    return cluster


def model_request(request_id: int, model: str) -> Sequence:
    return Sequence(Request(request_id, 0.0, 160, 50, model=model), record_token_curve=False)


@pytest.mark.parametrize("track_arrays", [False, True])  # instance by instance, and from the arrays
def test_freest_instance_serves_the_requests_model_and_breaks_ties_by_lowest_id(track_arrays):
    cluster = mixed_model_cluster([OTHER_MODEL, MODEL, MODEL], track_arrays)
    no_headroom = np.zeros(1)
    # Every instance is empty, so F_full = inf on all three (eq. 1, batch 0): instance 0 is as free
    # but serves another model, and the tie between 1 and 2 goes to the lowest id.
    assert freest_instance(cluster, model_request(0, MODEL), no_headroom) == 1
    assert freest_instance(cluster, model_request(1, OTHER_MODEL), no_headroom) == 0
    cluster.instances[1].enqueue(model_request(2, MODEL))  # finite F_full on 1; 2 stays infinitely free
    assert freest_instance(cluster, model_request(3, MODEL), no_headroom) == 2


@pytest.mark.parametrize("track_arrays", [False, True])
def test_freest_instance_raises_naming_the_request_when_no_instance_serves_its_model(track_arrays):
    cluster = mixed_model_cluster([OTHER_MODEL, OTHER_MODEL], track_arrays)
    with pytest.raises(RuntimeError, match=r"^no serving instance can take request 7$"):
        freest_instance(cluster, model_request(7, MODEL), np.zeros(1))
