"""Kernel-efficiency sets: how fast an engine's kernels run on each GPU family.

A set gives, per GPU, the operator model ``hardware/latency.py`` evaluates (roofline GEMMs,
memory-bound elementwise ops, attention, collectives, and the FP8 and grouped-MoE GEMMs):

* ``vidur-2024``: the fits to Vidur's 2024 operator profiles (``hardware.profiles``), with
  FP8 weights streamed at half the bytes and computed at the fp16 rate, and routed MoE experts
  at dense GEMM efficiency (what servegym did before kernel sets existed);
* ``measured-2026``: for Hopper GPUs (the ``h100`` family), fits to servegym's own kernel
  profiles of an H100 (``hardware/data/kernels``, ``python -m hardware.kernel_profiler``):
  cuBLAS bf16 GEMMs, FP8 GEMMs at the FP8 tensor-core rate, grouped expert GEMMs, attention
  at the faster of PyTorch's flash and cuDNN back-ends per point (standing for the
  FlashAttention-3 kernels vLLM runs on Hopper), elementwise ops from the in-graph copy curve
  (CUDA-graph launch cost), all measured inside CUDA graphs; and int4 routed experts at the
  efficiency of vLLM's fused Marlin MoE kernel, fitted to its published timings on an H20
  (``marlin_moe_H20.csv``: flagos-ai/FlagGems PR #3375, four DeepSeek-V3 and Mixtral shapes;
  43 % of the bandwidth on the experts it reads, 26 % of the fp16 peak, 36 us a call, against
  78 % and 65 % for bf16 grouped GEMMs). Other families keep the
  ``vidur-2024`` efficiencies: the H100 GEMMs of both profiles agree within 5-20 %
  (``docs/validation.md``), and no 2026 profile of those GPUs exists. Collectives keep Vidur's
  NCCL fits (one GPU per profiling machine), except that GPUs linked only by PCIe (the GDDR
  family) move the share of their link rate that Vidur's H100 profile moves over NVLink: Vidur's
  only fit for that family is of an A40 pair whose copies reached 7 % of the NVLink bridge's
  rate, i.e. went through host memory, which a PCIe peer-to-peer all-reduce does not.

Each measured fit holds out whole models (attention: whole head shapes) and reports its error
on them; the H200 profile is held out as a GPU (``measured_fit_report``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from servegym_core import _core

from hardware.gpus import GPUSpec, get_gpu
from hardware.models import INT4_BYTES_PER_LINEAR_WEIGHT
from hardware.profiles import (
    ACTIVATION_BYTES,
    ArrayOrFloat,
    AttentionCalibration,
    ComputeEfficiency,
    LinkEfficiency,
    attention_calibration,
    compiled_elementwise,
    compute_efficiency,
    fit_memory_bound,
    fit_roofline,
    gemm_bytes,
    gemm_flops,
    link_efficiency,
)

KERNEL_DIR = Path(__file__).parent / "data" / "kernels"

KERNEL_SETS = ("vidur-2024", "measured-2026")

MEASURED_GPU_BY_FAMILY = {"h100": "H100-80GB"}
"""The GPU whose 2026 profile a family's ``measured-2026`` efficiencies are fitted to."""

HELD_OUT_GPU = "H200"
"""Profiled, never fitted: the held-out GPU of the ``measured-2026`` fits."""

HELD_OUT_GEMM_MODELS = ("Qwen2.5-7B", "Qwen3-32B", "Llama-2-13B")
HELD_OUT_FP8_MODELS = ("Qwen2.5-32B",)
HELD_OUT_MOE_MODELS = ("Qwen3-30B-A3B",)
HELD_OUT_DECODE_HEADS = ((4, 7), (40, 1))
"""(KV heads, query heads per KV head) of the decode-attention shapes left out of the fit."""
HELD_OUT_PREFILL_HEADS = ((28, 4), (40, 8))
"""(query heads, KV heads) of the prefill-attention shapes left out of the fit."""

PCIE_FAMILIES = ("a40",)
"""Families whose GPUs talk over PCIe (A10, A40, L40S, RTX 4090, RTX PRO 6000)."""
PCIE_LINKS_FROM_FAMILY = "h100"
"""Whose collective fit (fractions of the link rate) PCIe GPUs take under ``measured-2026``."""

HEAD_DIM = 128
FP8_PEAK_OVER_FP16 = 2.0
"""Dense FP8 tensor throughput over dense fp16 on Hopper (H100 SXM: 1,979 vs 989 TFLOP/s)."""


@dataclass(frozen=True)
class GemmEfficiency:
    """Roofline GEMM efficiency: ``max(FLOPs / (peak * compute_fraction), bytes / (bandwidth *
    memory_fraction)) + overhead_s``; ``peak`` is the fp16 peak times ``peak_over_fp16``. The
    time is the compiled core's ``Roofline``, the formula the latency evaluator uses."""

    compute_fraction: float
    memory_fraction: float
    overhead_s: float
    peak_over_fp16: float = 1.0

    def time_s(self, flops: ArrayOrFloat, moved_bytes: ArrayOrFloat, gpu: GPUSpec) -> ArrayOrFloat:
        """The roofline time on ``gpu`` (elementwise on numpy arrays)."""
        kernel = _core.GemmKernel(self.compute_fraction, self.memory_fraction, self.overhead_s, self.peak_over_fp16)
        roofline = _core.Roofline(kernel, gpu.fp16_tflops, gpu.mem_bandwidth_gbps)
        return compiled_elementwise(roofline.time_s, roofline.times_s, flops, moved_bytes)


@dataclass(frozen=True)
class KernelEfficiency:
    """One kernel set's operator model on one GPU.

    ``fp8`` is None where FP8 runs weight-only (half the weight bytes, fp16 compute);
    ``grouped_gemm`` (``int4_grouped_gemm``: with int4 weights) is None where routed experts run
    at the dense GEMM efficiency; its overhead is per GEMM, two of them per MoE layer.
    """

    kernel_set: str
    fitted_on: str
    compute: ComputeEfficiency
    attention: AttentionCalibration
    links: LinkEfficiency
    fp8: GemmEfficiency | None
    grouped_gemm: GemmEfficiency | None
    int4_grouped_gemm: GemmEfficiency | None


def read_profile(gpu_dir: str, name: str) -> dict[str, np.ndarray]:
    """One profile CSV of ``hardware/data/kernels/<gpu_dir>`` as columns (numbers where they parse)."""
    with open(KERNEL_DIR / gpu_dir / name, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    columns: dict[str, np.ndarray] = {}
    for key in rows[0]:
        values = [row[key] for row in rows]
        try:
            columns[key] = np.array([float(v) for v in values])
        except ValueError:
            columns[key] = np.array(values)
    return columns


def _relative_errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return np.abs(predicted / measured - 1.0)


@dataclass(frozen=True)
class FitError:
    """Mean and worst relative error of one fit on its fitted and held-out rows."""

    what: str
    train_rows: int
    held_out_rows: int
    train_mape: float
    held_out_mape: float
    held_out_worst: float


def _fit_error(what: str, errors: np.ndarray, held_out: np.ndarray) -> FitError:
    return FitError(what, int((~held_out).sum()), int(held_out.sum()), float(errors[~held_out].mean()),
                    float(errors[held_out].mean()), float(errors[held_out].max()))


# --- GEMMs --------------------------------------------------------------------------------------


def gemm_points(gpu_dir: str, kind: str) -> dict[str, np.ndarray]:
    """Distinct (m, n, k) GEMMs of a profile, with FLOPs and moved bytes (``kind``: bf16 or fp8)."""
    if kind == "bf16":
        data = read_profile(gpu_dir, "gemm_bf16.csv")
        weight_bytes, rows = 2.0, data["m"]
    else:
        data = read_profile(gpu_dir, "gemm_quant.csv")
        keep = data["kind"] == "fp8"
        data = {key: value[keep] for key, value in data.items()}
        weight_bytes, rows = 1.0, data["m_run"]
    _, first = np.unique(np.stack([rows, data["n"], data["k"]], 1), axis=0, return_index=True)
    first.sort()
    points = {key: value[first] for key, value in data.items()}
    points["flops"] = gemm_flops(rows[first], points["k"], points["n"])
    points["bytes"] = gemm_bytes(rows[first], points["k"], points["n"], weight_bytes)
    return points


def _fit_gemm(points: dict[str, np.ndarray], held_out: np.ndarray, gpu: GPUSpec,
              peak_over_fp16: float) -> GemmEfficiency:
    train = ~held_out
    scaled_gpu = gpu if peak_over_fp16 == 1.0 else _scaled_peak(gpu, peak_over_fp16)
    compute, memory, overhead = fit_roofline(
        points["flops"][train, None], points["bytes"][train, None], points["seconds"][train], scaled_gpu
    )
    return GemmEfficiency(compute, memory, overhead, peak_over_fp16)


def _scaled_peak(gpu: GPUSpec, factor: float) -> GPUSpec:
    from dataclasses import replace

    return replace(gpu, fp16_tflops=gpu.fp16_tflops * factor)


def predict_gemms(points: dict[str, np.ndarray], efficiency: GemmEfficiency, gpu: GPUSpec) -> np.ndarray:
    return efficiency.time_s(points["flops"], points["bytes"], gpu)


# --- elementwise (the in-graph copy curve) ----------------------------------------------------


def _copy_curve(gpu_dir: str) -> tuple[np.ndarray, np.ndarray]:
    with open(KERNEL_DIR / gpu_dir / "env.json", encoding="utf-8") as handle:
        curve = np.array(json.load(handle)["copy_bytes_seconds"])
    return 2.0 * curve[:, 0], curve[:, 1]  # bytes read + written, seconds


# --- attention ---------------------------------------------------------------------------------


def _best_backend(data: dict[str, np.ndarray], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per shape, the faster of the profiled back-ends."""
    best: dict[tuple, int] = {}
    for index in range(len(data["seconds"])):
        key = tuple(data[k][index] for k in keys)
        if key not in best or data["seconds"][index] < data["seconds"][best[key]]:
            best[key] = index
    order = np.array(sorted(best.values()))
    return {key: value[order] for key, value in data.items()}


def decode_points(gpu_dir: str) -> dict[str, np.ndarray]:
    data = _best_backend(read_profile(gpu_dir, "attn_decode.csv"), ("kv_heads", "group", "batch", "context"))
    data["kv_bytes"] = 2 * data["batch"] * data["context"] * data["kv_heads"] * data["head_dim"] * ACTIVATION_BYTES
    return data


def prefill_points(gpu_dir: str) -> dict[str, np.ndarray]:
    data = _best_backend(read_profile(gpu_dir, "attn_prefill.csv"), ("q_heads", "kv_heads", "chunk", "kv_len", "causal"))
    chunk = data["chunk"]
    data["pairs"] = np.where(data["causal"] == 1, chunk * (chunk + 1) / 2, chunk * data["kv_len"])
    data["flops"] = 4.0 * data["q_heads"] * data["head_dim"] * data["pairs"]
    return data


def _held(data: dict[str, np.ndarray], columns: tuple[str, str], shapes: tuple[tuple[int, int], ...]) -> np.ndarray:
    pairs = set(shapes)
    return np.array([(int(a), int(b)) in pairs for a, b in zip(data[columns[0]], data[columns[1]])])


def _least_squares(design: np.ndarray, measured: np.ndarray, held_out: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising squared relative error on the fitted rows."""
    from scipy.optimize import nnls

    train = ~held_out
    coefficients, _ = nnls(design[train] / measured[train, None], np.ones(int(train.sum())))
    return coefficients


def _fit_attention(gpu_dir: str, gpu: GPUSpec) -> tuple[AttentionCalibration, FitError, FitError]:
    bandwidth, peak = gpu.mem_bandwidth_gbps * 1e9, gpu.fp16_tflops * 1e12
    decode = decode_points(gpu_dir)
    decode_held = _held(decode, ("kv_heads", "group"), HELD_OUT_DECODE_HEADS)
    decode_design = np.stack([np.ones_like(decode["batch"]), decode["batch"], decode["kv_bytes"] / bandwidth], 1)
    fixed_s, per_sequence_s, inverse_fraction = _least_squares(decode_design, decode["seconds"], decode_held)
    prefill = prefill_points(gpu_dir)
    prefill_held = _held(prefill, ("q_heads", "kv_heads"), HELD_OUT_PREFILL_HEADS)
    prefill_design = np.stack([np.ones_like(prefill["chunk"]), prefill["flops"] / peak], 1)
    prefill_fixed_s, inverse_compute = _least_squares(prefill_design, prefill["seconds"], prefill_held)
    calibration = AttentionCalibration(
        decode_fixed_s=float(fixed_s),
        decode_per_sequence_s=float(per_sequence_s),
        decode_kv_memory_fraction=float(1.0 / inverse_fraction),
        prefill_fixed_s=float(prefill_fixed_s),
        prefill_bytes_per_query_channel=0.0,
        prefill_compute_fraction=float(1.0 / inverse_compute),
    )
    decode_error = _fit_error(
        "decode attention",
        _relative_errors(decode_design @ np.array([fixed_s, per_sequence_s, inverse_fraction]), decode["seconds"]),
        decode_held,
    )
    prefill_error = _fit_error(
        "prefill attention",
        _relative_errors(prefill_design @ np.array([prefill_fixed_s, inverse_compute]), prefill["seconds"]),
        prefill_held,
    )
    return calibration, decode_error, prefill_error


# --- grouped expert GEMMs ----------------------------------------------------------------------


def moe_points(gpu_dir: str) -> dict[str, np.ndarray]:
    data = read_profile(gpu_dir, "moe_grouped.csv")
    data["flops"] = gemm_flops(data["routed_rows"], data["k"], data["n"])
    data["bytes"] = data["experts_hit"] * gemm_bytes(0, data["k"], data["n"], 2.0) + gemm_bytes(
        data["routed_rows"], data["k"], data["n"], 0.0
    )
    return data


# --- the fits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredFit:
    """The ``measured-2026`` efficiencies of one family and the error of each fit."""

    gpu: str
    gemm: GemmEfficiency
    elementwise_memory_fraction: float
    elementwise_overhead_s: float
    attention: AttentionCalibration
    fp8: GemmEfficiency
    grouped_gemm: GemmEfficiency
    int4_grouped_gemm: GemmEfficiency
    errors: tuple[FitError, ...]


@cache
def fit_measured(family: str) -> MeasuredFit:
    """Fit the ``measured-2026`` operator model of ``family`` to its measured GPU's profile."""
    gpu_name = MEASURED_GPU_BY_FAMILY[family]
    gpu = get_gpu(gpu_name)
    bf16 = gemm_points(gpu_name, "bf16")
    bf16_held = np.isin(bf16["model"], HELD_OUT_GEMM_MODELS)
    gemm = _fit_gemm(bf16, bf16_held, gpu, 1.0)
    fp8 = gemm_points(gpu_name, "fp8")
    fp8_held = np.isin(fp8["model"], HELD_OUT_FP8_MODELS)
    fp8_efficiency = _fit_gemm(fp8, fp8_held, gpu, FP8_PEAK_OVER_FP16)
    moe = moe_points(gpu_name)
    moe_held = np.isin(moe["model"], HELD_OUT_MOE_MODELS)
    grouped = _fit_gemm(moe, moe_held, gpu, 1.0)
    copy_bytes, copy_s = _copy_curve(gpu_name)
    elementwise_fraction, elementwise_overhead = fit_memory_bound(
        np.ones_like(copy_bytes), copy_bytes, copy_s, gpu, "copy"
    )
    attention, decode_error, prefill_error = _fit_attention(gpu_name, gpu)
    int4_grouped = fit_marlin_moe()
    errors = (
        _fit_error("bf16 GEMM", _relative_errors(predict_gemms(bf16, gemm, gpu), bf16["seconds"]), bf16_held),
        _fit_error("FP8 GEMM", _relative_errors(predict_gemms(fp8, fp8_efficiency, gpu), fp8["seconds"]), fp8_held),
        _fit_error("grouped expert GEMM", _relative_errors(predict_gemms(moe, grouped, gpu), moe["seconds"]),
                   moe_held),
        decode_error,
        prefill_error,
    )
    return MeasuredFit(gpu_name, gemm, elementwise_fraction, elementwise_overhead, attention, fp8_efficiency,
                       grouped, int4_grouped, errors)


MARLIN_MOE_GPU = "H20-NVL"


@cache
def fit_marlin_moe() -> GemmEfficiency:
    """Roofline efficiency of vLLM's fused Marlin MoE kernel (int4 routed experts, both GEMMs
    of a layer in one call) from its published H20 timings; the call's overhead is split over
    the two GEMMs the latency model charges."""
    with open(KERNEL_DIR / "marlin_moe_H20.csv", newline="", encoding="utf-8") as handle:
        rows = [{key: float(value) for key, value in row.items()} for row in csv.DictReader(handle)]
    tokens, experts, hidden, width, top_k = (np.array([r[k] for r in rows]) for k in
                                             ("tokens", "experts", "hidden", "expert_intermediate", "top_k"))
    hit = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    weights = hit * gemm_bytes(0, hidden, 3 * width, INT4_BYTES_PER_LINEAR_WEIGHT)
    activations = gemm_bytes(tokens * top_k, hidden, 3 * width, 0.0) - tokens * top_k * hidden * ACTIVATION_BYTES
    flops = gemm_flops(tokens * top_k, hidden, 3 * width)
    seconds = np.array([r["seconds"] for r in rows])
    compute, memory, overhead = fit_roofline(flops[:, None], (weights + activations)[:, None], seconds,
                                             get_gpu(MARLIN_MOE_GPU))
    return GemmEfficiency(compute, memory, overhead / 2)


@cache
def kernel_efficiency(kernel_set: str, family: str) -> KernelEfficiency:
    """The operator model of ``kernel_set`` for GPUs of ``family`` (``GPUSpec.profile_family``)."""
    if kernel_set not in KERNEL_SETS:
        raise ValueError(f"unknown kernel set {kernel_set!r}; known: {', '.join(KERNEL_SETS)}")
    links = link_efficiency(family)
    if kernel_set == "vidur-2024":
        return KernelEfficiency(
            kernel_set, f"Vidur 2024 {family} profile", compute_efficiency(family), attention_calibration(), links,
            None, None, None,
        )
    if family not in MEASURED_GPU_BY_FAMILY:
        pcie_links = link_efficiency(PCIE_LINKS_FROM_FAMILY) if family in PCIE_FAMILIES else links
        return KernelEfficiency(
            kernel_set, f"Vidur 2024 {family} profile", compute_efficiency(family), attention_calibration(),
            pcie_links, None, None, None,
        )
    fit = fit_measured(family)
    compute = ComputeEfficiency(
        compute_fraction=fit.gemm.compute_fraction,
        memory_fraction=fit.gemm.memory_fraction,
        linear_overhead_s=fit.gemm.overhead_s,
        elementwise_memory_fraction=fit.elementwise_memory_fraction,
        elementwise_overhead_s=fit.elementwise_overhead_s,
        embedding_memory_fraction=fit.elementwise_memory_fraction,
        embedding_overhead_s=fit.elementwise_overhead_s,
    )
    return KernelEfficiency(kernel_set, f"servegym 2026 {fit.gpu} profile", compute, fit.attention, links,
                            fit.fp8, fit.grouped_gemm, fit.int4_grouped_gemm)
