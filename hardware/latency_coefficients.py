"""What the compiled latency evaluator needs of one (GPU, model, TP, PP, dtype, engine).

``hardware/latency.py`` documents the latency model; its evaluation runs in C++
(``core/src/latency.cpp``, ``servegym_core``). This module describes the iteration in numbers
for it: the per-GPU GEMMs and elementwise ops of each layer kind, the LM head, and the kernel
efficiencies, link fits, attention calibration and CPU terms of the engine on the GPU.
"""

from __future__ import annotations

from servegym_core import _core

from hardware.gpus import GPUSpec
from hardware.kernel_sets import GemmEfficiency, KernelEfficiency
from hardware.models import FP8_BYTES_PER_LINEAR_WEIGHT, FP16_BYTES, ModelSpec, kv_bytes_per_token_per_gpu
from hardware.profiles import ACTIVATION_BYTES, LinkEfficiency

LayerKinds = list[tuple[int, list[_core.Gemm], list[float]]]
"""(number of layers, their GEMMs, their elementwise ops' bytes per token) per layer kind."""


def gemm(
    fan_in: float, fan_out: float, weight_bytes_per_param: float, experts: int = 1, experts_per_token: int = 1
) -> _core.Gemm:
    """One linear op on one GPU: ``experts`` weight blocks of ``fan_in x fan_out``, each token using
    ``experts_per_token`` of them (1 and 1 for a dense op); activations of ``ACTIVATION_BYTES``."""
    return _core.Gemm(fan_in, fan_out, weight_bytes_per_param, ACTIVATION_BYTES, experts, experts_per_token)


def _attention_gemms(model: ModelSpec, tp: int, weight_bytes: float) -> list[_core.Gemm]:
    """QKV and O projections per GPU (MLA: down-projections replicated, up-projections sharded)."""
    h, n = model.hidden_size, model.num_heads
    if model.uses_mla:
        qk_dim = model.qk_nope_head_dim + model.qk_rope_head_dim
        gemms = [gemm(h, model.kv_lora_rank + model.qk_rope_head_dim, weight_bytes)]
        if model.q_lora_rank:
            gemms += [
                gemm(h, model.q_lora_rank, weight_bytes),
                gemm(model.q_lora_rank, n * qk_dim / tp, weight_bytes),
            ]
        else:
            gemms.append(gemm(h, n * qk_dim / tp, weight_bytes))
        kv_up_width = n * (model.qk_nope_head_dim + model.v_head_dim) / tp
        return gemms + [
            gemm(model.kv_lora_rank, kv_up_width, weight_bytes),
            gemm(n * model.v_head_dim / tp, h, weight_bytes),
        ]
    kv_heads_per_gpu = max(model.num_kv_heads / tp, 1.0)
    qkv_width = (n / tp + 2 * kv_heads_per_gpu) * model.head_dim
    return [gemm(h, qkv_width, weight_bytes), gemm(n * model.head_dim / tp, h, weight_bytes)]


def _mlp_gemms(model: ModelSpec, tp: int, weight_bytes: float, moe: bool) -> list[_core.Gemm]:
    """MLP up(+gate) and down per GPU; an MoE layer adds its router and splits shared/routed experts."""
    h = model.hidden_size
    if not moe:
        up_width = (2 if model.gated_mlp else 1) * model.intermediate_size / tp
        return [gemm(h, up_width, weight_bytes), gemm(model.intermediate_size / tp, h, weight_bytes)]
    expert_width = model.moe_intermediate_size / tp
    gemms = [
        gemm(h, model.num_experts, weight_bytes),
        gemm(h, 2 * expert_width, weight_bytes, model.num_experts, model.experts_per_token),
        gemm(expert_width, h, weight_bytes, model.num_experts, model.experts_per_token),
    ]
    if model.num_shared_experts:
        shared_width = model.num_shared_experts * expert_width
        gemms += [gemm(h, 2 * shared_width, weight_bytes), gemm(shared_width, h, weight_bytes)]
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


def layer_kinds(model: ModelSpec, tp: int, weight_bytes: float) -> LayerKinds:
    """The dense and the MoE layers of ``model`` on one of ``tp`` GPUs (kinds with no layer left out)."""
    attention = _attention_gemms(model, tp, weight_bytes)
    return [
        (count, attention + _mlp_gemms(model, tp, weight_bytes, moe), _elementwise_bytes_per_token(model, tp, moe))
        for count, moe in ((model.num_layers - model.num_moe_layers, False), (model.num_moe_layers, True))
        if count
    ]


def _gemm_kernel(efficiency: GemmEfficiency | None) -> _core.GemmKernel | None:
    if efficiency is None:
        return None
    return _core.GemmKernel(
        efficiency.compute_fraction, efficiency.memory_fraction, efficiency.overhead_s, efficiency.peak_over_fp16
    )


def latency_coefficients(
    gpu: GPUSpec,
    model: ModelSpec,
    tp: int,
    pp: int,
    dtype: str,
    kernels: KernelEfficiency,
    links: LinkEfficiency,
    kinds: LayerKinds,
    cpu_fixed_s: float,
    cpu_per_sequence_s: float,
) -> _core.LatencyCoefficients:
    """The evaluator's coefficients; ``kinds`` from ``layer_kinds``, ``links`` the collective fit
    the engine uses on ``gpu`` (``kernels.links`` unless the engine has its own all-reduce)."""
    c = _core.LatencyCoefficients()
    layers = []
    for count, gemms, elementwise in kinds:
        kind = _core.LayerKind()
        kind.count, kind.gemms, kind.elementwise_bytes_per_token = count, gemms, elementwise
        layers.append(kind)
    c.layer_kinds = layers
    c.head = gemm(model.hidden_size, model.hidden_size if model.encoder_only else model.vocab_size / tp, FP16_BYTES)
    c.fp16_tflops, c.mem_bandwidth_gbps, c.intra_node_link_gbps = (
        gpu.fp16_tflops, gpu.mem_bandwidth_gbps, gpu.intra_node_link_gbps)
    compute = kernels.compute
    c.linear = _core.GemmKernel(compute.compute_fraction, compute.memory_fraction, compute.linear_overhead_s, 1.0)
    c.fp8 = _gemm_kernel(kernels.fp8)
    c.routed_experts = _gemm_kernel(kernels.int4_grouped_gemm if dtype == "int4" else kernels.grouped_gemm)
    c.fp8_bytes_per_linear_weight = FP8_BYTES_PER_LINEAR_WEIGHT
    c.elementwise_memory_fraction, c.elementwise_overhead_s = (
        compute.elementwise_memory_fraction, compute.elementwise_overhead_s)
    c.embedding_memory_fraction, c.embedding_overhead_s = compute.embedding_memory_fraction, compute.embedding_overhead_s
    c.all_reduce_latency_s, c.all_reduce_bandwidth_fraction = (
        links.all_reduce_latency_s, links.all_reduce_bandwidth_fraction)
    c.send_recv_latency_s, c.send_recv_bandwidth_fraction = links.send_recv_latency_s, links.send_recv_bandwidth_fraction
    cal = kernels.attention
    c.decode_fixed_s, c.decode_per_sequence_s = cal.decode_fixed_s, cal.decode_per_sequence_s
    c.prefill_fixed_s, c.prefill_bytes_per_query_channel, c.prefill_compute_fraction = (
        cal.prefill_fixed_s, cal.prefill_bytes_per_query_channel, cal.prefill_compute_fraction)
    c.cpu_fixed_s, c.cpu_per_sequence_s = cpu_fixed_s, cpu_per_sequence_s
    c.tp, c.pp, c.num_layers, c.hidden_size, c.activation_bytes = tp, pp, model.num_layers, model.hidden_size, ACTIVATION_BYTES
    kv_bytes_per_layer = kv_bytes_per_token_per_gpu(model, tp, 1) / model.num_layers
    c.per_context_token_s = model.num_layers * kv_bytes_per_layer / (
        gpu.mem_bandwidth_gbps * 1e9 * cal.decode_kv_memory_fraction
    )
    c.query_width_per_gpu = model.num_heads / tp * model.head_dim
    value_dim = model.v_head_dim if model.uses_mla else model.head_dim
    c.score_flops_per_pair = 2.0 * model.num_heads / tp * (model.head_dim + value_dim)
    return c
