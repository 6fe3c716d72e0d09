"""Model catalog: parameter counts vs published sizes, byte formulas, sharding and fit checks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hardware.gpus import get_gpu
from hardware.models import (
    INT4_BYTES_PER_LINEAR_WEIGHT,
    MODEL_CATALOG,
    check_fits,
    get_model,
    kv_bytes_per_token_per_gpu,
    load_model_catalog,
    model_names,
    weights_per_gpu_bytes,
)

# Published sizes: Hugging Face model-card "Model size" (safetensors parameter total), the
# DeepSeek-V3/R1 report (671B total, 37B activated) and Turc et al. 2019 for the BERT family.
PUBLISHED_PARAMS = {
    "Llama-2-7B": 6.74e9,
    "Llama-2-13B": 13.0e9,
    "Llama-2-70B": 68.98e9,
    "Llama-3-8B": 8.03e9,
    "Llama-3-70B": 70.6e9,
    "Llama-3.1-8B": 8.03e9,
    "Llama-3.1-70B": 70.6e9,
    "Qwen1.5-14B": 14.2e9,
    "DeepSeek-R1-Distill-Qwen-7B": 7.62e9,
    "DeepSeek-R1-Distill-Qwen-32B": 32.8e9,
    "DeepSeek-R1-Distill-Llama-70B": 70.6e9,
    "DeepSeek-R1-671B": 671e9,
    "OpenLlama-3B": 3.43e9,
    "CodeLlama-34B": 33.7e9,
    "Qwen-72B": 72e9,
    "InternLM-20B": 20e9,
    "Phi-2": 2.78e9,
    "Llama-3.3-70B": 70.6e9,
    "Mixtral-8x7B": 46.7e9,
    "Qwen3-32B": 32.8e9,
    "Qwen3-30B-A3B": 30.5e9,
    "BERT-tiny": 4.4e6,
    "BERT-mini": 11.3e6,
    "BERT-small": 29.1e6,
    "BERT-medium": 41.7e6,
    "BERT-base": 110e6,
}

HEADER = (
    "name,num_layers,hidden_size,num_heads,num_kv_heads,intermediate_size,vocab_size,gated_mlp,"
    "num_experts,experts_per_token,moe_intermediate_size,num_shared_experts,dense_layers,kv_lora_rank,"
    "q_lora_rank,qk_rope_head_dim,qk_nope_head_dim,v_head_dim,tied_embeddings,"
    "learned_position_embeddings,linear_bias,encoder_only,attention_head_dim,source,context_tokens,context_source\n"
)
GOOD_ROW = "Tiny,2,64,4,2,128,100,true,1,1,0,0,0,0,0,0,0,0,false,0,false,false,0,test config,2048,test card\n"

# Llama-2-7B by hand: 32 layers of (4 h^2 attention + 3 h i MLP), 2 norms per layer.
LLAMA2_7B_BLOCK_LINEAR = 32 * (4 * 4096**2 + 3 * 4096 * 11008)  # 6_476_005_376
LLAMA2_7B_FP16_OTHER = 2 * 32000 * 4096 + 32 * 2 * 4096 + 4096  # embeddings + LM head + norms


def test_catalog_holds_every_required_model():
    assert set(PUBLISHED_PARAMS) <= set(model_names())
    assert model_names() == list(MODEL_CATALOG)


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_count_within_2_percent_of_published(name):
    assert get_model(name).params_total == pytest.approx(PUBLISHED_PARAMS[name], rel=0.02)


def test_exact_counts_match_checkpoint_totals():
    # Checkpoint totals: Llama-2-7b-hf 6,738,415,616; CodeLlama-34b-hf 33,743,970,304;
    # bert-base-uncased BertModel 109,482,240.
    assert get_model("Llama-2-7B").params_total == 6_738_415_616
    assert get_model("CodeLlama-34B").params_total == 33_743_970_304
    assert get_model("BERT-base").params_total == 109_482_240


def test_deepseek_r1_active_parameters():
    model = get_model("DeepSeek-R1-671B")
    assert model.params_active == pytest.approx(37e9, rel=0.02)
    # Inactive: 248 of 256 routed experts (3 * 7168 * 2048 each) in each of 58 MoE layers.
    assert model.params_total - model.params_active == 248 * 3 * 7168 * 2048 * 58


def test_dense_models_have_all_parameters_active():
    for model in MODEL_CATALOG.values():
        if not model.is_moe:
            assert model.params_active == model.params_total


def test_head_dim():
    assert get_model("Llama-3-8B").head_dim == 128
    assert get_model("OpenLlama-3B").head_dim == 100
    assert get_model("DeepSeek-R1-671B").head_dim == 128 + 64


def test_kv_bytes_per_token_hand_computed():
    # 2 (K, V) * layers * kv_heads * head_dim * 2 bytes.
    assert get_model("Llama-2-7B").kv_bytes_per_token == 2 * 32 * 32 * 128 * 2
    assert get_model("Llama-3-8B").kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert get_model("Llama-2-70B").kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    # MLA: layers * (kv_lora_rank + rope dim) * 2 bytes.
    assert get_model("DeepSeek-R1-671B").kv_bytes_per_token == 61 * (512 + 64) * 2


def test_weight_bytes_fp16_and_int4_hand_computed():
    model = get_model("Llama-2-7B")
    assert model.weight_bytes() == 2 * 6_738_415_616
    assert model.weight_bytes("fp16") == 2 * model.params_total
    expected_int4 = LLAMA2_7B_BLOCK_LINEAR * (0.5 + 2.5 / 128) + LLAMA2_7B_FP16_OTHER * 2
    assert model.weight_bytes("int4") == pytest.approx(expected_int4, rel=1e-12)
    assert INT4_BYTES_PER_LINEAR_WEIGHT == 0.5 + 2.5 / 128


def test_int4_shrinks_every_model_but_less_than_4x():
    for model in MODEL_CATALOG.values():
        ratio = model.weight_bytes("fp16") / model.weight_bytes("int4")
        assert 1.0 < ratio < 4.0


def test_flops_per_token_linear_hand_computed():
    assert get_model("Llama-2-7B").flops_per_token_linear == 2 * LLAMA2_7B_BLOCK_LINEAR
    h = 7168
    mla_attention = h * 1536 + 1536 * 128 * 192 + h * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * h
    dense_mlp = 3 * h * 18432
    active_moe = 9 * 3 * h * 2048 + 256 * h  # 8 routed + 1 shared expert, router
    expected = 2 * (61 * mla_attention + 3 * dense_mlp + 58 * active_moe)
    assert get_model("DeepSeek-R1-671B").flops_per_token_linear == expected


def test_unknown_dtype_raises():
    with pytest.raises(ValueError, match="unknown weight dtype 'int8'; known: fp16, fp8, int4"):
        get_model("Llama-2-7B").weight_bytes("int8")
    with pytest.raises(ValueError, match="unknown weight dtype 'int8'"):
        weights_per_gpu_bytes(get_model("Llama-2-7B"), 1, 1, "int8")


def test_fp8_weights_take_one_byte_per_linear_weight():
    model = get_model("Llama-2-7B")
    fp16, fp8, int4 = (model.weight_bytes(dtype) for dtype in ("fp16", "fp8", "int4"))
    linear_params = fp16 - fp8  # 2 - 1 bytes per linear weight; embeddings and head stay fp16
    assert linear_params == 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert fp8 - int4 == pytest.approx(linear_params * (1.0 - INT4_BYTES_PER_LINEAR_WEIGHT), rel=1e-12)


def test_unknown_model_lists_known_names():
    with pytest.raises(ValueError, match="unknown model 'llama-2-7b'") as info:
        get_model("llama-2-7b")
    for name in ("Llama-2-7B", "DeepSeek-R1-671B", "BERT-base"):
        assert name in str(info.value)


def test_single_gpu_shard_is_the_whole_model():
    for model in MODEL_CATALOG.values():
        assert weights_per_gpu_bytes(model, 1, 1, "fp16") == pytest.approx(model.weight_bytes("fp16"), rel=1e-12)
        assert weights_per_gpu_bytes(model, 1, 1, "int4") == pytest.approx(model.weight_bytes("int4"), rel=1e-12)


def test_tensor_parallel_shard_hand_computed():
    # tp=2: linear weights, embeddings and LM head halve; norms stay replicated.
    norms = 32 * 2 * 4096 + 4096
    expected = 2 * ((LLAMA2_7B_BLOCK_LINEAR + 2 * 32000 * 4096) / 2 + norms)
    assert weights_per_gpu_bytes(get_model("Llama-2-7B"), 2, 1) == pytest.approx(expected, rel=1e-12)


def test_kv_heads_replicate_when_tp_exceeds_them():
    model = get_model("Llama-2-70B")  # 8 KV heads
    q_o, k_v, mlp = 2 * 8192 * 8192, 2 * 8192 * 1024, 3 * 8192 * 28672
    norms = 80 * 2 * 8192 + 8192
    vocab = 2 * 32000 * 8192
    tp16 = 2 * (80 * ((q_o + mlp) / 16 + k_v / 8) + vocab / 16 + norms)
    assert weights_per_gpu_bytes(model, 16, 1) == pytest.approx(tp16, rel=1e-12)
    tp8 = 2 * (80 * (q_o + mlp + k_v) / 8 + vocab / 8 + norms)
    assert weights_per_gpu_bytes(model, 8, 1) == pytest.approx(tp8, rel=1e-12)


def test_pipeline_stages_take_the_largest_stage():
    model = get_model("Llama-2-70B")
    layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    # pp=3 splits 80 layers 27/27/26; the first stage also holds the embedding table.
    first_stage = 27 * layer + 32000 * 8192
    last_stage = 26 * layer + 32000 * 8192 + 8192
    assert weights_per_gpu_bytes(model, 1, 3) == pytest.approx(2 * max(first_stage, last_stage), rel=1e-12)


def test_kv_bytes_per_gpu():
    llama70 = get_model("Llama-2-70B")
    assert kv_bytes_per_token_per_gpu(llama70, 4, 1) == 2 * 80 * 2 * 128 * 2
    assert kv_bytes_per_token_per_gpu(llama70, 16, 1) == 2 * 80 * 1 * 128 * 2
    assert kv_bytes_per_token_per_gpu(get_model("Llama-2-7B"), 1, 2) == 2 * 16 * 32 * 128 * 2
    deepseek = get_model("DeepSeek-R1-671B")
    assert kv_bytes_per_token_per_gpu(deepseek, 8, 1) == deepseek.kv_bytes_per_token


def test_check_fits_accepts_and_rejects_with_byte_counts():
    a100 = get_gpu("A100-80GB")
    llama70 = get_model("Llama-2-70B")
    check_fits(llama70, a100, tp=2)
    check_fits(llama70, a100, dtype="int4")
    with pytest.raises(ValueError) as info:
        check_fits(llama70, a100)
    message = str(info.value)
    assert f"{2 * llama70.params_total:.4g} bytes" in message
    assert f"{0.9 * 80 * 2**30:.4g} bytes available" in message
    check_fits(get_model("DeepSeek-R1-671B"), get_gpu("H20-NVL"), tp=8, dtype="int4")
    with pytest.raises(ValueError, match="DeepSeek-R1-671B .*needs"):
        check_fits(get_model("DeepSeek-R1-671B"), get_gpu("H100-80GB"), tp=8)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, float("nan"), "2"])
def test_non_positive_or_non_integer_parallelism_raises(bad):
    model, gpu = get_model("Llama-2-7B"), get_gpu("A100-80GB")
    with pytest.raises(ValueError, match="tp=.*positive integer"):
        check_fits(model, gpu, tp=bad)
    with pytest.raises(ValueError, match="pp=.*positive integer"):
        check_fits(model, gpu, pp=bad)


def test_tp_must_divide_heads_and_match_kv_heads():
    with pytest.raises(ValueError, match="tp=3 does not divide Llama-2-7B num_heads=32"):
        weights_per_gpu_bytes(get_model("Llama-2-7B"), 3, 1)
    with pytest.raises(ValueError, match="tp=14 neither divides nor is a multiple of .* num_kv_heads=4"):
        weights_per_gpu_bytes(get_model("DeepSeek-R1-Distill-Qwen-7B"), 14, 1)


def test_pp_cannot_exceed_layers():
    with pytest.raises(ValueError, match="pp=3 exceeds BERT-tiny num_layers=2"):
        weights_per_gpu_bytes(get_model("BERT-tiny"), 1, 3)


@pytest.mark.parametrize("bad", [0.0, 1.5, float("nan"), -0.5])
def test_memory_utilization_must_be_a_fraction(bad):
    with pytest.raises(ValueError, match="memory_utilization"):
        check_fits(get_model("Llama-2-7B"), get_gpu("A100-80GB"), memory_utilization=bad)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_layers": -1}, "num_layers=-1"),
        ({"hidden_size": float("nan")}, "hidden_size=nan"),
        ({"num_kv_heads": 3}, "not a multiple of num_kv_heads=3"),
        ({"num_experts": 8, "experts_per_token": 2}, "moe_intermediate_size > 0"),
        ({"experts_per_token": 2}, "experts_per_token=2 exceeds num_experts=1"),
        ({"qk_rope_head_dim": 64}, "only valid with MLA"),
        ({"gated_mlp": "yes"}, "gated_mlp='yes'"),
        ({"source": " "}, "source"),
        ({"context_tokens": 0}, "context_tokens=0 must be a positive integer"),
        ({"context_source": ""}, "context_source must cite"),
    ],
)
def test_spec_rejects_bad_fields(changes, message):
    with pytest.raises(ValueError, match=message):
        replace(get_model("Llama-2-7B"), **changes)


@pytest.mark.parametrize(
    "name, context_tokens",
    [("Llama-2-7B", 4096), ("Llama-3-8B", 8192), ("Llama-3.1-8B", 131072), ("OpenLlama-3B", 2048),
     ("DeepSeek-R1-671B", 163840), ("BERT-base", 512)],
)
def test_catalog_context_lengths_follow_the_model_configs(name, context_tokens):
    assert get_model(name).context_tokens == context_tokens


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_loader_accepts_a_good_file(tmp_path):
    model = load_model_catalog(_write(tmp_path, HEADER + GOOD_ROW))["Tiny"]
    assert (model.num_layers, model.hidden_size, model.num_kv_heads, model.gated_mlp) == (2, 64, 2, True)


@pytest.mark.parametrize(
    "row, message",
    [
        ("Bad,2,64,4,2,128,-100,true,1,1,0,0,0,0,0,0,0,0,false,0,false,false,0,src,2048,card\n", "line 3: vocab_size='-100'"),
        ("Bad,2,64,4,2,128,1.5,true,1,1,0,0,0,0,0,0,0,0,false,0,false,false,0,src,2048,card\n", "line 3: vocab_size='1.5'"),
        ("Bad,2,64,4,2,128,100,yes,1,1,0,0,0,0,0,0,0,0,false,0,false,false,0,src,2048,card\n", "line 3: gated_mlp='yes'"),
        ("Bad,0,64,4,2,128,100,true,1,1,0,0,0,0,0,0,0,0,false,0,false,false,0,src,2048,card\n", "line 3: .*num_layers=0"),
        ("Tiny,2,64,4,2,128,100,true,1,1,0,0,0,0,0,0,0,0,false,0,false,false,0,src,2048,card\n", "line 3: duplicate"),
        ("Bad,2,64,4,2,128,100,true\n", "line 3: expected 26 fields"),
    ],
)
def test_loader_names_bad_row_and_field(tmp_path, row, message):
    with pytest.raises(ValueError, match=message):
        load_model_catalog(_write(tmp_path, HEADER + GOOD_ROW + row))
