"""The context rule inside the simulator (``simulator.context``): every dispatch, whatever the
caller, rejects a prompt longer than the instance's model context and caps a longer output."""

from __future__ import annotations

import math

from hardware.models import get_model
from simulator.cluster import Cluster
from simulator.context import CONTEXT_REJECT_REASON, fit_to_context
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.sequence import Sequence

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

GPU = "A100-80GB"


def test_rule_on_one_sequence_rejects_caps_or_leaves_it():
    assert get_model("Llama-2-7B").context_tokens == 4096
    too_long, at_limit, reasoning, short = (
        Sequence(Request(0, 0.0, 4097, 5), False), Sequence(Request(1, 0.0, 4096, 7), False),
        Sequence(Request(2, 0.0, 4000, 500, reasoning_tokens=300), False), Sequence(Request(3, 0.0, 100, 10), False))
    assert fit_to_context(too_long, 4096) is None and too_long.output_tokens == 5
    # vLLM's length cap: prompt + output stops at the context, after at least one token
    assert fit_to_context(at_limit, 4096) is True and (at_limit.output_tokens, at_limit.reasoning_tokens) == (1, 0)
    assert fit_to_context(reasoning, 4096) is True and (reasoning.output_tokens, reasoning.reasoning_tokens) == (96, 95)
    assert fit_to_context(short, 4096) is False and short.output_tokens == 10
    assert reasoning.request.output_tokens == 500  # the request stays as it arrived


def test_cluster_rejects_a_prompt_over_the_context_at_arrival_and_caps_an_overflowing_output():
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model="Llama-2-7B"), ready_now=True)
    outcomes = cluster.run([Request(0, 0.5, 4097, 5), Request(1, 1.0, 4000, 500), Request(2, 2.0, 100, 10)])
    by_id = {o.request_id: o for o in outcomes}
    assert len(outcomes) == 3 and cluster.pending_requests() == 0
    rejected = by_id[0]
    assert (rejected.rejected_reason, rejected.finish_s, rejected.arrival_s) == (CONTEXT_REJECT_REASON, 0.5, 0.5)
    assert math.isnan(rejected.first_token_s)
    assert by_id[1].completed and by_id[1].output_tokens == 4096 - 4000
    assert by_id[2].completed and by_id[2].output_tokens == 10
    assert cluster.context_truncated == 1 and cluster.instances[0].context_truncated == 1


def test_the_rule_uses_the_context_of_the_instance_a_request_is_sent_to():
    small, large = get_model("OpenLlama-3B").context_tokens, get_model("Llama-2-7B").context_tokens
    assert (small, large) == (2048, 4096)
    cluster = Cluster({GPU: 2}, router=lambda cluster, seq: seq.request_id % 2)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model="OpenLlama-3B"), ready_now=True)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model="Llama-2-7B"), ready_now=True)
    outcomes = {o.request_id: o for o in cluster.run([Request(0, 0.0, 3000, 50), Request(1, 0.0, 3000, 2000)])}
    assert outcomes[0].rejected_reason == CONTEXT_REJECT_REASON  # 3000 > 2048 on OpenLlama-3B
    assert outcomes[1].completed and outcomes[1].output_tokens == 4096 - 3000  # capped on Llama-2-7B
    assert [i.context_truncated for i in cluster.instances.values()] == [0, 1]
