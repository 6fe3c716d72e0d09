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

Related: splitwise-sim and DistServe fit ``a + b * sum(tokens) (+ c * sum(tokens)^2)`` per
phase directly to profiles; here the shape comes from the hardware and only efficiencies
are fitted. Not modelled: the final norm, the logits all-gather, and kernel overlap between ops.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from functools import cache

from hardware.engines import DEFAULT_ENGINE, EngineProfile, get_engine
from hardware.gpus import GPUSpec, get_gpu
from hardware.kernel_sets import PCIE_FAMILIES, kernel_efficiency
from hardware.models import (
    FP8_BYTES_PER_LINEAR_WEIGHT,
    FP16_BYTES,
    WEIGHT_DTYPES,
    ModelSpec,
    bytes_per_linear_weight,
    check_fits,
    get_model,
    kv_bytes_per_token_per_gpu,
    weights_per_gpu_bytes,
)
from hardware.profiles import ACTIVATION_BYTES, gemm_bytes, gemm_flops

ACTIVATION_RESERVE_TOKENS = 2048
"""Tokens of the profiling forward pass whose activations vLLM keeps free of KV cache
(its default ``max_num_batched_tokens`` with chunked prefill)."""


def _check_int(label: str, value: object, minimum: int) -> None:
    if type(value) is int and value >= minimum:  # the common case, checked cheaply
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{label}={value!r} must be an integer >= {minimum}")


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


@dataclass(frozen=True)
class _Gemm:
    """One linear op on one GPU: ``experts`` weight blocks of ``fan_in x fan_out``, each token
    using ``experts_per_token`` of them (1 and 1 for a dense op)."""

    fan_in: float
    fan_out: float
    weight_bytes_per_param: float
    experts: int = 1
    experts_per_token: int = 1

    def flops(self, tokens: int) -> float:
        return gemm_flops(tokens * self.experts_per_token, self.fan_in, self.fan_out)

    def moved_bytes(self, tokens: int) -> float:
        experts_hit = self.experts * (1.0 - (1.0 - self.experts_per_token / self.experts) ** tokens)
        weights = gemm_bytes(0, self.fan_in, self.fan_out, self.weight_bytes_per_param) * experts_hit
        return weights + gemm_bytes(tokens * self.experts_per_token, self.fan_in, self.fan_out, 0.0)


def _attention_gemms(model: ModelSpec, tp: int, weight_bytes: float) -> list[_Gemm]:
    """QKV and O projections per GPU (MLA: down-projections replicated, up-projections sharded)."""
    h, n = model.hidden_size, model.num_heads
    if model.uses_mla:
        qk_dim = model.qk_nope_head_dim + model.qk_rope_head_dim
        gemms = [_Gemm(h, model.kv_lora_rank + model.qk_rope_head_dim, weight_bytes)]
        if model.q_lora_rank:
            gemms += [
                _Gemm(h, model.q_lora_rank, weight_bytes),
                _Gemm(model.q_lora_rank, n * qk_dim / tp, weight_bytes),
            ]
        else:
            gemms.append(_Gemm(h, n * qk_dim / tp, weight_bytes))
        kv_up_width = n * (model.qk_nope_head_dim + model.v_head_dim) / tp
        return gemms + [
            _Gemm(model.kv_lora_rank, kv_up_width, weight_bytes),
            _Gemm(n * model.v_head_dim / tp, h, weight_bytes),
        ]
    kv_heads_per_gpu = max(model.num_kv_heads / tp, 1.0)
    qkv_width = (n / tp + 2 * kv_heads_per_gpu) * model.head_dim
    return [_Gemm(h, qkv_width, weight_bytes), _Gemm(n * model.head_dim / tp, h, weight_bytes)]


def _mlp_gemms(model: ModelSpec, tp: int, weight_bytes: float, moe: bool) -> list[_Gemm]:
    """MLP up(+gate) and down per GPU; an MoE layer adds its router and splits shared/routed experts."""
    h = model.hidden_size
    if not moe:
        up_width = (2 if model.gated_mlp else 1) * model.intermediate_size / tp
        return [_Gemm(h, up_width, weight_bytes), _Gemm(model.intermediate_size / tp, h, weight_bytes)]
    expert_width = model.moe_intermediate_size / tp
    gemms = [
        _Gemm(h, model.num_experts, weight_bytes),
        _Gemm(h, 2 * expert_width, weight_bytes, model.num_experts, model.experts_per_token),
        _Gemm(expert_width, h, weight_bytes, model.num_experts, model.experts_per_token),
    ]
    if model.num_shared_experts:
        shared_width = model.num_shared_experts * expert_width
        gemms += [_Gemm(h, 2 * shared_width, weight_bytes), _Gemm(shared_width, h, weight_bytes)]
    return gemms


def _elementwise_bytes_per_token(model: ModelSpec, tp: int, moe: bool) -> list[float]:
    """Bytes per token of the per-layer elementwise ops Vidur profiles: two layernorms, rope
    (absent with learned positions), the MLP activation and the residual add."""
    a, h = ACTIVATION_BYTES, model.hidden_size
    if moe:
        activation = 3 * model.moe_intermediate_size / tp * (model.experts_per_token + model.num_shared_experts)
    else:
        activation = (3 if model.gated_mlp else 2) * model.intermediate_size / tp
    ops = [a * 2 * h, a * 2 * h, a * activation, a * 3 * h]
    if not model.learned_position_embeddings:
        if model.uses_mla:
            rope = 2 * (model.num_heads / tp + 1) * model.qk_rope_head_dim
        else:
            rope = 2 * (model.num_heads / tp + max(model.num_kv_heads / tp, 1.0)) * model.head_dim
        ops.append(a * rope)
    return ops


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
        self._compute, self._links, self._attention = self.kernels.compute, self.kernels.links, self.kernels.attention
        if self.engine.all_reduce_latency_s is not None and self.gpu.profile_family not in PCIE_FAMILIES:
            self._links = replace(self._links, all_reduce_latency_s=self.engine.all_reduce_latency_s)
        weight_bytes = bytes_per_linear_weight(dtype)
        m = self.model
        attention = _attention_gemms(m, tp, weight_bytes)
        self._layer_kinds = [
            (count, attention + _mlp_gemms(m, tp, weight_bytes, moe), _elementwise_bytes_per_token(m, tp, moe))
            for count, moe in ((m.num_layers - m.num_moe_layers, False), (m.num_moe_layers, True))
            if count
        ]
        head_width = m.hidden_size if m.encoder_only else m.vocab_size / tp
        self._head = _Gemm(m.hidden_size, head_width, FP16_BYTES)
        self._query_width_per_gpu = m.num_heads / tp * m.head_dim
        value_dim = m.v_head_dim if m.uses_mla else m.head_dim
        self._score_flops_per_pair = 2.0 * m.num_heads / tp * (m.head_dim + value_dim)
        kv_bytes_per_layer = kv_bytes_per_token_per_gpu(m, tp, 1) / m.num_layers
        self._per_context_token_s = m.num_layers * kv_bytes_per_layer / (
            self.gpu.mem_bandwidth_gbps * 1e9 * self._attention.decode_kv_memory_fraction
        )
        self._decode_coefficients: dict[int, tuple[float, float]] = {}
        self._token_terms: dict[tuple[int, int], float] = {}
        self._stage_terms: dict[tuple[int, int], tuple[float, float, float]] = {}

    def __repr__(self) -> str:
        return (
            f"IterationLatencyModel({self.gpu.name!r}, {self.model.name!r}, tp={self.tp}, pp={self.pp}, "
            f"dtype={self.dtype!r}, engine={self.engine.name!r}, cpu_fixed_s={self.cpu_fixed_s!r}, "
            f"cpu_per_sequence_s={self.cpu_per_sequence_s!r})"
        )

    def cpu_s(self, sequences: int) -> float:
        """CPU time of an iteration over ``sequences`` sequences (the GPU waits for it)."""
        return self.cpu_fixed_s + self.cpu_per_sequence_s * sequences

    # --- per-layer pieces (seconds) -------------------------------------------------------

    def _linear_s(self, gemm: _Gemm, tokens: int) -> float:
        flops, moved = gemm.flops(tokens), gemm.moved_bytes(tokens)
        if gemm.experts > 1:
            grouped = self.kernels.int4_grouped_gemm if self.dtype == "int4" else self.kernels.grouped_gemm
            if grouped is not None:
                return grouped.time_s(flops, moved, self.gpu)
        if gemm.weight_bytes_per_param == FP8_BYTES_PER_LINEAR_WEIGHT and self.kernels.fp8 is not None:
            return self.kernels.fp8.time_s(flops, moved, self.gpu)
        return float(self._compute.linear_time_s(flops, moved, self.gpu))

    def _layers_s(self, tokens: int) -> float:
        """All layers' linear and elementwise ops for ``tokens`` tokens (no attention, no comms)."""
        total = 0.0
        for count, gemms, elementwise_bytes in self._layer_kinds:
            layer = sum(self._linear_s(gemm, tokens) for gemm in gemms)
            layer += sum(
                float(self._compute.elementwise_time_s(moved * tokens, self.gpu)) for moved in elementwise_bytes
            )
            total += count * layer
        return total

    def prefill_attention_layer_s(self, tokens: int, attention_pairs: float) -> float:
        """One layer's prefill attention for ``tokens`` new tokens and ``attention_pairs`` query-key pairs."""
        cal = self._attention
        bandwidth, peak = self.gpu.mem_bandwidth_gbps * 1e9, self.gpu.fp16_tflops * 1e12
        per_token_s = cal.prefill_bytes_per_query_channel * self._query_width_per_gpu / bandwidth
        pair_s = self._score_flops_per_pair / (peak * cal.prefill_compute_fraction)
        return cal.prefill_fixed_s + per_token_s * tokens + pair_s * attention_pairs

    def decode_attention_layer_s(self, batch_size: int, context_tokens: int) -> float:
        """One layer's decode attention: ``batch_size`` sequences, ``context_tokens`` KV tokens in all."""
        cal = self._attention
        per_context_token_s = self._per_context_token_s / self.model.num_layers
        per_sequence_s = cal.decode_per_sequence_s * batch_size
        return cal.decode_fixed_s + per_sequence_s + per_context_token_s * context_tokens

    def _token_terms_s(self, tokens: int, logit_tokens: int) -> float:
        """The part of an iteration that depends only on its token counts (linear and
        elementwise ops, collectives, embedding, LM head); memoized, the simulator asks for
        the same counts again and again."""
        key = (tokens, logit_tokens)
        cached = self._token_terms.get(key)
        if cached is None:
            m = self.model
            cached = self._layers_s(tokens)
            activation_bytes = tokens * m.hidden_size * ACTIVATION_BYTES
            if self.tp > 1:
                cached += 2 * m.num_layers * self._links.all_reduce_time_s(activation_bytes, self.tp, self.gpu)
            send_s, embedding_s, head_s = self._stage_terms_s(tokens, logit_tokens)
            cached += (self.pp - 1) * send_s
            cached += embedding_s
            cached += head_s
            self._token_terms[key] = cached
        return cached

    def _stage_terms_s(self, tokens: int, logit_tokens: int) -> tuple[float, float, float]:
        """(one activation send/recv between stages, the embedding, the LM head), memoized."""
        key = (tokens, logit_tokens)
        cached = self._stage_terms.get(key)
        if cached is None:
            activation_bytes = tokens * self.model.hidden_size * ACTIVATION_BYTES
            cached = (
                self._links.send_recv_time_s(activation_bytes, self.gpu),
                float(self._compute.embedding_time_s(2 * activation_bytes, self.gpu)),
                self._linear_s(self._head, logit_tokens),
            )
            self._stage_terms[key] = cached
        return cached

    def _fixed_s(
        self, tokens: int, logit_tokens: int, prefill_tokens: int, prefill_pairs: float, decode_batch: int
    ) -> float:
        """Everything except the KV-read term proportional to decode context tokens."""
        m, cal = self.model, self._attention
        total = self._token_terms_s(tokens, logit_tokens)
        if prefill_tokens:
            total += m.num_layers * self.prefill_attention_layer_s(prefill_tokens, prefill_pairs)
        if decode_batch:
            total += m.num_layers * (cal.decode_fixed_s + cal.decode_per_sequence_s * decode_batch)
        return total + self.cpu_s(logit_tokens)

    # --- public API ---------------------------------------------------------------------

    def decode_coefficients(self, batch_size: int) -> tuple[float, float]:
        """(base_s, per_context_token_s): a decode-only iteration of ``batch_size`` sequences whose
        context lengths sum to C tokens takes exactly ``base_s + per_context_token_s * C`` seconds."""
        if type(batch_size) is not int:  # True == 1 and 1.0 == 1 would hit the cache
            _check_int("batch_size", batch_size, 1)
            batch_size = int(batch_size)
        cached = self._decode_coefficients.get(batch_size)
        if cached is None:
            _check_int("batch_size", batch_size, 1)
            cached = (self._fixed_s(batch_size, batch_size, 0, 0.0, batch_size), self._per_context_token_s)
            self._decode_coefficients[batch_size] = cached
        return cached

    def decode_time_s(self, batch_size: int, context_tokens: int) -> float:
        """Decode-only iteration time, ``base_s + per_context_token_s * context_tokens``."""
        _check_int("context_tokens", context_tokens, 0)
        base_s, per_context_token_s = self.decode_coefficients(batch_size)
        return base_s + per_context_token_s * context_tokens

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
        tokens = prefill_tokens + decode_batch_size
        fixed_s = self._fixed_s(
            tokens, decode_batch_size + 1, prefill_tokens, prefill_attention_pairs, decode_batch_size
        )
        return fixed_s + self._per_context_token_s * decode_context_tokens

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
        pp = self.pp
        if pp == 1:
            return (iteration_s,)
        send_s, embedding_s, head_s = self._stage_terms_s(tokens, logit_tokens)
        cpu_s = self.cpu_s(logit_tokens)
        layers_s = iteration_s - cpu_s - embedding_s - head_s - (pp - 1) * send_s
        if layers_s <= 0:
            raise ValueError(
                f"iteration_s={iteration_s!r} is shorter than the CPU overhead, embedding, LM head and "
                f"sends of {tokens} tokens alone"
            )
        stage_s = layers_s / pp
        return (cpu_s + embedding_s + stage_s + send_s,) + (stage_s + send_s,) * (pp - 2) + (
            stage_s + head_s,
        )

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
