"""LLM architecture catalog: parameter counts, weight bytes, KV bytes and weight sharding.

Shapes come from each model's public Hugging Face ``config.json`` (repo id in the
``source`` column of ``hardware/data/models.csv``). Parameter counting:

* Attention, standard (MHA/GQA): Q and O are ``hidden x heads*head_dim``; K and V are
  ``hidden x kv_heads*head_dim``.
* Attention, DeepSeek MLA (``kv_lora_rank > 0``, DeepSeek-V2 paper Sec. 2.1): down-projections
  ``q_a`` (hidden x q_lora_rank) and ``kv_a`` (hidden x (kv_lora_rank + rope dim)), up-projections
  ``q_b`` (q_lora_rank x heads*(nope + rope)) and ``kv_b`` (kv_lora_rank x heads*(nope + v)), and
  ``o`` (heads*v x hidden).
* MLP: ``3 * hidden * intermediate`` when gated (SwiGLU), else ``2 * hidden * intermediate``.
  MoE layers (after the first ``dense_layers``) hold ``num_experts`` routed plus
  ``num_shared_experts`` gated experts of width ``moe_intermediate_size`` and a router
  (``num_experts x hidden``).
* Norm weights (and norm biases when ``linear_bias``), biases of every linear layer only when
  ``linear_bias`` (BERT, Phi-2). Qwen's QKV-only bias (< 0.01 % of its parameters) is ignored.
* Embeddings ``vocab x hidden``, plus a separate LM head unless ``tied_embeddings``;
  learned absolute positions when ``learned_position_embeddings > 0``.
* ``encoder_only`` marks a BERT encoder: token-type embeddings (2 types), embedding
  LayerNorm, pooler (``hidden x hidden`` + bias), no LM head (what ``BertModel`` holds).

Tensor parallelism (Megatron/vLLM): every linear weight and the vocabulary are split across
the ``tp`` ranks, except MLA's down-projections and the MoE router (replicated, as vLLM does)
and norms/biases (counted as replicated, a conservative rounding). When ``tp > num_kv_heads``
each rank holds one whole KV head, i.e. KV heads are replicated ``tp / num_kv_heads`` times
(vLLM's rule), so ``tp`` must divide ``num_heads`` and either divide or be a multiple of
``num_kv_heads``. Pipeline parallelism splits layers into ``pp`` contiguous stages, the first
``num_layers % pp`` stages taking one extra layer; embeddings sit on the first stage, final
norm, LM head and pooler on the last.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from types import MappingProxyType

from hardware.csv_rows import checked_rows
from hardware.gpus import GPUSpec

_DATA = Path(__file__).parent / "data" / "models.csv"

FP16_BYTES = 2.0
WEIGHT_DTYPES = ("fp16", "fp8", "int4")
FP8_BYTES_PER_LINEAR_WEIGHT = 1.0
"""FP8 (e4m3) linear weights: one byte each (a per-tensor or per-channel scale is negligible)."""
INT4_GROUP_SIZE = 128
"""AWQ/GPTQ default group size: each group of 128 weights shares one fp16 scale and one
4-bit zero point, so an int4 linear weight costs ``0.5 + (2 + 0.5) / 128`` bytes."""
INT4_BYTES_PER_LINEAR_WEIGHT = 0.5 + (FP16_BYTES + 0.5) / INT4_GROUP_SIZE

_POSITIVE_INT_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "intermediate_size",
    "vocab_size",
    "num_experts",
    "experts_per_token",
    "context_tokens",
)
_NON_NEGATIVE_INT_FIELDS = (
    "moe_intermediate_size",
    "num_shared_experts",
    "dense_layers",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "learned_position_embeddings",
    "attention_head_dim",
)
_BOOL_FIELDS = ("gated_mlp", "tied_embeddings", "linear_bias", "encoder_only")
_MLA_ONLY_FIELDS = ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class _LayerParams:
    """Parameters of one transformer layer, grouped by how TP shards them and how they quantize."""

    sharded_linear: int
    kv_linear: int
    replicated_linear: int
    fp16_other: int

    @property
    def total(self) -> int:
        return self.sharded_linear + self.kv_linear + self.replicated_linear + self.fp16_other


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One transformer architecture (field names follow Hugging Face ``config.json``).

    ``context_tokens`` is the longest sequence (prompt + output) the model serves: vLLM's
    ``max_model_len``, taken from ``max_position_embeddings`` (or the model card where that
    differs), cited in ``context_source``; ``simulator.context`` applies it to requests.

    ``attention_head_dim`` is the width of one attention head where it is not ``hidden_size /
    num_heads`` (Qwen3: 128 with 64 heads of a 5,120-wide model); 0 derives it.

    ``kv_lora_rank > 0`` selects DeepSeek multi-head latent attention, which also uses
    ``q_lora_rank`` (0 = full-rank query), ``qk_rope_head_dim``, ``qk_nope_head_dim`` and
    ``v_head_dim``; these four must be 0 otherwise.
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool
    num_experts: int = 1
    experts_per_token: int = 1
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    tied_embeddings: bool = False
    learned_position_embeddings: int = 0
    linear_bias: bool = False
    encoder_only: bool = False
    attention_head_dim: int = 0
    source: str
    context_tokens: int
    context_source: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"model name must be a non-empty string, got {self.name!r}")
        for field_name in _POSITIVE_INT_FIELDS:
            value = getattr(self, field_name)
            if not _is_int(value) or value <= 0:
                raise ValueError(f"model {self.name!r}: {field_name}={value!r} must be a positive integer")
        for field_name in _NON_NEGATIVE_INT_FIELDS:
            value = getattr(self, field_name)
            if not _is_int(value) or value < 0:
                raise ValueError(
                    f"model {self.name!r}: {field_name}={value!r} must be a non-negative integer"
                )
        for field_name in _BOOL_FIELDS:
            value = getattr(self, field_name)
            if not isinstance(value, bool):
                raise ValueError(f"model {self.name!r}: {field_name}={value!r} must be a bool")
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError(f"model {self.name!r}: source must cite the config it comes from")
        if not isinstance(self.context_source, str) or not self.context_source.strip():
            raise ValueError(f"model {self.name!r}: context_source must cite where context_tokens comes from")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"model {self.name!r}: num_heads={self.num_heads} is not a multiple of "
                f"num_kv_heads={self.num_kv_heads}"
            )
        self._check_attention()
        self._check_experts()

    def _check_attention(self) -> None:
        if self.uses_mla:
            for field_name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
                if getattr(self, field_name) == 0:
                    raise ValueError(f"model {self.name!r}: MLA (kv_lora_rank > 0) needs {field_name} > 0")
            if self.linear_bias:
                raise ValueError(f"model {self.name!r}: linear_bias with MLA is not modelled")
            if self.attention_head_dim:
                raise ValueError(f"model {self.name!r}: attention_head_dim does not apply to MLA (its head widths are given)")
            return
        for field_name in _MLA_ONLY_FIELDS:
            if getattr(self, field_name) != 0:
                raise ValueError(
                    f"model {self.name!r}: {field_name}={getattr(self, field_name)} is only valid "
                    "with MLA (kv_lora_rank > 0)"
                )
        if not self.attention_head_dim and self.hidden_size % self.num_heads:
            raise ValueError(
                f"model {self.name!r}: hidden_size={self.hidden_size} is not divisible by "
                f"num_heads={self.num_heads}"
            )

    def _check_experts(self) -> None:
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"model {self.name!r}: experts_per_token={self.experts_per_token} exceeds "
                f"num_experts={self.num_experts}"
            )
        if not self.is_moe:
            for field_name in ("moe_intermediate_size", "num_shared_experts", "dense_layers"):
                if getattr(self, field_name) != 0:
                    raise ValueError(
                        f"model {self.name!r}: {field_name}={getattr(self, field_name)} needs num_experts > 1"
                    )
            return
        if self.moe_intermediate_size == 0:
            raise ValueError(f"model {self.name!r}: an MoE model needs moe_intermediate_size > 0")
        if self.dense_layers >= self.num_layers:
            raise ValueError(
                f"model {self.name!r}: dense_layers={self.dense_layers} leaves no MoE layer "
                f"among num_layers={self.num_layers}"
            )
        if self.linear_bias:
            raise ValueError(f"model {self.name!r}: linear_bias with MoE is not modelled")

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def head_dim(self) -> int:
        """Query/key width of one head: ``attention_head_dim`` if given, else ``hidden / heads``;
        ``nope + rope`` dims under MLA."""
        if self.uses_mla:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.attention_head_dim or self.hidden_size // self.num_heads

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    def _attention_params(self) -> _LayerParams:
        h, n = self.hidden_size, self.num_heads
        norm_weights = 2 * h * (2 if self.linear_bias else 1)
        if self.uses_mla:
            qk_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q_replicated, q_sharded = h * self.q_lora_rank, self.q_lora_rank * n * qk_dim
            else:
                q_replicated, q_sharded = 0, h * n * qk_dim
            kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv_up = self.kv_lora_rank * n * (self.qk_nope_head_dim + self.v_head_dim)
            out = n * self.v_head_dim * h
            return _LayerParams(
                sharded_linear=q_sharded + kv_up + out,
                kv_linear=0,
                replicated_linear=q_replicated + kv_down,
                fp16_other=norm_weights + self.q_lora_rank + self.kv_lora_rank,
            )
        s, k = self.head_dim, self.num_kv_heads
        biases = (n * s + 2 * k * s + h) if self.linear_bias else 0
        return _LayerParams(
            sharded_linear=2 * h * n * s,
            kv_linear=2 * h * k * s,
            replicated_linear=0,
            fp16_other=norm_weights + biases,
        )

    @property
    def _expert_params(self) -> int:
        return 3 * self.hidden_size * self.moe_intermediate_size

    def _mlp_params(self, moe: bool) -> _LayerParams:
        h = self.hidden_size
        if moe:
            return _LayerParams(
                sharded_linear=(self.num_experts + self.num_shared_experts) * self._expert_params,
                kv_linear=0,
                replicated_linear=self.num_experts * h,
                fp16_other=0,
            )
        projections = 3 if self.gated_mlp else 2
        biases = ((projections - 1) * self.intermediate_size + h) if self.linear_bias else 0
        return _LayerParams(
            sharded_linear=projections * h * self.intermediate_size,
            kv_linear=0,
            replicated_linear=0,
            fp16_other=biases,
        )

    def _layer_params(self, layer_index: int) -> _LayerParams:
        attention = self._attention_params()
        mlp = self._mlp_params(moe=self.is_moe and layer_index >= self.dense_layers)
        return _LayerParams(
            sharded_linear=attention.sharded_linear + mlp.sharded_linear,
            kv_linear=attention.kv_linear + mlp.kv_linear,
            replicated_linear=attention.replicated_linear + mlp.replicated_linear,
            fp16_other=attention.fp16_other + mlp.fp16_other,
        )

    @property
    def _vocab_embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def _lm_head_params(self) -> int:
        if self.encoder_only or self.tied_embeddings:
            return 0
        return self._vocab_embedding_params

    @property
    def _first_stage_fp16_params(self) -> int:
        """Non-vocab embedding parameters (positions, token types, embedding LayerNorm)."""
        h = self.hidden_size
        extra = self.learned_position_embeddings * h
        if self.encoder_only:
            extra += 2 * h + 2 * h
        return extra

    @property
    def _last_stage_fp16_params(self) -> int:
        """Final norm and LM-head bias (decoders) or pooler bias (encoders)."""
        h = self.hidden_size
        if self.encoder_only:
            return h
        final_norm = h * (2 if self.linear_bias else 1)
        lm_head_bias = self.vocab_size if self.linear_bias and self._lm_head_params else 0
        return final_norm + lm_head_bias

    @property
    def _pooler_linear_params(self) -> int:
        return self.hidden_size * self.hidden_size if self.encoder_only else 0

    @property
    def _block_linear_params(self) -> int:
        return sum(
            p.sharded_linear + p.kv_linear + p.replicated_linear
            for p in (self._layer_params(j) for j in range(self.num_layers))
        )

    @property
    def params_total(self) -> int:
        """All parameters (every expert counted)."""
        layers = sum(self._layer_params(j).total for j in range(self.num_layers))
        return (
            layers
            + self._vocab_embedding_params
            + self._lm_head_params
            + self._first_stage_fp16_params
            + self._last_stage_fp16_params
            + self._pooler_linear_params
        )

    @property
    def _inactive_expert_params(self) -> int:
        idle_experts = self.num_experts - self.experts_per_token
        return idle_experts * self._expert_params * self.num_moe_layers

    @property
    def params_active(self) -> int:
        """Parameters touched per token: MoE counts only the routed ``experts_per_token`` plus shared experts."""
        return self.params_total - self._inactive_expert_params

    def weight_bytes(self, dtype: str = "fp16") -> float:
        """Bytes of all weights: fp16 = 2 bytes/param; fp8 and int4 (AWQ/GPTQ) quantize
        transformer-block linear weights (and the BERT pooler) to 8 bits, or 4 bits plus group
        scales, keeping embeddings, LM head, norms and biases in fp16."""
        bytes_per_linear = bytes_per_linear_weight(dtype)
        linear = self._block_linear_params + self._pooler_linear_params
        return linear * bytes_per_linear + (self.params_total - linear) * FP16_BYTES

    @property
    def kv_bytes_per_token(self) -> float:
        """fp16 KV-cache bytes per token over all layers.

        Standard attention: ``2 (K and V) * layers * kv_heads * head_dim * 2 bytes`` (GQA-aware).
        MLA caches one compressed latent plus the shared RoPE key per layer (DeepSeek-V2
        Sec. 2.1.2): ``layers * (kv_lora_rank + qk_rope_head_dim) * 2 bytes``. For encoders this
        is the transient K/V of one forward pass (nothing persists across iterations).
        """
        if self.uses_mla:
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * FP16_BYTES
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * FP16_BYTES

    @property
    def flops_per_token_linear(self) -> float:
        """Matmul FLOPs per token outside attention scores: ``2 * active block-linear params``
        (attention projections, active experts, router). Excludes the embedding lookup, the
        LM head and the BERT pooler, which run once per sequence in prefill."""
        return 2.0 * (self._block_linear_params - self._inactive_expert_params)


def bytes_per_linear_weight(dtype: str) -> float:
    if dtype == "fp16":
        return FP16_BYTES
    if dtype == "fp8":
        return FP8_BYTES_PER_LINEAR_WEIGHT
    if dtype == "int4":
        return INT4_BYTES_PER_LINEAR_WEIGHT
    raise ValueError(f"unknown weight dtype {dtype!r}; known: {', '.join(WEIGHT_DTYPES)}")


def _validate_parallelism(model: ModelSpec, tp: int, pp: int) -> None:
    for label, value in (("tp", tp), ("pp", pp)):
        if not _is_int(value) or value <= 0:
            raise ValueError(f"{label}={value!r} must be a positive integer")
    if model.num_heads % tp:
        raise ValueError(f"tp={tp} does not divide {model.name} num_heads={model.num_heads}")
    kv_heads = model.num_kv_heads
    if kv_heads % tp and tp % kv_heads:
        raise ValueError(
            f"tp={tp} neither divides nor is a multiple of {model.name} num_kv_heads={kv_heads}"
        )
    if pp > model.num_layers:
        raise ValueError(f"pp={pp} exceeds {model.name} num_layers={model.num_layers}")


def _stage_layer_ranges(num_layers: int, pp: int) -> list[range]:
    base, extra = divmod(num_layers, pp)
    ranges, start = [], 0
    for stage in range(pp):
        count = base + (1 if stage < extra else 0)
        ranges.append(range(start, start + count))
        start += count
    return ranges


def weights_per_gpu_bytes(model: ModelSpec, tp: int = 1, pp: int = 1, dtype: str = "fp16") -> float:
    """Weight bytes on the most loaded GPU of a ``tp x pp`` deployment (sharding rules in the module docstring)."""
    _validate_parallelism(model, tp, pp)
    return _weights_per_gpu_bytes(model, int(tp), int(pp), dtype)


@cache
def _weights_per_gpu_bytes(model: ModelSpec, tp: int, pp: int, dtype: str) -> float:
    """``weights_per_gpu_bytes`` after validation, memoized: an autoscaler deploys the same
    configurations again and again, and each deployment asks for it three times."""
    bytes_per_linear = bytes_per_linear_weight(dtype)
    kv_share = 1.0 / tp if tp <= model.num_kv_heads else 1.0 / model.num_kv_heads
    stages = _stage_layer_ranges(model.num_layers, pp)
    per_gpu = []
    for stage_index, layer_range in enumerate(stages):
        linear, fp16 = 0.0, 0.0
        for layer_index in layer_range:
            params = model._layer_params(layer_index)
            linear += params.sharded_linear / tp + params.kv_linear * kv_share + params.replicated_linear
            fp16 += params.fp16_other
        if stage_index == 0:
            fp16 += model._vocab_embedding_params / tp + model._first_stage_fp16_params
        if stage_index == len(stages) - 1:
            fp16 += model._lm_head_params / tp + model._last_stage_fp16_params
            linear += model._pooler_linear_params
        per_gpu.append(linear * bytes_per_linear + fp16 * FP16_BYTES)
    return max(per_gpu)


def kv_bytes_per_token_per_gpu(model: ModelSpec, tp: int = 1, pp: int = 1) -> float:
    """fp16 KV bytes one token occupies on the most loaded GPU: the largest stage's layers,
    ``max(kv_heads / tp, 1)`` heads per rank; MLA's latent is replicated on every TP rank."""
    _validate_parallelism(model, tp, pp)
    stage_layers = max(len(r) for r in _stage_layer_ranges(model.num_layers, pp))
    layer_share = stage_layers / model.num_layers
    if model.uses_mla:
        return model.kv_bytes_per_token * layer_share
    heads_per_rank = max(model.num_kv_heads // tp, 1)
    return model.kv_bytes_per_token * layer_share * heads_per_rank / model.num_kv_heads


def check_fits(
    model: ModelSpec,
    gpu: GPUSpec,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "fp16",
    memory_utilization: float = 0.9,
) -> None:
    """Raise ``ValueError`` unless each GPU's weight shard fits in ``memory_utilization`` of its memory."""
    if (
        isinstance(memory_utilization, bool)
        or not isinstance(memory_utilization, numbers.Real)
        or not math.isfinite(memory_utilization)
        or not 0.0 < memory_utilization <= 1.0
    ):
        raise ValueError(f"memory_utilization={memory_utilization!r} must be in (0, 1]")
    needed_bytes = weights_per_gpu_bytes(model, tp, pp, dtype)
    available_bytes = gpu.memory_bytes * memory_utilization
    if needed_bytes > available_bytes:
        raise ValueError(
            f"{model.name} ({dtype}, tp={tp}, pp={pp}) needs {needed_bytes:.4g} bytes of weights per GPU "
            f"but {gpu.name} has {available_bytes:.4g} bytes available "
            f"({memory_utilization:g} of {gpu.memory_bytes:.4g})"
        )


_CSV_COLUMNS = tuple(f.name for f in fields(ModelSpec))


def _parse_field(field_name: str, text: str) -> object:
    if field_name in _BOOL_FIELDS:
        if text not in ("true", "false"):
            raise ValueError(f"{field_name}={text!r} must be 'true' or 'false'")
        return text == "true"
    if field_name in _POSITIVE_INT_FIELDS or field_name in _NON_NEGATIVE_INT_FIELDS:
        if not (text.isascii() and text.isdigit()):
            raise ValueError(f"{field_name}={text!r} must be a non-negative integer")
        return int(text)
    return text


def load_model_catalog(csv_path: Path) -> dict[str, ModelSpec]:
    """Parse and validate a model catalog CSV; errors name the bad row (line) and field."""
    catalog: dict[str, ModelSpec] = {}
    for where, row in checked_rows(csv_path, _CSV_COLUMNS):
        try:
            spec = ModelSpec(**{name: _parse_field(name, text) for name, text in row.items()})
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if spec.name in catalog:
            raise ValueError(f"{where}: duplicate model name {spec.name!r}")
        catalog[spec.name] = spec
    if not catalog:
        raise ValueError(f"{csv_path}: no model rows")
    return catalog


MODEL_CATALOG: Mapping[str, ModelSpec] = MappingProxyType(load_model_catalog(_DATA))


def model_names() -> list[str]:
    """Catalog keys in CSV order."""
    return list(MODEL_CATALOG)


def get_model(name: str) -> ModelSpec:
    """The catalog entry for ``name`` (exact key); ``ValueError`` listing known names otherwise."""
    try:
        return MODEL_CATALOG[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_CATALOG)}") from None
