"""Cauchy's analytic throughput and cost-efficiency (Tokens/USD) model, Cauchy Sec. 3.2, eqs. (1)-(15).

Symbols (Cauchy Table 2): ``l`` layers, ``h`` hidden size, ``i`` intermediate size,
``v`` vocab size, ``k`` KV heads, ``s = h / n`` head size, ``d`` bytes per element of the
torch dtype, ``B`` batch size, ``R_in`` / ``R_out`` mean input / output tokens per request,
``GPU_n`` GPU count, ``GPU_f`` peak FLOP/s, ``GPU_b`` peak memory bandwidth (bytes/s),
``GPU_p`` price. Prefill is taken as compute-bound, decode as memory-bound.

The formulas assume a dense, gated-MLP (Llama-style) decoder, so MoE, MLA, non-gated and
encoder-only models are rejected rather than mis-modelled. Prices: the catalog's $/hour
over 3600 gives $/s, so throughput (tokens/s) over price ($/s) is tokens per USD — the unit
of Table 1, whose TFLOP/$ column is TFLOPS * 3600 / ($/hour).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from hardware.gpus import GPUSpec
from hardware.models import ModelSpec


@dataclass(frozen=True)
class CauchyCoefficients:
    """Model-dependent coefficients of Cauchy Sec. 3.2.

    Attributes:
        c1: quadratic attention FLOP coefficient ``4 l h`` (eq. 1), FLOPs per token^2.
        c2: linear FLOP coefficient ``8 l h^2 + 6 l h i`` (eq. 2), FLOPs per token.
        c3: static weight bytes read per decode step ``d (2 v h + (4 h^2 + 3 h i + 2 h) l)`` (eq. 6).
        c4: KV-cache bytes per token ``2 d l k s`` (eq. 7).
    """

    c1: float
    c2: float
    c3: float
    c4: float


def _check_positive_finite(label: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{label}={value!r} must be a positive finite number")


def _check_positive_int(label: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{label}={value!r} must be a positive integer")


def cauchy_coefficients(model: ModelSpec, dtype_bytes: float = 2.0) -> CauchyCoefficients:
    """C1..C4 of eqs. (1), (2), (6), (7) from the model's config; ``dtype_bytes`` is ``d`` (2 for fp16)."""
    unsupported = [
        reason
        for reason, applies in (
            ("MoE", model.is_moe),
            ("MLA attention", model.uses_mla),
            ("non-gated MLP", not model.gated_mlp),
            ("encoder-only", model.encoder_only),
        )
        if applies
    ]
    if unsupported:
        raise ValueError(
            f"Cauchy eqs. (1)-(15) model dense gated-MLP decoders; {model.name} is {', '.join(unsupported)}"
        )
    _check_positive_finite("dtype_bytes", dtype_bytes)
    l, h, i = model.num_layers, model.hidden_size, model.intermediate_size
    v, k, s = model.vocab_size, model.num_kv_heads, model.head_dim
    d = dtype_bytes
    return CauchyCoefficients(
        c1=4.0 * l * h,
        c2=8.0 * l * h**2 + 6.0 * l * h * i,
        c3=d * (2.0 * v * h + (4.0 * h**2 + 3.0 * h * i + 2.0 * h) * l),
        c4=2.0 * d * l * k * s,
    )


def prefill_time_s(
    model: ModelSpec, gpu: GPUSpec, input_tokens: float, batch_size: int, num_gpus: int = 1
) -> float:
    """Compute-bound prefill time ``B (C1 R_in^2 + C2 R_in) / (GPU_n GPU_f)``, eqs. (3)-(4)."""
    _check_positive_finite("input_tokens", input_tokens)
    _check_positive_int("batch_size", batch_size)
    _check_positive_int("num_gpus", num_gpus)
    c = cauchy_coefficients(model)
    flops = batch_size * (c.c1 * input_tokens**2 + c.c2 * input_tokens)
    return flops / (num_gpus * gpu.fp16_tflops * 1e12)


def prefill_throughput_tokens_per_s(
    model: ModelSpec, gpu: GPUSpec, input_tokens: float, num_gpus: int = 1
) -> float:
    """Input-token throughput ``S_prefill = GPU_n GPU_f / (C1 R_in + C2)``, eq. (5)."""
    _check_positive_finite("input_tokens", input_tokens)
    _check_positive_int("num_gpus", num_gpus)
    c = cauchy_coefficients(model)
    return num_gpus * gpu.fp16_tflops * 1e12 / (c.c1 * input_tokens + c.c2)


def decode_bytes(model: ModelSpec, input_tokens: float, output_tokens: float, batch_size: int) -> float:
    """Bytes read to decode ``R_out`` tokens for a batch: ``(C3 + B C4 R_in) R_out + B C4 R_out^2 / 2``, eq. (9).

    Eq. (9) is the paper's closed form of the sum in eq. (8); it exceeds the exact discrete
    sum by ``B C4 R_out / 2`` (KV of half a token per step), and eqs. (10)-(11) build on it.
    """
    _check_positive_finite("input_tokens", input_tokens)
    _check_positive_finite("output_tokens", output_tokens)
    _check_positive_int("batch_size", batch_size)
    c = cauchy_coefficients(model)
    return (c.c3 + batch_size * c.c4 * input_tokens) * output_tokens + 0.5 * batch_size * c.c4 * output_tokens**2


def decode_time_s(
    model: ModelSpec,
    gpu: GPUSpec,
    input_tokens: float,
    output_tokens: float,
    batch_size: int,
    num_gpus: int = 1,
) -> float:
    """Memory-bound decode time ``Byte_decode / (GPU_n GPU_b)``, eq. (10)."""
    _check_positive_int("num_gpus", num_gpus)
    return decode_bytes(model, input_tokens, output_tokens, batch_size) / (
        num_gpus * gpu.mem_bandwidth_gbps * 1e9
    )


def workload_coefficients(
    model: ModelSpec, input_tokens: float, output_tokens: float, batch_size: int
) -> tuple[float, float]:
    """``(A1, A2)``: prefill pattern ``1 / (C1 R_in + C2)`` (eq. 12) and decode pattern
    ``1 / (C4 R_out / 2 + C4 R_in + C3 / B)`` (eq. 13)."""
    _check_positive_finite("input_tokens", input_tokens)
    _check_positive_finite("output_tokens", output_tokens)
    _check_positive_int("batch_size", batch_size)
    c = cauchy_coefficients(model)
    a1 = 1.0 / (c.c1 * input_tokens + c.c2)
    a2 = 1.0 / (c.c4 * output_tokens / 2.0 + c.c4 * input_tokens + c.c3 / batch_size)
    return a1, a2


def decode_throughput_tokens_per_s(
    model: ModelSpec,
    gpu: GPUSpec,
    input_tokens: float,
    output_tokens: float,
    batch_size: int,
    num_gpus: int = 1,
) -> float:
    """Output-token throughput ``S_decode = GPU_n GPU_b / (C4 R_out / 2 + C4 R_in + C3 / B)``, eq. (11)."""
    _check_positive_int("num_gpus", num_gpus)
    _, a2 = workload_coefficients(model, input_tokens, output_tokens, batch_size)
    return num_gpus * gpu.mem_bandwidth_gbps * 1e9 * a2


def cost_efficiency_tokens_per_usd(
    model: ModelSpec,
    prefill_gpu: GPUSpec,
    decode_gpu: GPUSpec,
    input_tokens: float,
    output_tokens: float,
    batch_size: int,
    num_prefill_gpus: int = 1,
    num_decode_gpus: int = 1,
) -> float:
    """Cost-efficiency of a (prefill GPU, decode GPU) combo, tokens per USD, eq. (14).

    ``CE = S_prefill / (n_p p_p) + S_decode / (n_d p_d)``; the GPU counts cancel, giving
    eq. (15) ``A1 f_p / p_p + A2 b_d / p_d``. This is the paper's additive definition.
    """
    prefill_tokens_per_s = prefill_throughput_tokens_per_s(model, prefill_gpu, input_tokens, num_prefill_gpus)
    decode_tokens_per_s = decode_throughput_tokens_per_s(
        model, decode_gpu, input_tokens, output_tokens, batch_size, num_decode_gpus
    )
    return prefill_tokens_per_s / (num_prefill_gpus * prefill_gpu.price_per_second_usd) + (
        decode_tokens_per_s / (num_decode_gpus * decode_gpu.price_per_second_usd)
    )
