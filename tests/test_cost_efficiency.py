"""Cauchy cost-efficiency model (Cauchy Sec. 3.2, eqs. 1-15) against hand-computed numbers."""

from __future__ import annotations

import pytest

from hardware.cost_efficiency import (
    cauchy_coefficients,
    cost_efficiency_tokens_per_usd,
    decode_bytes,
    decode_throughput_tokens_per_s,
    decode_time_s,
    prefill_throughput_tokens_per_s,
    prefill_time_s,
    workload_coefficients,
)
from hardware.gpus import get_gpu
from hardware.models import get_model

# ShareGPT means, Cauchy Sec. 4.1.
R_IN, R_OUT, BATCH = 290, 207, 32

# Llama-3.1-8B (l=32, h=4096, i=14336, v=128256, k=8, s=128, d=2), worked by hand:
C1 = 524_288  # 4*32*4096
C2 = 15_569_256_448  # 8*32*4096^2 = 4_294_967_296 plus 6*32*4096*14336 = 11_274_289_152
C3 = 17_671_127_040  # 2*(2*128256*4096 + (4*4096^2 + 3*4096*14336 + 2*4096)*32)
C4 = 131_072  # 2*2*32*8*128
PREFILL_DENOMINATOR = 15_721_299_968  # C1*290 + C2
DECODE_DENOMINATOR = 603_799_552  # C4*207/2 + C4*290 + C3/32 = 13_565_952 + 38_010_880 + 552_222_720
H800_PREFILL_TOKENS_PER_S = 989e12 / PREFILL_DENOMINATOR
H20_DECODE_TOKENS_PER_S = 4000e9 / DECODE_DENOMINATOR

LLAMA = get_model("Llama-3.1-8B")
H800 = get_gpu("H800-SXM")
H20 = get_gpu("H20-NVL")


def test_coefficients_eqs_1_2_6_7():
    c = cauchy_coefficients(LLAMA)
    assert (c.c1, c.c2, c.c3, c.c4) == (C1, C2, C3, C4)


def test_prefill_throughput_eq_5():
    assert prefill_throughput_tokens_per_s(LLAMA, H800, R_IN) == pytest.approx(H800_PREFILL_TOKENS_PER_S, rel=1e-12)
    assert H800_PREFILL_TOKENS_PER_S == pytest.approx(62_908.28, rel=1e-6)


def test_decode_throughput_eq_11():
    got = decode_throughput_tokens_per_s(LLAMA, H20, R_IN, R_OUT, BATCH)
    assert got == pytest.approx(H20_DECODE_TOKENS_PER_S, rel=1e-12)
    assert H20_DECODE_TOKENS_PER_S == pytest.approx(6_624.72, rel=1e-6)


def test_cost_efficiency_eq_15_h800_prefill_h20_decode():
    expected = H800_PREFILL_TOKENS_PER_S / (2.69 / 3600) + H20_DECODE_TOKENS_PER_S / (1.50 / 3600)
    got = cost_efficiency_tokens_per_usd(LLAMA, H800, H20, R_IN, R_OUT, BATCH)
    assert got == pytest.approx(expected, rel=1e-9)
    a1, a2 = workload_coefficients(LLAMA, R_IN, R_OUT, BATCH)
    assert (a1, a2) == (pytest.approx(1 / PREFILL_DENOMINATOR, rel=1e-12), pytest.approx(1 / DECODE_DENOMINATOR, rel=1e-12))
    eq_15 = a1 * 989e12 / (2.69 / 3600) + a2 * 4000e9 / (1.50 / 3600)
    assert got == pytest.approx(eq_15, rel=1e-9)


def test_gpu_counts_scale_throughput_but_cancel_in_cost_efficiency():
    assert prefill_throughput_tokens_per_s(LLAMA, H800, R_IN, num_gpus=2) == pytest.approx(
        2 * H800_PREFILL_TOKENS_PER_S, rel=1e-12
    )
    one = cost_efficiency_tokens_per_usd(LLAMA, H800, H20, R_IN, R_OUT, BATCH)
    more = cost_efficiency_tokens_per_usd(LLAMA, H800, H20, R_IN, R_OUT, BATCH, num_prefill_gpus=2, num_decode_gpus=6)
    assert more == pytest.approx(one, rel=1e-12)


def test_closed_forms_equal_tokens_over_time_eqs_4_and_10():
    prefill_s = prefill_time_s(LLAMA, H800, R_IN, BATCH)
    assert prefill_s == pytest.approx(BATCH * (C1 * R_IN**2 + C2 * R_IN) / 989e12, rel=1e-12)
    assert BATCH * R_IN / prefill_s == pytest.approx(prefill_throughput_tokens_per_s(LLAMA, H800, R_IN), rel=1e-12)
    decode_s = decode_time_s(LLAMA, H20, R_IN, R_OUT, BATCH)
    assert BATCH * R_OUT / decode_s == pytest.approx(
        decode_throughput_tokens_per_s(LLAMA, H20, R_IN, R_OUT, BATCH), rel=1e-12
    )


def test_decode_bytes_eq_9_equals_the_sum_of_eq_8():
    summed = sum(C3 + BATCH * C4 * (R_IN + j) for j in range(R_OUT))
    # Eq. 9 is the paper's continuous form: the discrete sum of eq. 8 differs by B*C4*R_out/2.
    assert decode_bytes(LLAMA, R_IN, R_OUT, BATCH) == pytest.approx(summed + BATCH * C4 * R_OUT / 2, rel=1e-12)


def test_relative_advantage_h800_prefill_h20_decode_beats_every_other_pairing():
    ce = {
        (p, d): cost_efficiency_tokens_per_usd(LLAMA, get_gpu(p), get_gpu(d), R_IN, R_OUT, BATCH)
        for p in ("H800-SXM", "H20-NVL")
        for d in ("H800-SXM", "H20-NVL")
    }
    best = ce[("H800-SXM", "H20-NVL")]
    assert all(best > value for pair, value in ce.items() if pair != ("H800-SXM", "H20-NVL"))


def test_longer_outputs_lower_decode_workload_coefficient():
    _, short = workload_coefficients(LLAMA, R_IN, 100, BATCH)
    _, long = workload_coefficients(LLAMA, R_IN, 4000, BATCH)
    assert long < short


def test_qwen15_14b_coefficients():
    # l=40, h=5120, i=13696, v=152064, k=40, s=128.
    c = cauchy_coefficients(get_model("Qwen1.5-14B"))
    assert c.c1 == 819_200
    assert c.c2 == 8 * 40 * 5120**2 + 6 * 40 * 5120 * 13696
    assert c.c4 == 819_200


@pytest.mark.parametrize(
    "name, reason",
    [("DeepSeek-R1-671B", "MoE, MLA attention"), ("Phi-2", "non-gated MLP"), ("BERT-base", "encoder-only")],
)
def test_models_outside_the_formulas_are_rejected(name, reason):
    with pytest.raises(ValueError, match=reason):
        cauchy_coefficients(get_model(name))


@pytest.mark.parametrize("bad", [float("nan"), -1.0, 0.0, float("inf"), True])
def test_bad_token_counts_raise(bad):
    with pytest.raises(ValueError, match="input_tokens"):
        prefill_throughput_tokens_per_s(LLAMA, H800, bad)
    with pytest.raises(ValueError, match="output_tokens"):
        decode_throughput_tokens_per_s(LLAMA, H20, R_IN, bad, BATCH)


@pytest.mark.parametrize("bad", [0, -4, 2.5, float("nan"), True])
def test_bad_batch_or_gpu_count_raises(bad):
    with pytest.raises(ValueError, match="batch_size"):
        workload_coefficients(LLAMA, R_IN, R_OUT, bad)
    with pytest.raises(ValueError, match="num_prefill_gpus|num_gpus"):
        cost_efficiency_tokens_per_usd(LLAMA, H800, H20, R_IN, R_OUT, BATCH, num_prefill_gpus=bad)


def test_bad_dtype_bytes_raises():
    with pytest.raises(ValueError, match="dtype_bytes"):
        cauchy_coefficients(LLAMA, dtype_bytes=float("nan"))
