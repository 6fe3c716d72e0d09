"""Per-iteration latency model: structure, hand-computed values, KV/transfer/load helpers, bad inputs."""

import math

import numpy as np
import pytest

from hardware.engines import get_engine
from hardware.gpus import get_gpu
from hardware.kernel_sets import kernel_efficiency
from hardware.latency import (
    IterationLatencyModel,
    kv_capacity_tokens,
    kv_transfer_time_s,
    latency_model,
    pp_bubble_fraction,
    weight_load_time_s,
)
from hardware.models import get_model, weights_per_gpu_bytes
from hardware.profiles import compute_efficiency, cpu_overhead_s, gemm_bytes, gemm_flops, link_efficiency

VIDUR = "vidur-2024"
VIDUR_CPU_S = (0.1648 + 0.8792 + 0.3521 + 1.587) * 1e-3
A100_PEAK_FLOPS, A100_BANDWIDTH = 312e12, 2039e9
LLAMA2_7B_FP16_WEIGHT_BYTES = 2 * 6_738_415_616
LLAMA2_7B_KV_BYTES_PER_TOKEN = 2 * 32 * 32 * 128 * 2


@pytest.fixture(scope="module")
def a100_7b():
    return latency_model("A100-80GB", "Llama-2-7B", engine=VIDUR)


def test_latency_model_is_cached_per_configuration(a100_7b):
    assert latency_model("A100-80GB", "Llama-2-7B", engine=VIDUR) is a100_7b
    assert latency_model("A100-80GB", "Llama-2-7B", tp=2, engine=VIDUR) is not a100_7b
    assert latency_model("A100-80GB", "Llama-2-7B") is not a100_7b


def test_decode_batch_one_by_hand(a100_7b):
    """Llama-2-7B, A100, TP1, batch 1: every piece written out with the fitted efficiencies."""
    eff = compute_efficiency("a100")

    def linear_s(fan_in, fan_out, tokens=1):
        flops = 2 * tokens * fan_in * fan_out
        moved = 2 * fan_in * fan_out + 2 * tokens * (fan_in + fan_out)
        compute_s = flops / (A100_PEAK_FLOPS * eff.compute_fraction)
        return max(compute_s, moved / (A100_BANDWIDTH * eff.memory_fraction)) + eff.linear_overhead_s

    def elementwise_s(moved):
        return eff.elementwise_overhead_s + moved / (A100_BANDWIDTH * eff.elementwise_memory_fraction)

    h, i = 4096, 11008
    layer = linear_s(h, 3 * h) + linear_s(h, h) + linear_s(h, 2 * i) + linear_s(i, h)
    layer += 2 * elementwise_s(2 * 2 * h) + elementwise_s(2 * 3 * i) + elementwise_s(2 * 3 * h)
    layer += elementwise_s(2 * 2 * (32 + 32) * 128)  # rope on q and k
    layer += 0.0452e-3 + 0.00022e-3  # Vidur's decode attention: fixed + one sequence
    embedding = eff.embedding_overhead_s + 2 * 2 * h / (A100_BANDWIDTH * eff.embedding_memory_fraction)
    lm_head = linear_s(h, 32000)
    cpu = VIDUR_CPU_S
    base_s, per_context_token_s = a100_7b.decode_coefficients(1)
    assert base_s == pytest.approx(32 * layer + embedding + lm_head + cpu, rel=1e-9)
    assert per_context_token_s == pytest.approx(32 * 8.3e-9, rel=1e-9)  # 32 layers x 8.3e-6 ms


def test_decode_attention_layer_is_vidurs_per_layer_fit(a100_7b):
    """One layer's decode attention, Vidur's A100 / Llama-2-7B fit: 0.0452 ms fixed + 0.00022 ms a
    sequence + 8.3e-6 ms a KV token (batch and context chosen so each term differs from its inverse)."""
    for batch, context in ((1, 0), (8, 8192), (32, 1000)):
        expected_s = 0.0452e-3 + 0.00022e-3 * batch + 8.3e-9 * context
        assert a100_7b.decode_attention_layer_s(batch, context) == pytest.approx(expected_s, rel=1e-9)


def test_decode_time_is_exactly_base_plus_per_token_times_context(a100_7b):
    for batch in (1, 7, 32, 256):
        base_s, per_context_token_s = a100_7b.decode_coefficients(batch)
        contexts = np.array([batch, 1000 * batch, 4096 * batch + 17])
        vectorised = base_s + per_context_token_s * contexts
        for context, fast in zip(contexts.tolist(), vectorised):
            assert a100_7b.decode_time_s(batch, context) == base_s + per_context_token_s * context
            assert a100_7b.decode_time_s(batch, context) == fast


def test_iteration_without_prefill_is_exactly_decode(a100_7b):
    for batch, context in ((1, 1), (16, 9000), (128, 300_000)):
        assert a100_7b.iteration_time_s(0, 0, batch, context) == a100_7b.decode_time_s(batch, context)


def test_more_tokens_or_context_take_longer(a100_7b):
    prefill = [a100_7b.prefill_time_s(tokens) for tokens in (1, 16, 128, 512, 2048, 8192)]
    assert all(a < b for a, b in zip(prefill, prefill[1:]))
    chunked = [a100_7b.prefill_time_s(512, context) for context in (0, 512, 4096, 16384)]
    assert all(a < b for a, b in zip(chunked, chunked[1:]))
    decode = [a100_7b.decode_time_s(batch, batch * 1024) for batch in (1, 2, 8, 32, 128)]
    assert all(a < b for a, b in zip(decode, decode[1:]))
    by_context = [a100_7b.decode_time_s(8, context) for context in (8, 800, 8000, 80000)]
    assert all(a < b for a, b in zip(by_context, by_context[1:]))
    mixed = [a100_7b.iteration_time_s(p, p * (p + 1) / 2, 16, 16 * 1024) for p in (0, 64, 512, 2048)]
    assert all(a < b for a, b in zip(mixed, mixed[1:]))


def test_prefill_time_is_an_iteration_with_one_chunk(a100_7b):
    assert a100_7b.prefill_time_s(300, 100) == a100_7b.iteration_time_s(300, 300 * (100 + 301 / 2), 0, 0)


def test_moe_decode_grows_with_batch_as_more_experts_are_read():
    model = latency_model("H100-80GB", "DeepSeek-R1-671B", tp=8, pp=2)
    bases = [model.decode_coefficients(batch)[0] for batch in (1, 4, 16, 64)]
    assert all(a < b for a, b in zip(bases, bases[1:]))


def test_deepseek_671b_awq_decode_matches_a_measured_tpot_on_eight_h100s():
    """vLLM serving DeepSeek-R1-0528-AWQ on 8 x H100 (TP 8), one request at a time, measured TPOT
    16.1 ms at 128-1,024 input tokens, 16.3 ms at 2,048, 16.6 ms at 8,192 (tenstorrent/tt-inference-server
    issue #356, 2025-07-10): the roofline model with the expected number of experts read lands
    within 3% at every length."""
    model = latency_model("H100-80GB", "DeepSeek-R1-671B", tp=8, dtype="int4", engine=VIDUR)
    for context, measured_ms in ((128, 16.1), (1024, 16.1), (2048, 16.3), (8192, 16.6)):
        assert model.decode_time_s(1, context) * 1e3 == pytest.approx(measured_ms, rel=0.03)


def test_tensor_parallelism_cuts_large_prefill_time():
    times = [latency_model("A100-80GB", "Llama-2-70B", tp=tp).prefill_time_s(4096) for tp in (2, 4, 8)]
    assert times[0] > times[1] > times[2]
    assert latency_model("H100-80GB", "Llama-2-7B", tp=2).prefill_time_s(4096) < latency_model(
        "H100-80GB", "Llama-2-7B"
    ).prefill_time_s(4096)


def test_pipeline_stages_add_activation_transfers_only():
    one_stage = latency_model("A100-80GB", "Llama-2-13B", engine=VIDUR)
    four_stages = latency_model("A100-80GB", "Llama-2-13B", pp=4, engine=VIDUR)
    gpu = get_gpu("A100-80GB")
    send_s = link_efficiency("a100").send_recv_time_s(2048 * 5120 * 2, gpu)
    expected_s = one_stage.prefill_time_s(2048) + 3 * send_s
    assert four_stages.prefill_time_s(2048) == pytest.approx(expected_s, rel=1e-12)
    assert pp_bubble_fraction(1) == 0.0
    assert pp_bubble_fraction(4) == 0.75


def test_stage_times_split_the_iteration_by_stage():
    lat = latency_model("A100-80GB", "Llama-2-13B", pp=4, engine=VIDUR)
    gpu = get_gpu("A100-80GB")
    tokens = 2048
    iteration_s = lat.prefill_time_s(tokens)
    first, second, third, last = lat.stage_times_s(tokens, 1, iteration_s)
    assert first + second + third + last == pytest.approx(iteration_s, rel=1e-12)
    # Middle stages are a quarter of the layers plus a send; stage 0 adds the CPU overhead and
    # the embedding; the last has no send but the LM head (one logit row for a prefill).
    send_s = link_efficiency("a100").send_recv_time_s(tokens * 5120 * 2, gpu)
    embedding_s = float(compute_efficiency("a100").embedding_time_s(2 * tokens * 5120 * 2, gpu))
    eff = compute_efficiency("a100")
    head_s = float(eff.linear_time_s(gemm_flops(1, 5120, 32000), gemm_bytes(1, 5120, 32000, 2), gpu))
    assert second == third
    assert first - second == pytest.approx(VIDUR_CPU_S + embedding_s, rel=1e-9)
    assert last - (second - send_s) == pytest.approx(head_s, rel=1e-9)
    layers_s = iteration_s - VIDUR_CPU_S - embedding_s - 3 * send_s - head_s
    assert second - send_s == pytest.approx(layers_s / 4, rel=1e-9)
    one = latency_model("A100-80GB", "Llama-2-13B", engine=VIDUR)
    assert one.stage_times_s(tokens, 1, one.prefill_time_s(tokens)) == (one.prefill_time_s(tokens),)
    with pytest.raises(ValueError, match="iteration_s"):
        lat.stage_times_s(tokens, 1, 1e-6)


def test_cpu_time_is_the_engines_and_a_knob_replaces_it(a100_7b):
    assert a100_7b.cpu_s(1) == a100_7b.cpu_s(64) == cpu_overhead_s() == pytest.approx(VIDUR_CPU_S, rel=1e-12)
    none = latency_model("A100-80GB", "Llama-2-7B", engine=VIDUR, cpu_overhead_s=0.0)
    assert none is not a100_7b
    assert a100_7b.decode_time_s(8, 4096) - none.decode_time_s(8, 4096) == pytest.approx(VIDUR_CPU_S, rel=1e-9)
    assert a100_7b.prefill_time_s(512) - none.prefill_time_s(512) == pytest.approx(VIDUR_CPU_S, rel=1e-9)
    current = latency_model("H100-80GB", "Llama-3.1-8B")
    engine = get_engine("vllm-v1")
    bare = latency_model("H100-80GB", "Llama-3.1-8B", cpu_overhead_s=0.0)
    # A decode iteration of 8 sequences and a lone prefill (one sequence) pay the engine's CPU time.
    assert current.decode_time_s(8, 4096) - bare.decode_time_s(8, 4096) == pytest.approx(engine.cpu_s(8), rel=1e-9)
    assert current.prefill_time_s(512) - bare.prefill_time_s(512) == pytest.approx(engine.cpu_s(1), rel=1e-9)
    for bad in (-1e-3, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="cpu_overhead_s="):
            IterationLatencyModel("A100-80GB", "Llama-2-7B", cpu_overhead_s=bad)


def test_gpu_without_profile_scales_with_its_own_peaks():
    # H20 borrows the h100 efficiencies: prefill is compute-bound, and it has 148 vs 989 TFLOP/s.
    h20 = latency_model("H20-NVL", "Llama-2-7B").prefill_time_s(4096)
    h100 = latency_model("H100-80GB", "Llama-2-7B").prefill_time_s(4096)
    assert 3.0 < h20 / h100 < 989 / 148
    # Decode at batch 1 reads weights: H20 has more bandwidth (4000 vs 3350 GB/s).
    assert latency_model("H20-NVL", "Llama-2-7B").decode_time_s(1, 1024) < latency_model(
        "H100-80GB", "Llama-2-7B"
    ).decode_time_s(1, 1024)


def test_kv_capacity_of_llama2_7b_on_a100_by_hand():
    # 80 GiB: 0.9 * 85,899,345,920 = 77,309,411,328 bytes, less 13,476,831,232 of weights and
    # 152,043,520 of activations = 63,680,536,576 bytes = 121,460.5 tokens of 524,288 bytes.
    free = 0.9 * 80 * 2**30 - LLAMA2_7B_FP16_WEIGHT_BYTES - 2048 * (4096 + 3 * 11008) * 2
    assert free == 63_680_536_576
    assert kv_capacity_tokens("A100-80GB", "Llama-2-7B") == math.floor(free / LLAMA2_7B_KV_BYTES_PER_TOKEN)
    assert kv_capacity_tokens("A100-80GB", "Llama-2-7B") == 121_460
    # TP2: each GPU holds half of every token's KV.
    weights_tp2 = weights_per_gpu_bytes(get_model("Llama-2-7B"), 2)
    free_tp2 = 0.9 * 80 * 2**30 - weights_tp2 - 2048 * (4096 + 3 * 11008 / 2) * 2
    expected_tp2 = math.floor(free_tp2 / (LLAMA2_7B_KV_BYTES_PER_TOKEN / 2))
    assert kv_capacity_tokens("A100-80GB", "Llama-2-7B", tp=2) == expected_tp2


def test_kv_capacity_raises_when_weights_do_not_fit():
    with pytest.raises(ValueError, match="Llama-2-70B"):
        kv_capacity_tokens("A100-80GB", "Llama-2-70B", tp=1)


def test_kv_transfer_and_weight_load_by_hand():
    assert kv_transfer_time_s("Llama-2-7B", 1000, 50.0) == pytest.approx(1000 * 524_288 / 50e9, rel=1e-12)
    with_latency_s = kv_transfer_time_s("Llama-2-7B", 1000, 50.0, latency_s=1e-3)
    assert with_latency_s == pytest.approx(1e-3 + 0.01048576, rel=1e-12)
    load_s = weight_load_time_s("Llama-2-7B", "A100-80GB")
    assert load_s == pytest.approx(LLAMA2_7B_FP16_WEIGHT_BYTES / 32e9, rel=1e-12)
    per_gpu = weights_per_gpu_bytes(get_model("Llama-2-70B"), 4)
    assert weight_load_time_s("Llama-2-70B", "H100-80GB", tp=4) == pytest.approx(per_gpu / 64e9, rel=1e-12)


def test_kv_transfer_and_weight_load_take_every_value_their_bounds_allow_and_name_the_others():
    """One token and links slower than 1 GB/s are valid; 0 tokens, a 0 GB/s link and a negative
    latency are refused naming the argument; the weights' dtype sets the bytes loaded (fp8: one
    byte per linear weight, fp16 two)."""
    assert kv_transfer_time_s("Llama-2-7B", 1, 0.5) == 524_288 / 0.5e9
    for kwargs, named in (({"tokens": 0}, "tokens=0 must be an integer >= 1"),
                          ({"link_gbps": 0.0}, "link_gbps=0.0 must be a finite number > 0.0"),
                          ({"latency_s": -1e-3}, "latency_s=-0.001 must be a finite number >= 0.0")):
        with pytest.raises(ValueError, match=f"^{named}$"):
            kv_transfer_time_s("Llama-2-7B", **{"tokens": 1, "link_gbps": 50.0, **kwargs})
    model = get_model("Llama-2-7B")
    assert weight_load_time_s(model, "A100-80GB", dtype="fp8") == weights_per_gpu_bytes(model, 1, 1, "fp8") / 32e9
    assert weights_per_gpu_bytes(model, 1, 1, "fp8") < weights_per_gpu_bytes(model, 1, 1, "fp16")


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True, float("nan"), "8"])
def test_bad_batch_size_raises(a100_7b, batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        a100_7b.decode_coefficients(batch_size)
    with pytest.raises(ValueError, match="batch_size"):
        a100_7b.decode_time_s(batch_size, 100)


@pytest.mark.parametrize(
    "args, name",
    [
        ((-1, 0, 1, 10), "prefill_tokens"),
        ((10.0, 55, 0, 0), "prefill_tokens"),
        ((10, float("nan"), 0, 0), "prefill_attention_pairs"),
        ((10, 5, 0, 0), "prefill_attention_pairs"),
        ((0, 3, 1, 10), "prefill_attention_pairs"),
        ((0, 0, 0, 0), "empty iteration"),
        ((0, 0, 2, -5), "decode_context_tokens"),
        ((10, 55, 0, 7), "decode_context_tokens"),
    ],
)
def test_bad_iteration_inputs_raise(a100_7b, args, name):
    with pytest.raises(ValueError, match=name):
        a100_7b.iteration_time_s(*args)


def test_bad_configuration_raises():
    with pytest.raises(ValueError, match="tp=3"):
        IterationLatencyModel("A100-80GB", "Llama-2-7B", tp=3)
    with pytest.raises(ValueError, match="tp=0"):
        IterationLatencyModel("A100-80GB", "Llama-2-7B", tp=0)
    with pytest.raises(ValueError, match="pp=33"):
        IterationLatencyModel("A100-80GB", "Llama-2-7B", pp=33)
    with pytest.raises(ValueError, match="int8"):
        IterationLatencyModel("A100-80GB", "Llama-2-7B", dtype="int8")
    with pytest.raises(ValueError, match="unknown engine 'vllm-0.1'; known: .*vllm-v1"):
        IterationLatencyModel("A100-80GB", "Llama-2-7B", engine="vllm-0.1")
    with pytest.raises(ValueError, match="known: .*A100-80GB"):
        IterationLatencyModel("A200", "Llama-2-7B")
    with pytest.raises(ValueError, match="known: .*Llama-2-7B"):
        IterationLatencyModel("A100-80GB", "Llama-9")
    with pytest.raises(ValueError, match="pp=0"):
        pp_bubble_fraction(0)
    with pytest.raises(ValueError, match="tokens=0"):
        kv_transfer_time_s("Llama-2-7B", 0, 50.0)
    with pytest.raises(ValueError, match="link_gbps"):
        kv_transfer_time_s("Llama-2-7B", 10, 0.0)
    with pytest.raises(ValueError, match="latency_s"):
        kv_transfer_time_s("Llama-2-7B", 10, 50.0, latency_s=float("nan"))
    with pytest.raises(ValueError, match="tokens"):
        latency_model("A100-80GB", "Llama-2-7B").prefill_time_s(0)
