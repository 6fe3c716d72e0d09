"""``hardware.latency``'s argument checks and the memory formulas around the latency model.

Every checked argument of every public function is refused, outside its bound, with the whole
message naming it and the bound (anchored matches), and taken at the bound itself; a strict bound
(``> 0``) refuses the bound. ``activation_reserve_bytes`` and ``kv_capacity_tokens`` are checked
by hand from their docstrings' formulas, for a dense and an MoE model, over pipeline stages and
weight dtypes."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from hardware.gpus import get_gpu
from hardware.latency import (
    ACTIVATION_BYTES,
    ACTIVATION_RESERVE_TOKENS,
    activation_reserve_bytes,
    kv_capacity_tokens,
    kv_transfer_time_s,
    latency_model,
)
from hardware.models import get_model, kv_bytes_per_token_per_gpu, weights_per_gpu_bytes

MODEL = latency_model("A100-80GB", "Llama-2-7B")


def at_least(label: str, value: object, minimum: object) -> str:
    return f"^{label}={value!r} must be an integer >= {minimum}$"


def finite(label: str, value: object, relation: str, minimum: float) -> str:
    return f"^{label}={value!r} must be a finite number {relation} {minimum}$"


REFUSED = [
    (lambda: MODEL.decode_coefficients(0), at_least("batch_size", 0, 1)),
    (lambda: MODEL.decode_time_s(1, -1), at_least("context_tokens", -1, 0)),
    (lambda: MODEL.decode_time_s(0, 10), at_least("batch_size", 0, 1)),
    (lambda: MODEL.iteration_time_s(-1, 0.0, 1, 0), at_least("prefill_tokens", -1, 0)),
    (lambda: MODEL.iteration_time_s(0, 0.0, -1, 0), at_least("decode_batch_size", -1, 0)),
    (lambda: MODEL.iteration_time_s(0, 0.0, 1, -1), at_least("decode_context_tokens", -1, 0)),
    (lambda: MODEL.iteration_time_s(1, -1.0, 0, 0), finite("prefill_attention_pairs", -1.0, ">=", 0.0)),
    (lambda: MODEL.iteration_time_s(0, 0.0, 0, 0), "^empty iteration: prefill_tokens=0 and decode_batch_size=0$"),
    (lambda: MODEL.iteration_time_s(4, 3.0, 0, 0),
     r"^prefill_attention_pairs=3.0 is below prefill_tokens=4 \(each token attends at least to itself\)$"),
    (lambda: MODEL.stage_times_s(0, 1, 1.0), at_least("tokens", 0, 1)),
    (lambda: MODEL.stage_times_s(1, 0, 1.0), at_least("logit_tokens", 0, 1)),
    (lambda: MODEL.stage_times_s(1, 1, 0.0), finite("iteration_s", 0.0, ">", 0.0)),
    (lambda: MODEL.prefill_time_s(0), at_least("tokens", 0, 1)),
    (lambda: MODEL.prefill_time_s(1, -1), at_least("context_before", -1, 0)),
    (lambda: activation_reserve_bytes("Llama-2-7B", tp=0), at_least("tp", 0, 1)),
    (lambda: kv_transfer_time_s("Llama-2-7B", 0, 50.0), at_least("tokens", 0, 1)),
    (lambda: kv_transfer_time_s("Llama-2-7B", 1, 0.0), finite("link_gbps", 0.0, ">", 0.0)),
    (lambda: kv_transfer_time_s("Llama-2-7B", 1, 50.0, latency_s=-1.0), finite("latency_s", -1.0, ">=", 0.0)),
]


@pytest.mark.parametrize(("call", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_each_checked_argument_is_refused_naming_it_and_its_bound(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_each_bound_itself_is_taken():
    assert MODEL.decode_coefficients(1)[0] > 0
    assert MODEL.decode_time_s(1, 0) > 0
    assert MODEL.iteration_time_s(0, 0.0, 1, 0) == MODEL.decode_time_s(1, 0)
    assert MODEL.iteration_time_s(1, 1.0, 0, 0) == MODEL.prefill_time_s(1, 0)
    iteration_s = MODEL.decode_time_s(1, 0)
    assert sum(MODEL.stage_times_s(1, 1, iteration_s)) == pytest.approx(iteration_s, rel=1e-12)
    assert kv_transfer_time_s("Llama-2-7B", 1, 50.0, latency_s=0.0) == kv_transfer_time_s("Llama-2-7B", 1, 50.0)


def test_activation_reserve_by_hand_for_a_dense_and_an_moe_model():
    """Its docstring: a 2,048-token forward pass's hidden state plus three MLP-wide tensors
    (the widest of the dense MLP and an MoE token's routed and shared experts) split over TP,
    at ``ACTIVATION_BYTES`` each; a name or a spec alike, TP 1 by default."""
    dense = get_model("Llama-2-7B")
    by_hand = ACTIVATION_RESERVE_TOKENS * (dense.hidden_size + 3 * dense.intermediate_size) * ACTIVATION_BYTES
    assert activation_reserve_bytes("Llama-2-7B") == activation_reserve_bytes(dense) == by_hand
    assert activation_reserve_bytes(dense, tp=2) == ACTIVATION_RESERVE_TOKENS * (
        dense.hidden_size + 3 * dense.intermediate_size / 2) * ACTIVATION_BYTES
    moe = get_model("Mixtral-8x7B")
    width = max(moe.intermediate_size, (moe.experts_per_token + moe.num_shared_experts) * moe.moe_intermediate_size)
    assert width == 2 * moe.intermediate_size  # a token's two experts are the widest here
    assert activation_reserve_bytes(moe, tp=4) == ACTIVATION_RESERVE_TOKENS * (moe.hidden_size + 3 * width / 4) * (
        ACTIVATION_BYTES)


@pytest.mark.parametrize(("gpu", "model", "tp", "pp", "dtype"), [
    ("A100-80GB", "Llama-2-13B", 1, 2, "fp16"),
    ("H100-80GB", "Llama-2-70B", 2, 2, "fp8"),
])
def test_kv_capacity_by_hand_over_stages_and_dtypes(gpu, model, tp, pp, dtype):
    """(utilisation x memory − the weight shard − the activation reserve) // one token's KV on
    the most loaded GPU, each term at the deployment's own TP, PP and weight dtype."""
    spec = get_model(model)
    free_bytes = (get_gpu(gpu).memory_bytes * 0.8 - weights_per_gpu_bytes(spec, tp, pp, dtype)
                  - activation_reserve_bytes(spec, tp))
    assert kv_capacity_tokens(gpu, model, tp, pp, dtype, memory_utilization=0.8) == int(
        free_bytes // kv_bytes_per_token_per_gpu(spec, tp, pp))


def test_kv_capacity_refuses_weights_over_the_utilisation_and_no_room_for_activations():
    """Weights checked against the given utilisation, not the default: Llama-2-7B's 13.5 GB of
    fp16 weights need more than 10 % of an A100-80GB (80 GiB). Just above the weights, nothing is left
    once the activations are reserved."""
    with pytest.raises(ValueError, match=r"^Llama-2-7B \(fp16, tp=1, pp=1\) needs .* bytes of weights per GPU but "
                                         r"A100-80GB has 8.59e\+09 bytes available \(0.1 of 8.59e\+10\)$"):
        kv_capacity_tokens("A100-80GB", "Llama-2-7B", memory_utilization=0.1)
    weights_fraction = weights_per_gpu_bytes(get_model("Llama-2-7B")) / get_gpu("A100-80GB").memory_bytes
    with pytest.raises(ValueError, match=r"^Llama-2-7B on A100-80GB \(tp=1, pp=1, fp16\) leaves no memory for KV "
                                         r"cache after weights and activations \(-.* bytes\)$"):
        kv_capacity_tokens("A100-80GB", "Llama-2-7B", memory_utilization=weights_fraction + 1e-4)


def test_numpy_integers_are_checked_like_python_ones_up_to_the_largest_count():
    """numpy integers take the full check: the bounds (1 and 2**40 tokens) are taken, 2**40 + 1
    is refused naming the limit."""
    assert kv_transfer_time_s("Llama-2-7B", np.int64(1), 50.0) == kv_transfer_time_s("Llama-2-7B", 1, 50.0)
    assert kv_transfer_time_s("Llama-2-7B", np.int64(2**40), 50.0) == kv_transfer_time_s("Llama-2-7B", 2**40, 50.0)
    for too_many in (2**40 + 1, np.int64(2**40 + 1)):
        with pytest.raises(ValueError, match=rf"^tokens={re.escape(repr(too_many))} exceeds the largest count the "
                                             r"latency model takes, 2\*\*40$"):
            kv_transfer_time_s("Llama-2-7B", too_many, 50.0)


def test_shared_experts_widen_the_activation_reserve():
    """A DeepSeek-shaped MoE (8 routed + 1 shared expert of 2,048) whose dense MLP is narrower
    than a token's experts: the reserve counts all nine experts' width."""
    deepseek = get_model("DeepSeek-R1-671B")
    narrow = dataclasses.replace(deepseek, intermediate_size=1024)
    width = (narrow.experts_per_token + narrow.num_shared_experts) * narrow.moe_intermediate_size
    assert width == 9 * 2048
    assert activation_reserve_bytes(narrow, tp=8) == ACTIVATION_RESERVE_TOKENS * (narrow.hidden_size + 3 * width / 8) * (
        ACTIVATION_BYTES)


def test_model_construction_defaults_and_weights():
    """One GPU by default; the weights held are the dtype's (fp8: one byte per linear weight);
    an unknown dtype is refused naming the known ones; a numpy batch size gives the int's
    coefficients; a model spec or its name give the same KV transfer."""
    from hardware.latency import IterationLatencyModel
    from hardware.models import WEIGHT_DTYPES

    model = IterationLatencyModel("A100-80GB", "Llama-2-7B")
    assert (model.tp, model.pp, model.dtype) == (1, 1, "fp16")
    fp8 = IterationLatencyModel("A100-80GB", "Llama-2-7B", dtype="fp8")
    assert fp8.weights_per_gpu_bytes == weights_per_gpu_bytes(get_model("Llama-2-7B"), 1, 1, "fp8") < (
        model.weights_per_gpu_bytes)
    with pytest.raises(ValueError, match=f"^unknown weight dtype 'int8'; known: {', '.join(WEIGHT_DTYPES)}$"):
        IterationLatencyModel("A100-80GB", "Llama-2-7B", dtype="int8")
    assert MODEL.decode_coefficients(np.int64(4)) == MODEL.decode_coefficients(4)
    assert kv_transfer_time_s(get_model("Llama-2-7B"), 100, 50.0) == kv_transfer_time_s("Llama-2-7B", 100, 50.0)
