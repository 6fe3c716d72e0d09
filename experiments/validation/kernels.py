"""Kernel-level checks of the ``measured-2026`` fits: a held-out GPU, whole forward passes, and
how today's H100 GEMMs compare with Vidur's 2024 profile.

* H200 (profiled, never fitted): every measured op predicted with the H100 fits and the H200's
  own catalog peaks, as the simulator treats any Hopper GPU without a fit of its own;
* whole forward passes (``model_forward.csv``): the latency model's GPU time of the same
  iteration (no CPU time; the TP4 rank without its all-reduces) against the measured forward;
* Vidur 2024 vs 2026: the summed QKV/O/MLP GEMM time of the same shapes on H100.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.gpus import get_gpu
from hardware.kernel_sets import (
    HELD_OUT_GPU,
    decode_points,
    gemm_points,
    moe_points,
    predict_gemms,
    prefill_points,
    read_profile,
    fit_measured,
)
from hardware.latency import IterationLatencyModel
from hardware.profiles import load_compute_profile

FORWARD_MODELS = {"Llama-3.1-8B": ("Llama-3.1-8B", 1), "Llama-3.1-70B/tp4-rank": ("Llama-3.1-70B", 4)}
"""Profiled forward pass -> (catalog model, TP degree whose per-GPU share it is)."""


@dataclass(frozen=True)
class OpError:
    """Relative error of one op class on one GPU."""

    what: str
    gpu: str
    rows: int
    mape: float
    worst: float


def _errors(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    relative = np.abs(predicted / measured - 1.0)
    return float(relative.mean()), float(relative.max())


def held_out_gpu_errors() -> list[OpError]:
    """The H100 fits on the H200's measured ops (bf16, FP8 and grouped GEMMs; attention)."""
    fit, gpu = fit_measured("h100"), get_gpu(HELD_OUT_GPU)
    rows = []
    for what, points, efficiency in (("bf16 GEMM", gemm_points(HELD_OUT_GPU, "bf16"), fit.gemm),
                                     ("FP8 GEMM", gemm_points(HELD_OUT_GPU, "fp8"), fit.fp8),
                                     ("grouped expert GEMM", moe_points(HELD_OUT_GPU), fit.grouped_gemm)):
        rows.append(OpError(what, gpu.name, len(points["seconds"]),
                            *_errors(predict_gemms(points, efficiency, gpu), points["seconds"])))
    attention, bandwidth, peak = fit.attention, gpu.mem_bandwidth_gbps * 1e9, gpu.fp16_tflops * 1e12
    decode = decode_points(HELD_OUT_GPU)
    predicted = (attention.decode_fixed_s + attention.decode_per_sequence_s * decode["batch"]
                 + decode["kv_bytes"] / (bandwidth * attention.decode_kv_memory_fraction))
    rows.append(OpError("decode attention", gpu.name, len(predicted), *_errors(predicted, decode["seconds"])))
    prefill = prefill_points(HELD_OUT_GPU)
    predicted = attention.prefill_fixed_s + prefill["flops"] / (peak * attention.prefill_compute_fraction)
    rows.append(OpError("prefill attention", gpu.name, len(predicted), *_errors(predicted, prefill["seconds"])))
    return rows


@dataclass(frozen=True)
class ForwardCheck:
    gpu: str
    model: str
    phase: str
    batch: int
    tokens: int
    context: int
    measured_ms: float
    predicted_ms: float

    @property
    def error(self) -> float:
        return self.predicted_ms / self.measured_ms - 1.0


def forward_checks() -> list[ForwardCheck]:
    """Every profiled whole forward pass on the H100 and the H200 against the latency model."""
    checks = []
    for gpu in ("H100-80GB", HELD_OUT_GPU):
        data = read_profile(gpu, "model_forward.csv")
        for index in range(len(data["seconds"])):
            model, tp = FORWARD_MODELS[str(data["model"][index])]
            latency = IterationLatencyModel(gpu, model, tp=tp, engine="vllm-v1", cpu_overhead_s=0.0)
            batch, tokens, context = (int(data[k][index]) for k in ("batch", "tokens", "context"))
            phase = str(data["phase"][index])
            if phase == "decode":
                predicted_s = latency.decode_time_s(batch, batch * context)
            else:
                predicted_s = latency.prefill_time_s(tokens)
            if tp > 1:
                hidden_bytes = (batch if phase == "decode" else tokens) * latency.model.hidden_size * 2
                predicted_s -= 2 * latency.model.num_layers * latency._links.all_reduce_time_s(
                    hidden_bytes, tp, latency.gpu)
            checks.append(ForwardCheck(gpu, str(data["model"][index]), phase, batch, tokens, context,
                                       float(data["seconds"][index]) * 1e3, predicted_s * 1e3))
    return checks


@dataclass(frozen=True)
class VidurComparison:
    model: str
    tp: int
    tokens: int
    vidur_ms: float
    measured_2026_ms: float


VIDUR_NAMES = {"Llama-2-7B": "Llama-2-7B", "CodeLlama-34B": "CodeLlama-34B", "Llama-2-70B": "Llama-3.1-70B"}
"""Vidur's H100 profile model -> the 2026 profile's model of the same layer shapes."""


def vidur_comparison(tokens: tuple[int, ...] = (1, 64, 256, 1024, 4096)) -> list[VidurComparison]:
    """Summed QKV, O, MLP up and down GEMM time per layer, Vidur's 2024 H100 profile vs 2026."""
    vidur = load_compute_profile("h100")
    measured = read_profile("H100-80GB", "gemm_bf16.csv")
    ops = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
    rows = []
    for vidur_model, our_model in VIDUR_NAMES.items():
        for tp in (1, 2, 4):
            for count in tokens:
                row = (vidur.model == vidur_model) & (vidur.tp == tp) & (vidur.num_tokens == count)
                ours = ((measured["model"] == our_model) & (measured["tp"] == tp) & (measured["m"] == count)
                        & np.isin(measured["op"], ("qkv", "o", "gate_up", "down")))
                if row.sum() != 1 or ours.sum() != 4:
                    continue
                vidur_s = sum(float(vidur.op_s[op][row][0]) for op in ops)
                rows.append(VidurComparison(vidur_model, tp, count, vidur_s * 1e3,
                                            float(measured["seconds"][ours].sum()) * 1e3))
    return rows
