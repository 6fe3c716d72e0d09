"""Measured Vidur profiles and the roofline efficiency factors fitted to them.

The shipped copy of Vidur's measurements lives in ``hardware/data/profiles`` (format and
credit in its README). This module loads it and fits, per profiled GPU family
(``"a100"``, ``"a40"``, ``"h100"``), the operator model that ``hardware/latency.py`` evaluates:

* linear (GEMM) op: ``max(FLOPs / (peak * eta_compute), bytes / (bandwidth * eta_memory))
  + c_linear`` — Cauchy Sec. 3.2 takes prefill as compute-bound (eq. 4) and decode as
  memory-bound (eq. 10) at full peak; the roofline max with fitted efficiencies covers both;
* elementwise op (layernorm, rope, activation, residual add): ``c_elementwise + bytes /
  (bandwidth * eta_elementwise)``;
* embedding lookup (once per iteration): ``c_embedding + bytes / (bandwidth * eta_embedding)``;
* collectives: ``alpha + moved bytes / (eta_link * intra_node_link)`` with ring all-reduce
  moving ``2 (n - 1) / n`` of the buffer per GPU.

Efficiencies are fractions of the profiled GPU's catalog peak (``PROFILED_GPU_BY_FAMILY``);
a GPU without its own profile uses the factors of its ``GPUSpec.profile_family`` with its
own peaks, i.e. it is assumed to reach the same fraction of peak as the profiled GPU of its
family. Fits minimise squared relative error (numpy only). Hold-out: the whole
``HELD_OUT_MODEL`` plus every ``HELD_OUT_EVERY_NTH_TOKENS``-th ``num_tokens`` value of the
other models is excluded from the fit and scored separately.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from servegym_core import _core

from hardware.gpus import PROFILE_FAMILIES, GPUSpec, get_gpu

PROFILE_DIR = Path(__file__).parent / "data" / "profiles"

ArrayOrFloat = np.ndarray | float

PROFILED_GPU_BY_FAMILY = {"a100": "A100-80GB", "a40": "A40", "h100": "H100-80GB"}
"""Catalog GPU each Vidur family was measured on (Vidur's ``a100``/``h100`` are DGX SXM nodes;
``a40`` is a pairwise-NVLink A40 node)."""

NETWORK_BY_FAMILY = {"a100": "a100_dgx", "a40": "a40_pairwise_nvlink", "h100": "h100_dgx"}
"""Vidur network profile used for each family's collectives."""

HELD_OUT_MODEL = "InternLM-20B"
HELD_OUT_EVERY_NTH_TOKENS = 5

ACTIVATION_BYTES = 2.0
"""Activations are fp16/bf16 in every profile and in the model."""

LINEAR_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
EMBEDDING_OP = "emb"

_LINEAR_GRID = np.linspace(0.05, 1.5, 30)
_REFINE_STEPS = 4


def _check_family(gpu_family: str) -> None:
    if gpu_family not in PROFILE_FAMILIES:
        raise ValueError(f"unknown GPU family {gpu_family!r}; known: {', '.join(PROFILE_FAMILIES)}")


def _read_csv(name: str) -> list[dict[str, str]]:
    with open(PROFILE_DIR / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# --- operator cost formulas (shared with hardware/latency.py) -----------------------------


def compiled_elementwise(
    scalar: Callable[..., float], vectorized: Callable[..., np.ndarray], *values: ArrayOrFloat
) -> ArrayOrFloat:
    """One compiled kernel formula (``core/src/kernels.hpp``) on numbers or numpy arrays:
    ``scalar(*values)`` when none is an array, else ``vectorized`` over the values broadcast
    together as float64, shaped like the broadcast."""
    if not any(isinstance(value, np.ndarray) for value in values):
        return scalar(*values)
    arrays = np.broadcast_arrays(*(np.asarray(value, dtype=np.float64) for value in values))
    return vectorized(*(np.ascontiguousarray(array).ravel() for array in arrays)).reshape(arrays[0].shape)


def gemm_flops(tokens: ArrayOrFloat, in_features: float, out_features: float) -> ArrayOrFloat:
    """Multiply-add FLOPs of ``tokens x in_features`` times ``in_features x out_features``.

    The latency evaluator's twin is ``Gemm::flops`` (``core/src/latency.cpp``), per op and with
    routed experts; ``tests/test_kernel_formulas.py`` checks that the two agree bit for bit."""
    return 2.0 * tokens * in_features * out_features


def gemm_bytes(
    tokens: ArrayOrFloat, in_features: float, out_features: float, weight_bytes_per_param: float
) -> ArrayOrFloat:
    """Bytes a GEMM moves: the weight once plus input and output activations.

    The latency evaluator's twin is ``Gemm::moved_bytes`` (``core/src/latency.cpp``), which
    adds routed experts; ``tests/test_kernel_formulas.py`` checks that the two agree bit for bit."""
    return weight_bytes_per_param * in_features * out_features + ACTIVATION_BYTES * tokens * (
        in_features + out_features
    )


@dataclass(frozen=True)
class ComputeEfficiency:
    """Fitted operator-model parameters of one GPU family (fractions of catalog peak).

    Its times are computed by the compiled core's formulas (``Roofline``, ``Streamed``), the
    ones the latency evaluator uses, on numbers and numpy arrays alike."""

    compute_fraction: float
    memory_fraction: float
    linear_overhead_s: float
    elementwise_memory_fraction: float
    elementwise_overhead_s: float
    embedding_memory_fraction: float
    embedding_overhead_s: float

    def linear_time_s(self, flops: ArrayOrFloat, moved_bytes: ArrayOrFloat, gpu: GPUSpec) -> ArrayOrFloat:
        """Roofline time of one GEMM on ``gpu``: ``max(flops / (peak * compute_fraction), bytes /
        (bandwidth * memory_fraction)) + linear_overhead_s`` (elementwise on numpy arrays)."""
        kernel = _core.GemmKernel(self.compute_fraction, self.memory_fraction, self.linear_overhead_s, 1.0)
        roofline = _core.Roofline(kernel, gpu.fp16_tflops, gpu.mem_bandwidth_gbps)
        return compiled_elementwise(roofline.time_s, roofline.times_s, flops, moved_bytes)

    def elementwise_time_s(self, moved_bytes: ArrayOrFloat, gpu: GPUSpec) -> ArrayOrFloat:
        """Time of one memory-bound elementwise kernel moving ``moved_bytes``:
        ``elementwise_overhead_s + bytes / (bandwidth * elementwise_memory_fraction)``."""
        kernel = _core.Streamed(self.elementwise_overhead_s, gpu.mem_bandwidth_gbps, self.elementwise_memory_fraction)
        return compiled_elementwise(kernel.time_s, kernel.times_s, moved_bytes)

    def embedding_time_s(self, moved_bytes: ArrayOrFloat, gpu: GPUSpec) -> ArrayOrFloat:
        """Time of the embedding gather moving ``moved_bytes``:
        ``embedding_overhead_s + bytes / (bandwidth * embedding_memory_fraction)``."""
        kernel = _core.Streamed(self.embedding_overhead_s, gpu.mem_bandwidth_gbps, self.embedding_memory_fraction)
        return compiled_elementwise(kernel.time_s, kernel.times_s, moved_bytes)


@dataclass(frozen=True)
class LayerShape:
    """Per-GPU shape of one dense decoder layer under ``tp``-way tensor parallelism."""

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool
    tp: int

    @property
    def q_heads_per_gpu(self) -> float:
        return self.num_heads / self.tp

    @property
    def kv_heads_per_gpu(self) -> float:
        """vLLM replicates KV heads when ``tp`` exceeds their number (one per rank)."""
        return max(self.num_kv_heads / self.tp, 1.0)

    def linear_shapes(self) -> list[tuple[float, float]]:
        """``(in, out)`` features per GPU of QKV, O, MLP up(+gate) and MLP down, in ``LINEAR_OPS`` order."""
        h, d, tp = self.hidden_size, self.head_dim, self.tp
        up_width = (2 if self.gated_mlp else 1) * self.intermediate_size / tp
        return [
            (h, (self.q_heads_per_gpu + 2 * self.kv_heads_per_gpu) * d),
            (self.q_heads_per_gpu * d, h),
            (h, up_width),
            (self.intermediate_size / tp, h),
        ]

    def elementwise_bytes_per_token(self) -> list[float]:
        """Bytes per token of each op in ``ELEMENTWISE_OPS`` order (read + write, fp16).

        Layernorms and the residual add run on the full (replicated) hidden state; rope on the
        rank's query and key heads; the activation reads gate and up (or one input) and writes one.
        """
        a, h = ACTIVATION_BYTES, self.hidden_size
        rope = 2 * (self.q_heads_per_gpu + self.kv_heads_per_gpu) * self.head_dim
        act = (3 if self.gated_mlp else 2) * self.intermediate_size / self.tp
        return [a * 2 * h, a * 2 * h, a * rope, a * act, a * 3 * h]

    def embedding_bytes_per_token(self) -> float:
        """The gather reads one embedding row and writes it."""
        return ACTIVATION_BYTES * 2 * self.hidden_size


# --- loading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfiledModel:
    """Shape of a profiled model, as recorded in Vidur's files."""

    name: str
    num_heads: int
    num_kv_heads: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool

    def layer_shape(self, tp: int) -> LayerShape:
        return LayerShape(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.hidden_size // self.num_heads,
            intermediate_size=self.intermediate_size,
            gated_mlp=self.gated_mlp,
            tp=tp,
        )


@cache
def profiled_models() -> dict[str, ProfiledModel]:
    """Shapes of the models in the compute profiles (``model_shapes.csv``)."""
    return {
        row["model"]: ProfiledModel(
            name=row["model"],
            num_heads=int(row["n_head"]),
            num_kv_heads=int(row["n_kv_head"]),
            hidden_size=int(row["n_embd"]),
            intermediate_size=int(row["n_expanded_embd"]),
            vocab_size=int(row["vocab_size"]),
            gated_mlp=row["use_gated_mlp"] == "True",
        )
        for row in _read_csv("model_shapes.csv")
    }


@dataclass(frozen=True)
class ComputeProfile:
    """Measured per-layer operator means of one GPU family, one row per (model, tp, num_tokens).

    ``op_s`` maps each op to seconds; NaN where the model has no such op (Phi-2's parallel
    block has no post-attention layernorm).
    """

    gpu_family: str
    model: np.ndarray
    tp: np.ndarray
    num_tokens: np.ndarray
    op_s: dict[str, np.ndarray]

    @property
    def total_s(self) -> np.ndarray:
        """Sum of all op means of each row (the quantity whose error is reported)."""
        return _total_s(self.op_s)

    def held_out_mask(self) -> np.ndarray:
        """Rows excluded from fitting: the held-out model and every n-th distinct token count."""
        token_values = np.unique(self.num_tokens)
        held_tokens = token_values[HELD_OUT_EVERY_NTH_TOKENS - 1 :: HELD_OUT_EVERY_NTH_TOKENS]
        return (self.model == HELD_OUT_MODEL) | np.isin(self.num_tokens, held_tokens)


@cache
def load_compute_profile(gpu_family: str) -> ComputeProfile:
    """The shipped ``compute_<family>_ms.csv`` as arrays (ms converted to seconds)."""
    _check_family(gpu_family)
    rows = _read_csv(f"compute_{gpu_family}_ms.csv")
    ops = (EMBEDDING_OP, *LINEAR_OPS, *ELEMENTWISE_OPS)
    return ComputeProfile(
        gpu_family=gpu_family,
        model=np.array([row["model"] for row in rows]),
        tp=np.array([int(row["tp"]) for row in rows]),
        num_tokens=np.array([int(row["num_tokens"]) for row in rows]),
        op_s={
            op: np.array([float(row[f"{op}_ms"]) * 1e-3 if row[f"{op}_ms"] else np.nan for row in rows])
            for op in ops
        },
    )


# --- compute fit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Features:
    """Per-row FLOPs/bytes of the ops of a compute profile, for one family's fit."""

    linear_flops: np.ndarray  # (rows, 4)
    linear_bytes: np.ndarray  # (rows, 4)
    elementwise_bytes: np.ndarray  # (rows, 5), NaN where the op is absent
    embedding_bytes: np.ndarray  # (rows,)


def _features(profile: ComputeProfile) -> _Features:
    models = profiled_models()
    rows = len(profile.tp)
    linear_flops, linear_bytes = np.empty((rows, 4)), np.empty((rows, 4))
    elementwise_bytes, embedding_bytes = np.empty((rows, 5)), np.empty(rows)
    for name, tp in sorted(set(zip(profile.model.tolist(), profile.tp.tolist()))):
        rows_of_group = (profile.model == name) & (profile.tp == tp)
        tokens = profile.num_tokens[rows_of_group].astype(float)
        shape = models[name].layer_shape(tp)
        gemms = shape.linear_shapes()
        linear_flops[rows_of_group] = np.stack(
            [gemm_flops(tokens, fan_in, fan_out) for fan_in, fan_out in gemms], 1
        )
        linear_bytes[rows_of_group] = np.stack(
            [gemm_bytes(tokens, fan_in, fan_out, ACTIVATION_BYTES) for fan_in, fan_out in gemms], 1
        )
        elementwise_bytes[rows_of_group] = tokens[:, None] * np.array(shape.elementwise_bytes_per_token())
        embedding_bytes[rows_of_group] = tokens * shape.embedding_bytes_per_token()
    present = ~np.isnan(np.stack([profile.op_s[op] for op in ELEMENTWISE_OPS], 1))
    elementwise_bytes[~present] = np.nan
    return _Features(linear_flops, linear_bytes, elementwise_bytes, embedding_bytes)


def _predict_ops_s(features: _Features, efficiency: ComputeEfficiency, gpu: GPUSpec) -> dict[str, np.ndarray]:
    linear_s = efficiency.linear_time_s(features.linear_flops, features.linear_bytes, gpu)
    elementwise_s = efficiency.elementwise_time_s(features.elementwise_bytes, gpu)
    predicted = {op: linear_s[:, index] for index, op in enumerate(LINEAR_OPS)}
    predicted |= {op: elementwise_s[:, index] for index, op in enumerate(ELEMENTWISE_OPS)}
    predicted[EMBEDDING_OP] = efficiency.embedding_time_s(features.embedding_bytes, gpu)
    return predicted


def _total_s(op_s: dict[str, np.ndarray]) -> np.ndarray:
    return np.nansum(np.stack([op_s[op] for op in (EMBEDDING_OP, *LINEAR_OPS, *ELEMENTWISE_OPS)]), 0)


def _linear_overhead_s(roofline_s: np.ndarray, measured_s: np.ndarray, num_ops: int) -> np.ndarray:
    """Least-relative-squares ``c >= 0`` in ``measured ~ roofline + num_ops * c``, per grid row."""
    weights = measured_s**-2
    best = ((measured_s - roofline_s) * weights).sum(-1) / (num_ops * weights.sum())
    return np.maximum(best, 0.0)


def fit_roofline(
    flops: np.ndarray, moved_bytes: np.ndarray, measured_s: np.ndarray, gpu: GPUSpec
) -> tuple[float, float, float]:
    """(eta_compute, eta_memory, c_linear) by coarse-to-fine grid search on relative squared error."""
    peak_flops, bandwidth = gpu.fp16_tflops * 1e12, gpu.mem_bandwidth_gbps * 1e9
    num_ops = flops.shape[1]
    compute_grid, memory_grid = _LINEAR_GRID, _LINEAR_GRID
    for _ in range(_REFINE_STEPS):
        compute_s = flops[None] / (peak_flops * compute_grid[:, None, None])
        best = (np.inf, 0.0, 0.0, 0.0)
        for eta_memory in memory_grid:
            roofline_s = np.maximum(compute_s, moved_bytes[None] / (bandwidth * eta_memory)).sum(-1)
            overhead_s = _linear_overhead_s(roofline_s, measured_s[None], num_ops)
            error = ((roofline_s + num_ops * overhead_s[:, None] - measured_s) / measured_s) ** 2
            scores = error.mean(-1)
            winner = int(np.argmin(scores))
            if scores[winner] < best[0]:
                best = (scores[winner], compute_grid[winner], eta_memory, overhead_s[winner])
        _, eta_compute, eta_memory, overhead = best
        step = (compute_grid[1] - compute_grid[0]) / 4
        compute_grid = eta_compute + step * np.arange(-4, 5)
        memory_grid = eta_memory + step * np.arange(-4, 5)
        compute_grid, memory_grid = compute_grid[compute_grid > 0], memory_grid[memory_grid > 0]
    return float(eta_compute), float(eta_memory), float(overhead)


def fit_memory_bound(
    op_count: np.ndarray, moved_bytes: np.ndarray, measured_s: np.ndarray, gpu: GPUSpec, what: str
) -> tuple[float, float]:
    """(eta, c) in ``measured ~ op_count * c + moved_bytes / (bandwidth * eta)``, relative least squares."""
    bandwidth = gpu.mem_bandwidth_gbps * 1e9
    design = np.stack([op_count, moved_bytes / bandwidth], 1) / measured_s[:, None]
    (overhead_s, inverse_eta), *_ = np.linalg.lstsq(design, np.ones_like(measured_s), rcond=None)
    if inverse_eta <= 0 or overhead_s < 0:
        raise ValueError(
            f"{what} fit on {gpu.name} is unphysical: c={overhead_s:.3g} s, 1/eta={inverse_eta:.3g}"
        )
    return float(1.0 / inverse_eta), float(overhead_s)


@dataclass(frozen=True)
class ComputeFit:
    """A family's fitted parameters with the relative error on fitted and held-out rows."""

    gpu_family: str
    efficiency: ComputeEfficiency
    train_rows: int
    held_out_rows: int
    train_mape: float
    held_out_mape: float


def predict_profile_ops_s(
    profile: ComputeProfile, efficiency: ComputeEfficiency, gpu: GPUSpec
) -> dict[str, np.ndarray]:
    """Model prediction of every op of every row (NaN where the profile has no such op)."""
    return _predict_ops_s(_features(profile), efficiency, gpu)


def fit_compute_profile(profile: ComputeProfile, gpu: GPUSpec) -> ComputeFit:
    """Fit the operator model to ``profile``'s training rows (measured on ``gpu``); score held-out rows."""
    features = _features(profile)
    train = ~profile.held_out_mask()
    linear_measured = np.stack([profile.op_s[op] for op in LINEAR_OPS], 1).sum(1)
    eta_compute, eta_memory, linear_overhead = fit_roofline(
        features.linear_flops[train], features.linear_bytes[train], linear_measured[train], gpu
    )
    elementwise_measured = np.nansum(np.stack([profile.op_s[op] for op in ELEMENTWISE_OPS], 1), 1)
    elementwise_count = (~np.isnan(features.elementwise_bytes)).sum(1).astype(float)
    elementwise_eta, elementwise_overhead = fit_memory_bound(
        elementwise_count[train],
        np.nansum(features.elementwise_bytes, 1)[train],
        elementwise_measured[train],
        gpu,
        "elementwise",
    )
    embedding_eta, embedding_overhead = fit_memory_bound(
        np.ones(int(train.sum())),
        features.embedding_bytes[train],
        profile.op_s[EMBEDDING_OP][train],
        gpu,
        "embedding",
    )
    efficiency = ComputeEfficiency(
        compute_fraction=eta_compute,
        memory_fraction=eta_memory,
        linear_overhead_s=linear_overhead,
        elementwise_memory_fraction=elementwise_eta,
        elementwise_overhead_s=elementwise_overhead,
        embedding_memory_fraction=embedding_eta,
        embedding_overhead_s=embedding_overhead,
    )
    relative_error = np.abs(_total_s(_predict_ops_s(features, efficiency, gpu)) / profile.total_s - 1.0)
    return ComputeFit(
        gpu_family=profile.gpu_family,
        efficiency=efficiency,
        train_rows=int(train.sum()),
        held_out_rows=int((~train).sum()),
        train_mape=float(relative_error[train].mean()),
        held_out_mape=float(relative_error[~train].mean()),
    )


@cache
def fit_compute(gpu_family: str) -> ComputeFit:
    """Fit ``gpu_family``'s shipped profile, measured on ``PROFILED_GPU_BY_FAMILY[gpu_family]``."""
    profile = load_compute_profile(gpu_family)
    return fit_compute_profile(profile, get_gpu(PROFILED_GPU_BY_FAMILY[gpu_family]))


def compute_efficiency(gpu_family: str) -> ComputeEfficiency:
    """Fitted operator efficiencies of ``gpu_family`` (fitted once per process)."""
    _check_family(gpu_family)
    return fit_compute(gpu_family).efficiency


# --- collectives ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkEfficiency:
    """Fitted collective latencies and achieved fractions of ``GPUSpec.intra_node_link_gbps``;
    its times are the compiled core's formulas (those of the latency evaluator)."""

    all_reduce_latency_s: float
    all_reduce_bandwidth_fraction: float
    send_recv_latency_s: float
    send_recv_bandwidth_fraction: float

    def all_reduce_time_s(self, buffer_bytes: ArrayOrFloat, num_gpus: int, gpu: GPUSpec) -> ArrayOrFloat:
        """Ring all-reduce of ``buffer_bytes`` over ``num_gpus``: each GPU moves ``2 (n-1)/n`` of it,
        ``all_reduce_latency_s + moved / (link * all_reduce_bandwidth_fraction)``."""
        link = _core.Streamed(self.all_reduce_latency_s, gpu.intra_node_link_gbps, self.all_reduce_bandwidth_fraction)
        return compiled_elementwise(
            lambda b: _core.all_reduce_time_s(link, b, num_gpus),
            lambda b: _core.all_reduce_times_s(link, b, num_gpus),
            buffer_bytes,
        )

    def send_recv_time_s(self, message_bytes: ArrayOrFloat, gpu: GPUSpec) -> ArrayOrFloat:
        """Point-to-point copy of ``message_bytes`` between two GPUs of a node:
        ``send_recv_latency_s + bytes / (link * send_recv_bandwidth_fraction)``."""
        link = _core.Streamed(self.send_recv_latency_s, gpu.intra_node_link_gbps, self.send_recv_bandwidth_fraction)
        return compiled_elementwise(link.time_s, link.times_s, message_bytes)


@dataclass(frozen=True)
class LinkFit:
    """A family's collective fit and its mean relative error on the shipped points.

    ``all_reduce_mape`` is None where no all-reduce was measured (A40): its all-reduce then
    reuses the send/recv latency and bandwidth, since a ring all-reduce streams through the
    same point-to-point links.
    """

    gpu_family: str
    efficiency: LinkEfficiency
    send_recv_mape: float
    all_reduce_mape: float | None


def fit_latency_bandwidth(
    moved_bytes: np.ndarray, measured_s: np.ndarray, link_gbps: float, what: str
) -> tuple[float, float, float]:
    """(alpha_s, bandwidth fraction) in ``measured ~ alpha + moved / (fraction * link)``, relative LS."""
    design = np.stack([np.ones_like(moved_bytes), moved_bytes / (link_gbps * 1e9)], 1) / measured_s[:, None]
    (latency_s, inverse_fraction), *_ = np.linalg.lstsq(design, np.ones_like(measured_s), rcond=None)
    if latency_s < 0 or inverse_fraction <= 0:
        raise ValueError(
            f"{what} fit is unphysical: alpha={latency_s:.3g} s, 1/fraction={inverse_fraction:.3g}"
        )
    mape = float(np.abs(design @ np.array([latency_s, inverse_fraction]) - 1.0).mean())
    return float(latency_s), float(1.0 / inverse_fraction), mape


def _network_points(collective: str, network: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(num_workers, message bytes, seconds) of one shipped network CSV."""
    rows = [row for row in _read_csv(f"{collective}_ms.csv") if row["network"] == network]
    workers = np.array([int(row["num_workers"]) for row in rows])
    message_bytes = np.array([float(row["size_bytes"]) for row in rows])
    return workers, message_bytes, np.array([float(row["mean_ms"]) * 1e-3 for row in rows])


@cache
def fit_links(gpu_family: str) -> LinkFit:
    """Fit send/recv (and, where measured, all-reduce) of ``gpu_family``'s network profile."""
    _check_family(gpu_family)
    network = NETWORK_BY_FAMILY[gpu_family]
    link_gbps = get_gpu(PROFILED_GPU_BY_FAMILY[gpu_family]).intra_node_link_gbps
    _, p2p_bytes, p2p_s = _network_points("send_recv", network)
    p2p_latency, p2p_fraction, p2p_mape = fit_latency_bandwidth(
        p2p_bytes, p2p_s, link_gbps, f"{network} send_recv"
    )
    workers, buffer_bytes, all_reduce_s = _network_points("all_reduce", network)
    if len(workers):
        moved_bytes = 2.0 * (workers - 1) / workers * buffer_bytes
        ar_latency, ar_fraction, ar_mape = fit_latency_bandwidth(
            moved_bytes, all_reduce_s, link_gbps, f"{network} all_reduce"
        )
    else:
        ar_latency, ar_fraction, ar_mape = p2p_latency, p2p_fraction, None
    return LinkFit(
        gpu_family=gpu_family,
        efficiency=LinkEfficiency(ar_latency, ar_fraction, p2p_latency, p2p_fraction),
        send_recv_mape=p2p_mape,
        all_reduce_mape=ar_mape,
    )


def link_efficiency(gpu_family: str) -> LinkEfficiency:
    """Fitted collective parameters of ``gpu_family`` (fitted once per process)."""
    return fit_links(gpu_family).efficiency


# --- attention and CPU overhead ------------------------------------------------------------


@dataclass(frozen=True)
class AttentionCalibration:
    """Attention cost per layer, from Vidur's fitted A100 / Llama-2-7B / TP1 formula.

    ``attention_fit_ms.csv`` holds ``fixed + per_item * items + per_pair * pairs`` (ms per
    layer) for decode (items = sequences, pairs = sequences x KV length) and prefill (items =
    chunk tokens, pairs = query-key pairs). It is turned into hardware-relative terms so it
    can be applied to other GPUs and models (it is the only attention measurement shipped, so
    every family uses it):

    * decode KV read: KV bytes / (bandwidth * ``decode_kv_memory_fraction``);
    * prefill scores: ``4 * query width`` FLOPs per pair (Cauchy eq. 1, ``C1 = 4 l h``) at
      ``prefill_compute_fraction`` of peak;
    * prefill per-token work (Q/K/V/O traffic and KV-cache writes) as
      ``prefill_bytes_per_query_channel * query width`` effective bytes at full bandwidth;
    * fixed and per-sequence terms in seconds, taken as GPU-independent launch costs.
    """

    decode_fixed_s: float
    decode_per_sequence_s: float
    decode_kv_memory_fraction: float
    prefill_fixed_s: float
    prefill_bytes_per_query_channel: float
    prefill_compute_fraction: float


@cache
def attention_calibration() -> AttentionCalibration:
    """Convert the shipped attention formula using the A100-80GB peaks and Llama-2-7B's shape."""
    rows = {row["phase"]: row for row in _read_csv("attention_fit_ms.csv")}
    reference = rows["decode"]
    gpu = get_gpu(PROFILED_GPU_BY_FAMILY[reference["gpu_family"]])
    shape = profiled_models()[reference["model"]].layer_shape(int(reference["tp"]))
    query_width = shape.q_heads_per_gpu * shape.head_dim
    kv_bytes_per_token = 2 * shape.kv_heads_per_gpu * shape.head_dim * ACTIVATION_BYTES
    bandwidth, peak_flops = gpu.mem_bandwidth_gbps * 1e9, gpu.fp16_tflops * 1e12
    decode, prefill = rows["decode"], rows["prefill"]
    return AttentionCalibration(
        decode_fixed_s=float(decode["fixed_ms"]) * 1e-3,
        decode_per_sequence_s=float(decode["per_item_ms"]) * 1e-3,
        decode_kv_memory_fraction=kv_bytes_per_token / (float(decode["per_pair_ms"]) * 1e-3 * bandwidth),
        prefill_fixed_s=float(prefill["fixed_ms"]) * 1e-3,
        prefill_bytes_per_query_channel=float(prefill["per_item_ms"]) * 1e-3 * bandwidth / query_width,
        prefill_compute_fraction=4.0 * query_width / (float(prefill["per_pair_ms"]) * 1e-3 * peak_flops),
    )


@cache
def cpu_overhead_s() -> float:
    """Fixed CPU time per engine iteration: schedule + sampler + prepare inputs + process outputs.

    From Vidur's ``cpu_overheads.csv`` (vLLM on A100, Llama-2-7B, TP1) at its smallest
    measured batch (8). Vidur's rows grow by ~0.17 ms per extra sequence (Python output
    processing of that vLLM version); newer engines overlap it with GPU work, so only the
    fixed part is charged.
    """
    rows = [row for row in _read_csv("cpu_overhead_ms.csv") if row["tp"] == "1"]
    smallest = min(rows, key=lambda row: int(row["batch_size"]))
    columns = ("schedule_ms", "sampler_e2e_ms", "prepare_inputs_e2e_ms", "process_model_outputs_ms")
    return sum(float(smallest[column]) for column in columns) * 1e-3
