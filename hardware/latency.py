"""Per-iteration latency of one engine step on (GPU, model, TP, PP): the simulator's clock.

One iteration (continuous batching, optionally chunked prefill) costs, in seconds::

    layers * (linear ops + elementwise ops + attention + 2 TP all-reduces)
    + embedding + LM head + (pp - 1) activation send/recv + CPU overhead

* Linear ops (QKV, O, MLP up/gate/down; MoE: router, shared and routed experts) use the
  roofline ``max(FLOPs / (peak * eta_c), bytes / (bandwidth * eta_m)) + c`` of
  ``hardware/profiles.py``, the analytic form of Cauchy Sec. 3.2 (prefill compute-bound,
  eq. 4; decode weight-read-bound, eq. 10) with efficiencies fitted to measured operator
  profiles (the engine's kernel set, below). A GPU without a profile uses its
  ``profile_family``'s efficiencies with its own peak FLOP/s and bandwidth. Routed MoE experts read the weights of the expected
  number of distinct experts hit, ``E (1 - (1 - k/E)^T)`` for ``T`` tokens (uniform routing).
* Attention: prefill is compute-bound in query-key pairs (``4 * query width`` FLOPs per pair,
  Cauchy eq. 1); decode is memory-bound in KV bytes read, plus per-sequence and fixed
  terms (``profiles.AttentionCalibration``: Vidur's A100 fit, or the 2026 Hopper fit).
* TP: per-GPU work is split ``tp`` ways; two ring all-reduces of ``tokens * hidden * 2``
  bytes per layer over ``gpu.intra_node_link_gbps`` (latency + bandwidth fitted to Vidur's
  NCCL all-reduce profile; an engine with its own all-reduce kernels gives their latency).
* PP: layers are split evenly into ``pp`` stages; one iteration (a microbatch) takes the sum
  of its stage times plus ``pp - 1`` activation send/recvs, which is what ``iteration_time_s``
  returns. ``stage_times_s`` splits that latency into what each stage's GPUs are busy with
  (stage 0: the CPU overhead, the embedding, its layers and its send; middle stages: their
  layers and send; the last: its layers and the LM head), so the simulator can keep up to
  ``pp`` microbatches in flight, one per stage, as vLLM's virtual engines and Vidur 0.0.26
  do; steady-state throughput is then bounded by the slowest stage, not by the sum.
* CPU time per iteration, ``engine.cpu_s(sequences)`` (``hardware.engines``): the engine's
  scheduler, input preparation, sampling and output processing that the GPU waits for,
  charged serially (stage 0's GPUs wait for it in a pipeline). ``cpu_overhead_s`` replaces it
  by a fixed time (``--cpu-overhead-ms``; 0 matches Vidur's own default, which leaves it out).

Which kernels the ops run at is the engine's kernel set (``hardware.kernel_sets``): Vidur's
2024 profiles, or servegym's 2026 Hopper profiles, which also give FP8 GEMMs their own
efficiency at the FP8 tensor-core rate, routed MoE experts the grouped-GEMM efficiency, and
int4 routed experts that of vLLM's fused Marlin MoE kernel. Without them FP8 weights stream
at one byte per weight and compute at the fp16 rate, and routed experts run at the dense GEMM
efficiency. Dense int4 weights (AWQ/GPTQ) stream at their packed size and compute at the fp16
rate, as Marlin kernels do up to batches of 16-32 (Frantar et al., PPoPP 2025).

The evaluation runs in the compiled core (``core/src/latency.cpp``): this module checks the
arguments and builds the evaluator's coefficients once per model (``hardware.latency_coefficients``);
the C++ keeps the association of every sum and product the former Python evaluator had, so its
values are those recorded in ``tests/latency_fixture`` bit for bit.

Related: splitwise-sim and DistServe fit ``a + b * sum(tokens) (+ c * sum(tokens)^2)`` per
phase directly to profiles; here the shape comes from the hardware and only efficiencies
are fitted. Not modelled: the final norm, the logits all-gather, and kernel overlap between ops.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from functools import cache

from servegym_core import _core

from hardware.engines import DEFAULT_ENGINE, EngineProfile, get_engine
from hardware.gpus import GPUSpec, get_gpu
from hardware.kernel_sets import PCIE_FAMILIES, kernel_efficiency
from hardware.latency_coefficients import latency_coefficients, layer_kinds
from hardware.models import (
    WEIGHT_DTYPES,
    ModelSpec,
    bytes_per_linear_weight,
    check_fits,
    get_model,
    kv_bytes_per_token_per_gpu,
    weights_per_gpu_bytes,
)
from hardware.profiles import ACTIVATION_BYTES

ACTIVATION_RESERVE_TOKENS = 2048
"""Tokens of the profiling forward pass whose activations vLLM keeps free of KV cache
(its default ``max_num_batched_tokens`` with chunked prefill)."""


MAX_COUNT = 2**40
"""Largest token, sequence or context count the evaluator takes: far beyond any deployment, and
small enough that its 64-bit integer products (tokens x hidden size) cannot overflow."""


def _check_int(label: str, value: object, minimum: int) -> None:
    if type(value) is int and minimum <= value <= MAX_COUNT:  # the common case, checked cheaply
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{label}={value!r} must be an integer >= {minimum}")
    if value > MAX_COUNT:
        raise ValueError(f"{label}={value!r} exceeds the largest count the latency model takes, 2**40")


def _check_real(label: str, value: object, minimum: float, strict: bool = False) -> None:
    if type(value) is float and minimum < value < math.inf:  # the common case, checked cheaply
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < minimum
        or (strict and value == minimum)
    ):
        relation = ">" if strict else ">="
        raise ValueError(f"{label}={value!r} must be a finite number {relation} {minimum}")


def _resolve(gpu: GPUSpec | str, model: ModelSpec | str) -> tuple[GPUSpec, ModelSpec]:
    gpu_spec = get_gpu(gpu) if isinstance(gpu, str) else gpu
    return gpu_spec, get_model(model) if isinstance(model, str) else model


def activation_reserve_bytes(model: ModelSpec | str, tp: int = 1) -> float:
    """Per-GPU activation memory kept free of KV: the widest live tensors (hidden state, MLP
    up/gate output, activation output) of a ``ACTIVATION_RESERVE_TOKENS``-token forward pass."""
    model = get_model(model) if isinstance(model, str) else model
    _check_int("tp", tp, 1)
    width = model.intermediate_size
    if model.is_moe:
        width = max(width, (model.experts_per_token + model.num_shared_experts) * model.moe_intermediate_size)
    return ACTIVATION_RESERVE_TOKENS * (model.hidden_size + 3 * width / tp) * ACTIVATION_BYTES


class IterationLatencyModel:
    """Latency of one engine iteration of ``model`` on ``tp x pp`` GPUs of type ``gpu``."""

    def __init__(
        self,
        gpu: GPUSpec | str,
        model: ModelSpec | str,
        tp: int = 1,
        pp: int = 1,
        dtype: str = "fp16",
        engine: EngineProfile | str = DEFAULT_ENGINE,
        cpu_overhead_s: float | None = None,
    ) -> None:
        self.gpu, self.model = _resolve(gpu, model)
        if dtype not in WEIGHT_DTYPES:
            raise ValueError(f"unknown weight dtype {dtype!r}; known: {', '.join(WEIGHT_DTYPES)}")
        self.engine = get_engine(engine)
        if cpu_overhead_s is None:
            self.cpu_fixed_s, self.cpu_per_sequence_s = self.engine.cpu_fixed_s, self.engine.cpu_per_sequence_s
        else:
            _check_real("cpu_overhead_s", cpu_overhead_s, 0.0)
            self.cpu_fixed_s, self.cpu_per_sequence_s = float(cpu_overhead_s), 0.0
        self.weights_per_gpu_bytes = weights_per_gpu_bytes(self.model, tp, pp, dtype)
        self.tp, self.pp, self.dtype = tp, pp, dtype
        self.kernels = kernel_efficiency(self.engine.kernels, self.gpu.profile_family)
        self._links = self.kernels.links
        if self.engine.all_reduce_latency_s is not None and self.gpu.profile_family not in PCIE_FAMILIES:
            self._links = replace(self._links, all_reduce_latency_s=self.engine.all_reduce_latency_s)
        self._layer_kinds = layer_kinds(self.model, tp, bytes_per_linear_weight(dtype))
        coefficients = latency_coefficients(
            self.gpu, self.model, int(tp), int(pp), dtype, self.kernels, self._links, self._layer_kinds,
            self.cpu_fixed_s, self.cpu_per_sequence_s,
        )
        self._evaluator = _core.LatencyEvaluator(coefficients)

    def __repr__(self) -> str:
        return (
            f"IterationLatencyModel({self.gpu.name!r}, {self.model.name!r}, tp={self.tp}, pp={self.pp}, "
            f"dtype={self.dtype!r}, engine={self.engine.name!r}, cpu_fixed_s={self.cpu_fixed_s!r}, "
            f"cpu_per_sequence_s={self.cpu_per_sequence_s!r})"
        )

    def cpu_s(self, sequences: int) -> float:
        """CPU time of an iteration over ``sequences`` sequences (the GPU waits for it)."""
        return self._evaluator.cpu_s(sequences)

    def _linear_s(self, gemm: _core.Gemm, tokens: int) -> float:
        """One GEMM of ``tokens`` tokens at the kernel the engine runs it with."""
        return self._evaluator.linear_s(gemm, tokens)

    def prefill_attention_layer_s(self, tokens: int, attention_pairs: float) -> float:
        """One layer's prefill attention for ``tokens`` new tokens and ``attention_pairs`` query-key pairs."""
        return self._evaluator.prefill_attention_layer_s(tokens, attention_pairs)

    def decode_attention_layer_s(self, batch_size: int, context_tokens: int) -> float:
        """One layer's decode attention: ``batch_size`` sequences, ``context_tokens`` KV tokens in all."""
        return self._evaluator.decode_attention_layer_s(batch_size, context_tokens)

    def _token_terms_s(self, tokens: int, logit_tokens: int) -> float:
        """The part of an iteration that depends only on its token counts (linear and
        elementwise ops, collectives, embedding, LM head); memoized in the evaluator."""
        return self._evaluator.token_terms_s(tokens, logit_tokens)

    # --- public API ---------------------------------------------------------------------

    def decode_coefficients(self, batch_size: int) -> tuple[float, float]:
        """(base_s, per_context_token_s): a decode-only iteration of ``batch_size`` sequences whose
        context lengths sum to C tokens takes exactly ``base_s + per_context_token_s * C`` seconds."""
        if type(batch_size) is not int or not 1 <= batch_size <= MAX_COUNT:
            _check_int("batch_size", batch_size, 1)
            batch_size = int(batch_size)
        return self._evaluator.decode_coefficients(batch_size)

    def decode_time_s(self, batch_size: int, context_tokens: int) -> float:
        """Decode-only iteration time, ``base_s + per_context_token_s * context_tokens``."""
        _check_int("context_tokens", context_tokens, 0)
        _check_int("batch_size", batch_size, 1)
        return self._evaluator.decode_time_s(batch_size, context_tokens)

    def iteration_time_s(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_batch_size: int,
        decode_context_tokens: int,
    ) -> float:
        """Mixed (chunked-prefill) iteration.

        ``prefill_tokens`` new prompt tokens in total (all chunks); ``prefill_attention_pairs`` =
        sum over chunks of ``tokens * (context_before + (tokens + 1) / 2)``; a decode part of
        ``decode_batch_size`` sequences with ``decode_context_tokens`` KV tokens. Logits are
        computed for each decode sequence plus one prefill sequence. With ``prefill_tokens == 0``
        this is exactly ``decode_time_s``.
        """
        _check_int("prefill_tokens", prefill_tokens, 0)
        _check_int("decode_batch_size", decode_batch_size, 0)
        _check_int("decode_context_tokens", decode_context_tokens, 0)
        _check_real("prefill_attention_pairs", prefill_attention_pairs, 0.0)
        if prefill_tokens == 0:
            if prefill_attention_pairs != 0:
                raise ValueError(
                    f"prefill_attention_pairs={prefill_attention_pairs!r} needs prefill_tokens > 0"
                )
            if decode_batch_size == 0:
                raise ValueError("empty iteration: prefill_tokens=0 and decode_batch_size=0")
            return self.decode_time_s(decode_batch_size, decode_context_tokens)
        if prefill_attention_pairs < prefill_tokens:
            raise ValueError(
                f"prefill_attention_pairs={prefill_attention_pairs!r} is below prefill_tokens={prefill_tokens} "
                "(each token attends at least to itself)"
            )
        if decode_batch_size == 0 and decode_context_tokens:
            raise ValueError(f"decode_context_tokens={decode_context_tokens!r} needs decode_batch_size > 0")
        return self._evaluator.iteration_time_s(
            prefill_tokens, prefill_attention_pairs, decode_batch_size, decode_context_tokens
        )

    def stage_times_s(self, tokens: int, logit_tokens: int, iteration_s: float) -> tuple[float, ...]:
        """How long each of the ``pp`` stages is busy with one iteration of ``tokens`` tokens
        (logits for ``logit_tokens``) whose latency ``iteration_s`` came from
        ``iteration_time_s`` / ``decode_time_s``.

        The layers (with their attention and all-reduces) split evenly, ``layers_s / pp`` per
        stage, where ``layers_s = iteration_s - cpu - embedding - head - (pp - 1) * send``.
        Stage 0 adds the CPU overhead (vLLM's driver worker is stage 0's first GPU) and the
        embedding, the last stage the LM head, and every stage but the last the send of its
        activations to the next (the sender is busy until the receiver has them, as in Vidur's
        stage times). The stage times add up to ``iteration_s`` up to rounding.
        """
        _check_int("tokens", tokens, 1)
        _check_int("logit_tokens", logit_tokens, 1)
        _check_real("iteration_s", iteration_s, 0.0, strict=True)
        times = self._evaluator.stage_times_s(tokens, logit_tokens, iteration_s)
        if not times:
            raise ValueError(
                f"iteration_s={iteration_s!r} is shorter than the CPU overhead, embedding, LM head and "
                f"sends of {tokens} tokens alone"
            )
        return tuple(times)

    def prefill_time_s(self, tokens: int, context_before: int = 0) -> float:
        """A lone prefill chunk of ``tokens`` tokens after ``context_before`` cached tokens."""
        _check_int("tokens", tokens, 1)
        _check_int("context_before", context_before, 0)
        return self.iteration_time_s(tokens, tokens * (context_before + (tokens + 1) / 2), 0, 0)


@cache
def latency_model(
    gpu: GPUSpec | str,
    model: ModelSpec | str,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "fp16",
    engine: EngineProfile | str = DEFAULT_ENGINE,
    cpu_overhead_s: float | None = None,
) -> IterationLatencyModel:
    """Shared ``IterationLatencyModel`` per (gpu, model, tp, pp, dtype, engine, cpu_overhead_s)."""
    return IterationLatencyModel(gpu, model, tp, pp, dtype, engine, cpu_overhead_s)


def pp_bubble_fraction(pp: int) -> float:
    """Idle share ``(pp - 1) / pp`` of each stage when only one microbatch at a time flows
    through ``pp`` stages (an instance with ``microbatches_in_flight=1``)."""
    _check_int("pp", pp, 1)
    return (pp - 1) / pp


def kv_capacity_tokens(
    gpu: GPUSpec | str,
    model: ModelSpec | str,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "fp16",
    memory_utilization: float = 0.9,
) -> int:
    """KV-cache tokens a ``tp x pp`` deployment holds.

    Per GPU, ``memory_utilization * memory - weights - activation reserve`` is free for KV; a
    token's KV is spread over all ``tp * pp`` GPUs, so capacity = free bytes / per-GPU KV bytes
    per token (summing free memory and KV shares over the GPUs gives the same ratio). Raises
    ``ValueError`` (via ``check_fits``) if the weights do not fit, or if nothing is left for KV.
    """
    gpu, model = _resolve(gpu, model)
    check_fits(model, gpu, tp, pp, dtype, memory_utilization)
    free_bytes = gpu.memory_bytes * memory_utilization - weights_per_gpu_bytes(model, tp, pp, dtype)
    free_bytes -= activation_reserve_bytes(model, tp)
    if free_bytes <= 0:
        raise ValueError(
            f"{model.name} on {gpu.name} (tp={tp}, pp={pp}, {dtype}) leaves no memory for KV cache "
            f"after weights and activations ({free_bytes:.4g} bytes)"
        )
    return int(free_bytes // kv_bytes_per_token_per_gpu(model, tp, pp))


def kv_transfer_time_s(model: ModelSpec | str, tokens: int, link_gbps: float, latency_s: float = 0.0) -> float:
    """Time to copy the KV cache of ``tokens`` tokens over a ``link_gbps`` GB/s link, plus a fixed
    ``latency_s`` (e.g. ``profiles.link_efficiency(family).send_recv_latency_s`` for NCCL)."""
    model = get_model(model) if isinstance(model, str) else model
    _check_int("tokens", tokens, 1)
    _check_real("link_gbps", link_gbps, 0.0, strict=True)
    _check_real("latency_s", latency_s, 0.0)
    return latency_s + tokens * model.kv_bytes_per_token / (link_gbps * 1e9)


def weight_load_time_s(
    model: ModelSpec | str, gpu: GPUSpec | str, tp: int = 1, pp: int = 1, dtype: str = "fp16"
) -> float:
    """Cold start: each GPU loads its weight shard from host memory over ``host_link_gbps`` (in parallel)."""
    gpu, model = _resolve(gpu, model)
    return weights_per_gpu_bytes(model, tp, pp, dtype) / (gpu.host_link_gbps * 1e9)
