"""The kernel formulas have one implementation, the compiled core's (``core/src/kernels.hpp``):
the fitting code's numpy paths and the latency evaluator get the same doubles from it, and
those are the doubles of the formulas as written (checked bit for bit on grids)."""

from __future__ import annotations

import numpy as np
import pytest
from servegym_core import _core

from hardware.gpus import get_gpu
from hardware.kernel_sets import GemmEfficiency, fit_measured
from hardware.latency import IterationLatencyModel
from hardware.latency_coefficients import gemm
from hardware.profiles import ACTIVATION_BYTES, compute_efficiency, gemm_bytes, gemm_flops, link_efficiency

GPUS = ("A100-80GB", "H100-80GB", "L40S", "A10")
_rng = np.random.default_rng(43)
FLOPS = np.concatenate([[0.0, 1.0, 2.0**53], 10.0 ** _rng.uniform(3, 16, 500)])
BYTES = np.concatenate([[0.0, 1.0, 7.0], 10.0 ** _rng.uniform(2, 12, 500)])


def _bits(values) -> bytes:
    return np.asarray(values, dtype="<f8").tobytes()


@pytest.mark.parametrize("gpu_name", GPUS)
def test_roofline_and_streamed_times_are_the_written_formulas_bit_for_bit(gpu_name):
    gpu = get_gpu(gpu_name)
    eff = compute_efficiency(gpu.profile_family)
    compute_s = FLOPS / (gpu.fp16_tflops * 1e12 * eff.compute_fraction)
    memory_s = BYTES / (gpu.mem_bandwidth_gbps * 1e9 * eff.memory_fraction)
    written = np.maximum(compute_s, memory_s) + eff.linear_overhead_s
    assert _bits(eff.linear_time_s(FLOPS, BYTES, gpu)) == _bits(written)
    elementwise = eff.elementwise_overhead_s + BYTES / (gpu.mem_bandwidth_gbps * 1e9 * eff.elementwise_memory_fraction)
    assert _bits(eff.elementwise_time_s(BYTES, gpu)) == _bits(elementwise)
    embedding = eff.embedding_overhead_s + BYTES / (gpu.mem_bandwidth_gbps * 1e9 * eff.embedding_memory_fraction)
    assert _bits(eff.embedding_time_s(BYTES, gpu)) == _bits(embedding)
    links = link_efficiency(gpu.profile_family)
    for num_gpus in (2, 4, 8):
        moved = 2.0 * (num_gpus - 1) / num_gpus * BYTES
        all_reduce = links.all_reduce_latency_s + moved / (gpu.intra_node_link_gbps * 1e9 * links.all_reduce_bandwidth_fraction)
        assert _bits(links.all_reduce_time_s(BYTES, num_gpus, gpu)) == _bits(all_reduce)
    send = links.send_recv_latency_s + BYTES / (gpu.intra_node_link_gbps * 1e9 * links.send_recv_bandwidth_fraction)
    assert _bits(links.send_recv_time_s(BYTES, gpu)) == _bits(send)


def test_fp8_and_grouped_gemm_rooflines_scale_the_peak_before_the_fraction():
    gpu, fit = get_gpu("H100-80GB"), fit_measured("h100")
    for eff in (fit.fp8, fit.grouped_gemm, fit.int4_grouped_gemm):
        compute_s = FLOPS / (gpu.fp16_tflops * 1e12 * eff.peak_over_fp16 * eff.compute_fraction)
        memory_s = BYTES / (gpu.mem_bandwidth_gbps * 1e9 * eff.memory_fraction)
        assert _bits(eff.time_s(FLOPS, BYTES, gpu)) == _bits(np.maximum(compute_s, memory_s) + eff.overhead_s)
    assert fit.fp8.peak_over_fp16 == 2.0  # the factor matters: FP8 runs at twice the fp16 peak


def test_numbers_arrays_and_broadcasts_give_the_same_doubles():
    gpu, eff = get_gpu("A100-80GB"), compute_efficiency("a100")
    flops, moved = FLOPS[:40].reshape(10, 4), BYTES[:40].reshape(10, 4)
    as_array = eff.linear_time_s(flops, moved, gpu)
    assert as_array.shape == (10, 4)
    one_by_one = [eff.linear_time_s(float(f), float(b), gpu) for f, b in zip(flops.ravel(), moved.ravel())]
    assert all(type(v) is float for v in one_by_one)
    assert _bits(as_array.ravel()) == _bits(one_by_one)
    broadcast = eff.linear_time_s(flops, 1e6, gpu)
    assert _bits(broadcast) == _bits([eff.linear_time_s(float(f), 1e6, gpu) for f in flops.ravel()])
    with_nan = eff.elementwise_time_s(np.array([np.nan, 1e6]), gpu)  # ops a profiled model lacks stay NaN
    assert np.isnan(with_nan[0]) and with_nan[1] == eff.elementwise_time_s(1e6, gpu)
    grouped = GemmEfficiency(0.5, 0.5, 1e-6)
    assert _bits(grouped.time_s(FLOPS, BYTES, gpu)) == _bits([grouped.time_s(f, b, gpu) for f, b in zip(FLOPS, BYTES)])


def test_the_evaluators_dense_gemm_is_the_fitting_codes_gemm_flops_and_bytes():
    for tokens in (1, 2, 17, 512, 4096, 131072):
        for fan_in, fan_out, weight_bytes in ((4096, 6144, 2.0), (5120, 32000 / 4, 2.0), (8192, 3584.0, 0.5625)):
            dense = gemm(fan_in, fan_out, weight_bytes)
            assert dense.flops(tokens) == gemm_flops(tokens, fan_in, fan_out)
            assert dense.moved_bytes(tokens) == gemm_bytes(tokens, fan_in, fan_out, weight_bytes)
    assert ACTIVATION_BYTES == gemm(1, 1, 0.0).activation_bytes


def test_routed_experts_read_the_expected_number_of_distinct_experts():
    routed = gemm(7168, 2 * 256, 2.0, 256, 8)  # DeepSeek-R1's routed up+gate at tp 8
    for tokens in (1, 3, 64, 1000):
        hit = 256 * (1.0 - (1.0 - 8 / 256) ** tokens)
        expected = gemm_bytes(0, 7168, 512, 2.0) * hit + gemm_bytes(tokens * 8, 7168, 512, 0.0)
        assert routed.moved_bytes(tokens) == expected and routed.flops(tokens) == gemm_flops(tokens * 8, 7168, 512)
    with pytest.raises(ValueError, match="experts=4 is below experts_per_token=8"):
        _core.Gemm(1.0, 1.0, 2.0, 2.0, 4, 8)


def test_the_evaluator_runs_dense_gemms_at_the_fitted_roofline():
    latency = IterationLatencyModel("A100-80GB", "Llama-2-7B", cpu_overhead_s=0.0)
    eff, gpu = compute_efficiency("a100"), get_gpu("A100-80GB")
    for op in latency._layer_kinds[0][1]:
        for tokens in (1, 100, 4096):
            assert latency._linear_s(op, tokens) == eff.linear_time_s(op.flops(tokens), op.moved_bytes(tokens), gpu)
