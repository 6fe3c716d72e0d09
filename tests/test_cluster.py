"""Cluster mechanics: start-up delay, draining, cost, live migration, PD transfer, phase routing."""

from __future__ import annotations

import pytest

from hardware.gpus import get_gpu
from hardware.latency import kv_transfer_time_s, latency_model, weight_load_time_s
from hardware.models import get_model
from simulator.cluster import Cluster, MigrationConfig
from simulator.instance import InstanceConfig, Lifecycle, Role
from simulator.request import Request
from simulator.sequence import Sequence

GPU, MODEL = "A100-80GB", "Llama-2-7B"
ENGINE = "vidur-2024"  # the hand-computed times below use its latency model
CONFIG = InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL)


def test_startup_delay_is_weight_load_plus_provisioning():
    cluster = Cluster({GPU: 2}, provisioning_s=5.0)
    first = cluster.deploy(CONFIG, ready_now=True)
    second = cluster.deploy(CONFIG)
    startup_s = weight_load_time_s(get_model(MODEL), get_gpu(GPU)) + 5.0
    assert cluster.instances[second].lifecycle == Lifecycle.STARTING
    assert cluster.routable_ids() == [first]
    cluster.advance(startup_s - 1e-9)
    assert cluster.instances[second].lifecycle == Lifecycle.STARTING
    cluster.advance(startup_s)
    assert cluster.instances[second].lifecycle == Lifecycle.SERVING
    assert cluster.routable_ids() == [first, second]


def test_inventory_limits_deployments():
    cluster = Cluster({GPU: 1})
    cluster.deploy(CONFIG, ready_now=True)
    with pytest.raises(ValueError, match="0 free of 1"):
        cluster.deploy(CONFIG)


def test_draining_finishes_requests_then_stops_and_cost_is_gpus_times_price_times_time_held():
    cluster = Cluster({GPU: 2, "H100-80GB": 2})
    a = cluster.deploy(CONFIG, ready_now=True)
    b = cluster.deploy(InstanceConfig(engine=ENGINE, gpu="H100-80GB", model=MODEL, tp=2), ready_now=True)
    cluster.submit([Request(0, 0.0, 500, 200)])  # round-robin: goes to instance a
    cluster.advance(0.5)
    cluster.drain(a)
    assert cluster.instances[a].lifecycle == Lifecycle.DRAINING
    assert cluster.routable_ids() == [b]
    cluster.advance()
    [outcome] = cluster.outcomes
    assert outcome.completed and outcome.instance_id == a
    assert cluster.instances[a].lifecycle == Lifecycle.STOPPED
    stop_s = outcome.finish_s
    cluster.advance(stop_s + 10.0)
    expected = stop_s * 1 * get_gpu(GPU).price_per_second_usd + (stop_s + 10.0) * 2 * get_gpu("H100-80GB").price_per_second_usd
    assert cluster.cost_usd() == pytest.approx(expected, rel=1e-12)
    assert cluster.gpus_in_use == {GPU: 0, "H100-80GB": 2}


def test_live_migration_conserves_tokens_and_adds_exactly_the_final_stage_pause():
    # Reference: the same request alone, never migrated.
    alone = Cluster({GPU: 1})
    alone.deploy(CONFIG, ready_now=True)
    [reference] = alone.run([Request(0, 0.0, 1000, 400)])

    cluster = Cluster({GPU: 2}, migration=MigrationConfig(last_stage_max_blocks=4, max_stages=3), record_token_curves=True)
    src = cluster.deploy(CONFIG, ready_now=True)
    dst = cluster.deploy(CONFIG, ready_now=True)
    cluster.submit([Request(0, 0.0, 1000, 400)])
    cluster.advance(1.0)
    [seq] = cluster.instances[src].running
    assert cluster.migrate(seq, dst)
    cluster.advance()
    [outcome] = cluster.outcomes
    assert outcome.completed and outcome.instance_id == dst
    assert outcome.token_curve[-1][1] == 400
    assert cluster.migrations_done == 1
    assert cluster.instances[src].kv.used_blocks == 0 and cluster.instances[dst].kv.used_blocks == 0
    # The request keeps decoding during the copy stages; it pauses only for the last stage,
    # so it finishes later than the reference by at least that pause and by less than the
    # whole-KV copy time.
    delay_s = outcome.finish_s - reference.finish_s
    whole_copy_s = kv_transfer_time_s(get_model(MODEL), 1400, get_gpu(GPU).intra_node_link_gbps)
    assert 0 < delay_s < whole_copy_s


def test_queued_request_migrates_immediately():
    cluster = Cluster({GPU: 2}, router=lambda c, s: 0)
    cluster.deploy(CONFIG, ready_now=True)
    cluster.deploy(CONFIG, ready_now=True)
    cluster.submit([Request(i, 0.0, 2000, 50) for i in range(3)])
    cluster.advance(0.0)
    waiting = list(cluster.instances[0].waiting)
    assert waiting, "several prompts arriving together leave some waiting"
    assert cluster.migrate(waiting[-1], 1)
    cluster.advance()
    assert {o.instance_id for o in cluster.outcomes} == {0, 1}
    assert all(o.completed for o in cluster.outcomes)


def test_disaggregated_prefill_decode_transfer_adds_the_kv_transfer_time():
    prompt, output = 800, 50
    cluster = Cluster({GPU: 1, "H100-80GB": 1}, decode_router=lambda c, s, i: 1)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu="H100-80GB", model=MODEL, role=Role.PREFILL), ready_now=True)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, role=Role.DECODE), ready_now=True)
    [outcome] = cluster.run([Request(0, 0.0, prompt, output)])
    prefill_s = latency_model("H100-80GB", MODEL, engine=ENGINE).prefill_time_s(prompt)
    link = min(get_gpu(GPU).host_link_gbps, get_gpu("H100-80GB").host_link_gbps)
    transfer_s = kv_transfer_time_s(get_model(MODEL), prompt, link)
    decode = latency_model(GPU, MODEL, engine=ENGINE)
    t = prefill_s + transfer_s
    for i in range(1, output):
        t = t + decode.decode_time_s(1, prompt + i)
    assert outcome.ttft_s == prefill_s
    assert outcome.instance_id == 1 and outcome.num_migrations == 1
    assert outcome.finish_s == pytest.approx(t, rel=1e-12)
    assert outcome.max_tbt_s == pytest.approx(transfer_s + decode.decode_time_s(1, prompt + 1), rel=1e-12)


def test_phase_router_moves_reasoning_requests_at_the_end_of_thinking():
    cluster = Cluster({GPU: 2}, router=lambda c, s: 0, phase_router=lambda c, s, i: 1, record_token_curves=True)
    cluster.deploy(CONFIG, ready_now=True)
    cluster.deploy(CONFIG, ready_now=True)
    [outcome] = cluster.run([Request(0, 0.0, 200, 120, reasoning_tokens=100)])
    assert outcome.instance_id == 1 and outcome.num_migrations == 1
    transfer_s = kv_transfer_time_s(get_model(MODEL), 200 + 100 - 1, get_gpu(GPU).intra_node_link_gbps)
    curve = dict((tokens, t) for t, tokens in outcome.token_curve)
    # token 101 (first answer token) comes after the transfer plus one decode iteration
    gap = outcome.first_answer_token_s - curve[100]
    assert gap == pytest.approx(transfer_s + latency_model(GPU, MODEL, engine=ENGINE).decode_time_s(1, 300), rel=1e-9)


def test_external_routing_decisions_pause_the_simulation():
    cluster = Cluster({GPU: 2}, router=None)
    cluster.deploy(CONFIG, ready_now=True)
    cluster.deploy(CONFIG, ready_now=True)
    cluster.submit([Request(i, float(i), 100, 10) for i in range(4)])
    routed = []
    while (decision := cluster.advance()) is not None:
        assert decision.kind == "route"
        routed.append(decision.seq.request_id)
        cluster.dispatch(decision.seq, decision.seq.request_id % 2)
    assert routed == [0, 1, 2, 3]
    assert sorted(o.instance_id for o in cluster.outcomes) == [0, 0, 1, 1]


def test_bad_requests_raise_naming_the_value():
    cluster = Cluster({GPU: 1})
    cluster.deploy(CONFIG, ready_now=True)
    with pytest.raises(ValueError, match="prompt_tokens must be a positive integer, got 0"):
        cluster.submit([Request(0, 0.0, 0, 10)])
    with pytest.raises(ValueError, match="reasoning_tokens"):
        cluster.submit([Request(0, 0.0, 10, 10, reasoning_tokens=10)])
    with pytest.raises(ValueError, match="sorted by arrival"):
        cluster.submit([Request(0, 2.0, 10, 10), Request(1, 1.0, 10, 10)])
    with pytest.raises(ValueError, match="unknown instance 7"):
        cluster.drain(7)


def test_accepting_is_one_rule_for_dispatch_masks_and_routable_ids():
    """Serving and not decode-only for a new request, not prefill-only for an answering one,
    of the request's model; the same answer from the instance arrays and without them."""
    for track in (False, True):
        cluster = Cluster({"A100-80GB": 4}, track_arrays=track)
        serving = cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-2-7B"), ready_now=True)
        prefill = cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-2-7B", role=Role.PREFILL),
                                 ready_now=True)
        decode = cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-2-7B", role=Role.DECODE), ready_now=True)
        starting = cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-2-7B"))
        seq = Sequence(Request(0, 0.0, 10, 10), False)
        assert cluster.accepting(seq).tolist() == [True, True, False, False]
        assert cluster.accepting(seq, new_request=False).tolist() == [True, False, True, False]
        assert cluster.routable_ids() == [serving, prefill]
        other_model = Sequence(Request(1, 0.0, 10, 10, model="Llama-3.1-8B"), False)
        assert not cluster.accepting(other_model).any()
        with pytest.raises(ValueError, match=f"instance {decode} is decode-only and cannot take new requests"):
            cluster.dispatch(seq, decode)
        with pytest.raises(ValueError, match=f"instance {starting} is starting, not serving"):
            cluster.dispatch(seq, starting)
        with pytest.raises(ValueError, match=f"instance {serving} serves Llama-2-7B, request needs Llama-3.1-8B"):
            cluster.dispatch(other_model, serving)
        cluster.advance()  # the starting instance has loaded its weights
        assert cluster.accepting(seq).tolist() == [True, True, False, True]
        cluster.drain(serving)  # empty: stops at once
        added = cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-2-7B"), ready_now=False)
        assert cluster.accepting(seq).tolist() == [False, True, False, True, False]
        mask = cluster.accepting(seq)
        mask[:] = True  # a caller's copy: the next answer is unchanged
        assert cluster.routable_ids() == [prefill, starting]
        assert added == 4


def test_add_arrival_extends_a_stream_and_refuses_a_fixed_list():
    cluster = Cluster({"A100-80GB": 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-2-7B"), ready_now=True)
    cluster.submit(iter([Request(0, 0.0, 50, 3)]))
    cluster.add_arrival(Request(1, 0.5, 50, 3))
    outcomes = cluster.run()
    assert sorted(o.request_id for o in outcomes) == [0, 1] and outcomes[-1].arrival_s == 0.5
    fixed = Cluster({"A100-80GB": 1})
    fixed.submit([Request(0, 0.0, 50, 3)])
    with pytest.raises(ValueError, match="add_arrival needs a stream"):
        fixed.add_arrival(Request(1, 0.5, 50, 3))


@pytest.mark.parametrize(("field", "value"), [("last_stage_max_blocks", -1), ("max_stages", 0), ("max_stages", 2.5),
                                              ("last_stage_max_blocks", True), ("max_stages", "3")])
def test_a_migration_config_refuses_a_bad_setting_naming_it(field, value):
    """A negative last stage or no stage at all would loop over stages with nothing to copy."""
    with pytest.raises(ValueError, match=rf"MigrationConfig\.{field} must be an integer >= [01], got {value!r}"):
        MigrationConfig(**{field: value})
