"""The roofline efficiencies fitted to the shipped Vidur profiles, and their held-out error."""

import dataclasses

import numpy as np
import pytest

from hardware.gpus import get_gpu
from hardware.latency import latency_model
from hardware.profiles import (
    HELD_OUT_MODEL,
    PROFILE_FAMILIES,
    PROFILED_GPU_BY_FAMILY,
    ComputeEfficiency,
    attention_calibration,
    cpu_overhead_s,
    fit_compute,
    fit_compute_profile,
    fit_links,
    gemm_bytes,
    gemm_flops,
    load_compute_profile,
    predict_profile_ops_s,
)

MAX_HELD_OUT_MAPE = 0.15


@pytest.mark.parametrize("family", PROFILE_FAMILIES)
def test_held_out_error_of_per_layer_time_is_within_15_percent(family):
    fit = fit_compute(family)
    eff = fit.efficiency
    print(
        f"\n{family}: held-out MAPE {fit.held_out_mape:.2%} on {fit.held_out_rows} rows "
        f"(train {fit.train_mape:.2%} on {fit.train_rows}); eta_compute {eff.compute_fraction:.3f}, "
        f"eta_memory {eff.memory_fraction:.3f}, c_linear {eff.linear_overhead_s * 1e6:.1f} us, "
        f"eta_elementwise {eff.elementwise_memory_fraction:.3f}, "
        f"eta_embedding {eff.embedding_memory_fraction:.3f}"
    )
    assert fit.held_out_rows > 1000 and fit.train_rows > 3000
    assert fit.held_out_mape <= MAX_HELD_OUT_MAPE


@pytest.mark.parametrize("family", PROFILE_FAMILIES)
def test_fitted_efficiencies_are_physical_fractions_of_catalog_peak(family):
    eff = fit_compute(family).efficiency
    fractions = (
        eff.compute_fraction,
        eff.memory_fraction,
        eff.elementwise_memory_fraction,
        eff.embedding_memory_fraction,
    )
    assert all(0.05 < fraction <= 1.0 for fraction in fractions)
    assert 0 <= eff.linear_overhead_s < 50e-6


def test_hold_out_split_excludes_a_whole_model_and_every_fifth_token_count():
    profile = load_compute_profile("a100")
    held = profile.held_out_mask()
    assert held[profile.model == HELD_OUT_MODEL].all()
    token_values = np.unique(profile.num_tokens)
    held_tokens = profile.num_tokens[held & (profile.model != HELD_OUT_MODEL)]
    assert set(np.unique(held_tokens)) == set(token_values[4::5])


def test_fit_recovers_known_efficiencies_from_synthetic_measurements():
    profile = load_compute_profile("h100")
    gpu = get_gpu(PROFILED_GPU_BY_FAMILY["h100"])
    known = ComputeEfficiency(0.6123, 0.8456, 8e-6, 0.5, 2e-6, 0.2, 3e-6)
    synthetic = dataclasses.replace(profile, op_s=predict_profile_ops_s(profile, known, gpu))
    fit = fit_compute_profile(synthetic, gpu)
    assert fit.efficiency.compute_fraction == pytest.approx(0.6123, abs=2e-3)
    assert fit.efficiency.memory_fraction == pytest.approx(0.8456, abs=2e-3)
    assert fit.efficiency.linear_overhead_s == pytest.approx(8e-6, rel=0.05)
    assert fit.efficiency.elementwise_memory_fraction == pytest.approx(0.5, rel=1e-6)
    assert fit.efficiency.embedding_overhead_s == pytest.approx(3e-6, rel=1e-6)
    assert fit.held_out_mape < 0.005


def test_roofline_of_one_gemm_by_hand():
    # 4096 tokens x (4096 x 4096) fp16 GEMM on an A100 (312 TFLOP/s, 2039 GB/s).
    eff = ComputeEfficiency(0.5, 0.8, 1e-5, 1.0, 0.0, 1.0, 0.0)
    gpu = get_gpu("A100-80GB")
    flops = gemm_flops(4096, 4096, 4096)
    moved = gemm_bytes(4096, 4096, 4096, 2.0)
    assert flops == 2 * 4096**3
    assert moved == 2 * 4096 * 4096 + 2 * 4096 * (4096 + 4096)
    compute_bound_s = 2 * 4096**3 / (312e12 * 0.5)
    assert eff.linear_time_s(flops, moved, gpu) == pytest.approx(compute_bound_s + 1e-5, rel=1e-12)
    # One token: weight-read bound.
    memory_bound_s = gemm_bytes(1, 4096, 4096, 2.0) / (2039e9 * 0.8)
    assert eff.linear_time_s(gemm_flops(1, 4096, 4096), gemm_bytes(1, 4096, 4096, 2.0), gpu) == pytest.approx(
        memory_bound_s + 1e-5, rel=1e-12
    )


@pytest.mark.parametrize("family", PROFILE_FAMILIES)
def test_collective_fits_match_measured_points(family):
    fit = fit_links(family)
    eff = fit.efficiency
    print(
        f"\n{family}: send/recv MAPE {fit.send_recv_mape:.2%}, all-reduce MAPE "
        f"{'n/a' if fit.all_reduce_mape is None else f'{fit.all_reduce_mape:.2%}'}; "
        f"all-reduce {eff.all_reduce_latency_s * 1e6:.1f} us + {eff.all_reduce_bandwidth_fraction:.3f} of link"
    )
    assert fit.send_recv_mape <= MAX_HELD_OUT_MAPE
    assert 0 < eff.send_recv_bandwidth_fraction <= 1.0 and 0 < eff.all_reduce_bandwidth_fraction <= 1.0
    if family == "a40":
        assert fit.all_reduce_mape is None
        assert eff.all_reduce_bandwidth_fraction == eff.send_recv_bandwidth_fraction
    else:
        assert fit.all_reduce_mape <= MAX_HELD_OUT_MAPE


def _vidur_attention_ms(phase, items, pairs):
    """The README's A100 / Llama-2-7b / TP1 per-layer attention fit."""
    if phase == "decode":
        return 0.0452 + 2.2e-4 * items + 8.3e-6 * pairs
    return 0.015 + 1.78e-4 * items + 1.2e-7 * pairs


@pytest.mark.parametrize("batch, kv_len", [(1, 128), (8, 1024), (32, 2048), (64, 4096)])
def test_decode_attention_reproduces_vidur_a100_fit(batch, kv_len):
    # The attention terms are calibrated from this very formula (the only attention data
    # shipped), so this checks the conversion through the catalog bandwidth and the model's
    # KV bytes per token, to 0.1 %.
    model = latency_model("A100-80GB", "Llama-2-7B")
    expected_s = _vidur_attention_ms("decode", batch, batch * kv_len) * 1e-3
    assert model.decode_attention_layer_s(batch, batch * kv_len) == pytest.approx(expected_s, rel=1e-3)


@pytest.mark.parametrize("chunk, kv_len", [(128, 0), (512, 1024), (2048, 2048)])
def test_prefill_attention_reproduces_vidur_a100_fit(chunk, kv_len):
    model = latency_model("A100-80GB", "Llama-2-7B")
    pairs = chunk * (kv_len + chunk / 2)
    expected_s = _vidur_attention_ms("prefill", chunk, pairs) * 1e-3
    assert model.prefill_attention_layer_s(chunk, pairs) == pytest.approx(expected_s, rel=1e-3)


def test_attention_calibration_in_hardware_terms():
    cal = attention_calibration()
    # Llama-2-7B: 2 x 32 heads x 128 dims x 2 bytes = 16384 KV bytes per token per layer.
    assert cal.decode_kv_memory_fraction == pytest.approx(16384 / (8.3e-9 * 2039e9), rel=1e-12)
    # 4 * 4096 FLOPs per query-key pair per layer.
    assert cal.prefill_compute_fraction == pytest.approx(4 * 4096 / (1.2e-10 * 312e12), rel=1e-12)


def test_cpu_overhead_is_vidur_smallest_batch_row():
    assert cpu_overhead_s() == pytest.approx((0.1648 + 0.8792 + 0.3521 + 1.587) * 1e-3, rel=1e-12)
