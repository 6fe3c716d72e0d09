"""Kernel-efficiency sets: the fits to servegym's 2026 kernel profiles and how the latency model
uses them (FP8, grouped and int4 MoE GEMMs, PCIe collectives)."""

from __future__ import annotations

import csv

import pytest

from hardware.gpus import get_gpu
from hardware.kernel_sets import KERNEL_DIR, fit_marlin_moe, fit_measured, kernel_efficiency
from hardware.latency import IterationLatencyModel
from hardware.models import INT4_BYTES_PER_LINEAR_WEIGHT
from hardware.profiles import attention_calibration, compute_efficiency, link_efficiency


def test_vidur_2024_is_exactly_the_fits_to_vidurs_profiles():
    for family in ("a100", "a40", "h100"):
        kernels = kernel_efficiency("vidur-2024", family)
        assert kernels.compute == compute_efficiency(family) and kernels.links == link_efficiency(family)
        assert kernels.attention == attention_calibration()
        assert (kernels.fp8, kernels.grouped_gemm, kernels.int4_grouped_gemm) == (None, None, None)


def test_measured_fits_hold_out_whole_models_and_stay_accurate_on_them():
    fit = fit_measured("h100")
    errors = {e.what: e for e in fit.errors}
    assert errors["bf16 GEMM"].held_out_rows > 1000 and errors["bf16 GEMM"].held_out_mape < 0.08
    assert errors["FP8 GEMM"].held_out_mape < 0.08
    assert errors["decode attention"].held_out_mape < 0.15 and errors["prefill attention"].held_out_mape < 0.2
    # Physical ranges: fractions of the H100's catalog peaks, launch costs of a few microseconds.
    assert 0.6 < fit.gemm.compute_fraction < 0.9 and 0.7 < fit.gemm.memory_fraction < 0.95
    assert 1e-6 < fit.gemm.overhead_s < 1e-5 and fit.fp8.peak_over_fp16 == 2.0


def test_marlin_moe_fit_reproduces_the_published_kernel_timings():
    efficiency, gpu = fit_marlin_moe(), get_gpu("H20-NVL")
    with open(KERNEL_DIR / "marlin_moe_H20.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            t, e, h, w, k = (float(row[key]) for key in ("tokens", "experts", "hidden", "expert_intermediate", "top_k"))
            hit = e * (1 - (1 - k / e) ** t)  # expected distinct experts of t tokens choosing k of e
            weights = hit * h * 3 * w * INT4_BYTES_PER_LINEAR_WEIGHT
            activations = 2 * t * k * (h + 3 * w) - 2 * t * k * h
            flops = 2 * t * k * h * 3 * w
            predicted = max(flops / (gpu.fp16_tflops * 1e12 * efficiency.compute_fraction),
                            (weights + activations) / (gpu.mem_bandwidth_gbps * 1e9 * efficiency.memory_fraction))
            assert predicted + 2 * efficiency.overhead_s == pytest.approx(float(row["seconds"]), rel=0.01)


def test_int4_routed_experts_cost_more_than_bf16_grouped_gemms_would_at_the_same_bytes():
    current = IterationLatencyModel("H100-80GB", "DeepSeek-R1-671B", tp=8, dtype="int4", cpu_overhead_s=0.0)
    old = IterationLatencyModel("H100-80GB", "DeepSeek-R1-671B", tp=8, dtype="int4", engine="vidur-2024",
                                cpu_overhead_s=0.0)
    routed = [g for _, gemms, _ in current._layer_kinds for g in gemms if g.experts > 1]
    assert len(routed) == 2
    # At 64 tokens the routed experts stream 222 of 256 experts' int4 weights at 43 % of the
    # bandwidth: each GEMM's time is its bytes at that share plus the per-GEMM call overhead.
    marlin, gpu = fit_marlin_moe(), get_gpu("H100-80GB")
    for gemm in routed:
        expected = gemm.moved_bytes(64) / (gpu.mem_bandwidth_gbps * 1e9 * marlin.memory_fraction) + marlin.overhead_s
        assert current._linear_s(gemm, 64) == pytest.approx(expected, rel=1e-12)
    assert current.decode_time_s(64, 64 * 1000) > old.decode_time_s(64, 64 * 1000) - old.cpu_s(64)


def test_pcie_gpus_move_the_nvlink_share_of_their_link_under_measured_kernels():
    pcie = kernel_efficiency("measured-2026", "a40")
    assert pcie.links == link_efficiency("h100")
    assert pcie.compute == compute_efficiency("a40")  # no 2026 profile of the GDDR family
    assert kernel_efficiency("vidur-2024", "a40").links == link_efficiency("a40")
    two = IterationLatencyModel("L40S", "Llama-3.1-8B", tp=2, cpu_overhead_s=0.0)
    gpu = get_gpu("L40S")
    expected = link_efficiency("h100").all_reduce_latency_s + 2048 * 4096 * 2 / (
        gpu.intra_node_link_gbps * 1e9 * link_efficiency("h100").all_reduce_bandwidth_fraction)
    assert two._links.all_reduce_time_s(2048 * 4096 * 2, 2, gpu) == pytest.approx(expected, rel=1e-12)


def test_fp8_gemms_run_at_the_fp8_rate_on_hopper_and_weight_only_elsewhere():
    gpu = get_gpu("H100-80GB")
    fp8 = IterationLatencyModel(gpu, "Llama-3.1-70B", tp=4, dtype="fp8", cpu_overhead_s=0.0)
    gemm = fp8._layer_kinds[0][1][2]  # MLP up + gate
    efficiency = fit_measured("h100").fp8
    flops, moved = gemm.flops(4096), gemm.moved_bytes(4096)
    assert fp8._linear_s(gemm, 4096) == pytest.approx(efficiency.time_s(flops, moved, gpu), rel=1e-12)
    assert flops / (gpu.fp16_tflops * 1e12 * 2 * efficiency.compute_fraction) > moved / (
        gpu.mem_bandwidth_gbps * 1e9 * efficiency.memory_fraction)  # 4,096 tokens: compute-bound
    a100 = IterationLatencyModel("A100-80GB", "Llama-3.1-70B", tp=4, dtype="fp8", cpu_overhead_s=0.0)
    bf16 = IterationLatencyModel("A100-80GB", "Llama-3.1-70B", tp=4, cpu_overhead_s=0.0)
    assert a100.decode_time_s(1, 1000) < bf16.decode_time_s(1, 1000)  # half the weight bytes
    assert a100.prefill_time_s(4096) == pytest.approx(bf16.prefill_time_s(4096), rel=0.02)  # fp16 compute

