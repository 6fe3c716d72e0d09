"""Record the latency model's values into ``fixture.json``: the bit-exact reference of its port.

The compiled core's design (issue #43, §6) moves the evaluation of ``IterationLatencyModel``
into C++; these values were recorded from the pure-Python evaluator before that port, and
``tests/test_latency_fixture.py`` asserts that the model still gives them bit for bit.

Per catalog configuration (GPU, model, tp, pp, weight dtype, engine, CPU-overhead override)
that deploys (``kv_capacity_tokens`` accepts it), each series of ``series()`` is stored as the
SHA-256 of its float64 bytes plus its first values in ``repr`` (to see where a difference
starts). ``--raw DIR`` also writes every series in full, one ``.npz`` per configuration, for
debugging outside git. Run from the repository root::

    python -m tests.latency_fixture.record [--raw /tmp/latency_raw]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from hardware.engines import DEFAULT_ENGINE, engine_names
from hardware.gpus import gpu_names
from hardware.latency import IterationLatencyModel, kv_capacity_tokens
from hardware.models import model_names

FIXTURE = Path(__file__).with_name("fixture.json")
SEED = 43
RANDOM_POINTS = 200
STRIDE_POINTS = 256
DENSE_TOKENS = 4096
LOGIT_TOKENS = 1025
LOGIT_AT_TOKENS = (1025, 2048, 4096)
DECODE_BATCHES = 1024
FIRST_VALUES = 5
FIRST_OF = ("token_terms", "decode_base")
"""The series whose first values are stored beside the digests."""
SERIES = (
    "token_terms", "token_terms_stride", "token_terms_random", "logit_tokens", "prefill", "prefill_stride",
    "prefill_after_context", "mixed_random", "mixed_batches", "decode_base", "decode_per_context_token",
    "decode_random", "prefill_attention", "decode_attention", "stage_times",
)
"""The recorded series in ``series()`` order; ``stage_times`` only where ``pp > 1``."""
TP_OPTIONS = (1, 2, 4, 8)

FAMILY_GPUS = ("H100-80GB", "A100-80GB", "L40S")
"""One GPU of each profile family (h100, a100, a40)."""
ENGINE_MODELS = ("Llama-3.1-8B", "Mixtral-8x7B", "Qwen3-30B-A3B", "BERT-base")
"""Dense GQA, MoE with 8 and with 128 experts, an encoder with learned positions."""
PARALLEL_GPUS = {DEFAULT_ENGINE: ("H100-80GB", "H200", "A100-80GB", "L40S"), "vidur-2024": ("H100-80GB",)}
PARALLEL_MODELS = ("Llama-3.1-70B", "Qwen-72B", "DeepSeek-R1-671B", "Mixtral-8x7B", "Qwen3-32B", "Llama-2-13B")
PARALLEL_SHAPES = ((2, 1), (4, 1), (8, 1), (4, 2), (2, 4), (4, 4))
QUANTISED_SHAPES = ((4, 1), (8, 2))
CPU_OVERRIDES = (
    ("H100-80GB", "Llama-3.1-8B", 1, 1, "fp16", "vllm-v1", 0.0),
    ("A100-80GB", "Llama-2-7B", 1, 1, "fp16", "vidur-2024", 0.0),
    ("L40S", "Llama-3.1-8B", 2, 1, "fp16", "vllm-0.6", 0.0025),
    ("H100-80GB", "Llama-3.1-70B", 4, 2, "fp8", "vllm-v1", 0.0),
)


@dataclass(frozen=True)
class Config:
    gpu: str
    model: str
    tp: int
    pp: int
    dtype: str
    engine: str
    cpu_overhead_s: float | None = None

    def build(self) -> IterationLatencyModel:
        return IterationLatencyModel(self.gpu, self.model, self.tp, self.pp, self.dtype, self.engine, self.cpu_overhead_s)


def deploys(config: Config) -> bool:
    """The configuration builds and leaves KV memory (what a simulated instance needs)."""
    try:
        config.build()
        kv_capacity_tokens(config.gpu, config.model, config.tp, config.pp, config.dtype)
    except ValueError:
        return False
    return True


def _smallest_tp(gpu: str, model: str, dtype: str, engine: str) -> list[Config]:
    """The configuration at the smallest TP of ``TP_OPTIONS`` that deploys (pp 1), if any."""
    for tp in TP_OPTIONS:
        config = Config(gpu, model, tp, 1, dtype, engine)
        if deploys(config):
            return [config]
    return []


def configurations() -> list[Config]:
    """The recorded configurations, in a fixed order, without duplicates.

    1. every catalog GPU x model in fp16 under the default engine, at the smallest TP that deploys;
    2. every engine x one GPU per family x ``ENGINE_MODELS`` x every dtype, smallest TP;
    3. large models on ``PARALLEL_GPUS`` over ``PARALLEL_SHAPES`` (tp x pp) in fp16, and over
       ``QUANTISED_SHAPES`` in fp8 and int4, under the default engine (and ``vidur-2024`` on one GPU);
    4. ``CPU_OVERRIDES``: a fixed CPU time per iteration instead of the engine's.
    """
    found: list[Config] = []
    for gpu in gpu_names():
        for model in model_names():
            found += _smallest_tp(gpu, model, "fp16", DEFAULT_ENGINE)
    for engine in engine_names():
        for gpu in FAMILY_GPUS:
            for model in ENGINE_MODELS:
                for dtype in ("fp16", "fp8", "int4"):
                    found += _smallest_tp(gpu, model, dtype, engine)
    for engine, gpus in PARALLEL_GPUS.items():
        for gpu in gpus:
            for model in PARALLEL_MODELS:
                shapes = [(tp, pp, "fp16") for tp, pp in PARALLEL_SHAPES]
                shapes += [(tp, pp, dtype) for dtype in ("fp8", "int4") for tp, pp in QUANTISED_SHAPES]
                found += [c for tp, pp, dtype in shapes if deploys(c := Config(gpu, model, tp, pp, dtype, engine))]
    found += [c for c in (Config(*row) for row in CPU_OVERRIDES) if deploys(c)]
    return list(dict.fromkeys(found))


def _draws() -> np.ndarray:
    """``RANDOM_POINTS x 4`` uniform draws in [0, 1), the same for every configuration."""
    return np.random.default_rng(SEED).random((RANDOM_POINTS, 4))


def _scaled(u: float, n: int) -> int:
    """An integer in ``0 .. n - 1`` from a uniform draw."""
    return min(int(u * n), n - 1)


def _strided(context: int) -> list[int]:
    return sorted({round(1 + i * (context - 1) / STRIDE_POINTS) for i in range(STRIDE_POINTS + 1)})


def _mixed_inputs(context: int) -> list[tuple[int, float, int, int]]:
    """(prefill tokens, attention pairs, decode batch, decode context tokens) of random mixed iterations."""
    inputs = []
    for u in _draws():
        prefill = 1 + _scaled(u[0], 2048)
        before = _scaled(u[1], context)
        batch = _scaled(u[2], 257)
        decode_context = batch * (1 + _scaled(u[3], context)) if batch else 0
        inputs.append((prefill, prefill * (before + (prefill + 1) / 2), batch, decode_context))
    return inputs


def series(latency: IterationLatencyModel) -> dict[str, list[float]]:
    """Every recorded series of one model, by name (inputs derived from ``SEED`` and the model's context)."""
    context = latency.model.context_tokens
    dense = range(1, DENSE_TOKENS + 1)
    draws = _draws()
    random_terms = []
    for u in draws:
        tokens = 1 + _scaled(u[0], context)
        random_terms.append((tokens, 1 + _scaled(u[1], min(tokens, LOGIT_TOKENS))))
    mixed = _mixed_inputs(context)
    decode_random = []
    for u in draws:
        batch = 1 + _scaled(u[0], DECODE_BATCHES)
        decode_random.append((batch, _scaled(u[1], batch * context + 1)))
    out: dict[str, list[float]] = {
        "token_terms": [latency._token_terms_s(t, 1) for t in dense],
        "token_terms_stride": [latency._token_terms_s(t, 1) for t in _strided(context)],
        "token_terms_random": [latency._token_terms_s(t, logit) for t, logit in random_terms],
        "logit_tokens": [latency._token_terms_s(t, logit) for t in LOGIT_AT_TOKENS for logit in range(1, LOGIT_TOKENS + 1)],
        "prefill": [latency.prefill_time_s(t) for t in dense],
        "prefill_stride": [latency.prefill_time_s(t) for t in _strided(context)],
        "prefill_after_context": [latency.prefill_time_s(1 + _scaled(u[0], 2048), _scaled(u[1], context)) for u in draws],
        "mixed_random": [latency.iteration_time_s(*args) for args in mixed],
        "mixed_batches": [latency.iteration_time_s(256, 256 * (1000 + 257 / 2), b, b * 1000) for b in range(1, DECODE_BATCHES + 1)],
        "decode_base": [latency.decode_coefficients(b)[0] for b in range(1, DECODE_BATCHES + 1)],
        "decode_per_context_token": [latency.decode_coefficients(b)[1] for b in (1, DECODE_BATCHES)],
        "decode_random": [latency.decode_time_s(b, c) for b, c in decode_random],
        "prefill_attention": [latency.prefill_attention_layer_s(t, t * (t + 1) / 2) for t in dense]
        + [latency.prefill_attention_layer_s(p, pairs) for p, pairs, _, _ in mixed],
        "decode_attention": [latency.decode_attention_layer_s(b, b * 1000) for b in range(1, DECODE_BATCHES + 1)]
        + [latency.decode_attention_layer_s(b, c) for b, c in decode_random],
    }
    if latency.pp > 1:
        out["stage_times"] = _stage_times(latency, mixed)
    return out


def _stage_times(latency: IterationLatencyModel, mixed: list[tuple[int, float, int, int]]) -> list[float]:
    """Stage times of decode, prefill and random mixed iterations, flattened."""
    cases: list[tuple[int, int, Callable[[], float]]] = []
    cases += [(b, b, lambda b=b: latency.decode_time_s(b, b * 512)) for b in range(1, 257)]
    cases += [(t, 1, lambda t=t: latency.prefill_time_s(t)) for t in range(1, DENSE_TOKENS + 1, 16)]
    cases += [(p + b, b + 1, lambda a=(p, pairs, b, c): latency.iteration_time_s(*a)) for p, pairs, b, c in mixed]
    return [s for tokens, logits, iteration in cases for s in latency.stage_times_s(tokens, logits, iteration())]


def digest(values: list[float]) -> str:
    """SHA-256 of the values as little-endian float64 bytes."""
    return hashlib.sha256(np.asarray(values, dtype="<f8").tobytes()).hexdigest()


def record(config: Config, values: dict[str, list[float]]) -> dict[str, object]:
    """One configuration's entry: its fields, a digest per series (in ``SERIES`` order) and the
    first values of the ``FIRST_OF`` series in ``repr``."""
    assert list(values) == list(SERIES[: len(values)]) and all(math.isfinite(v) for s in values.values() for v in s)
    return {
        "config": list(asdict(config).values()),
        "sha256": [digest(s) for s in values.values()],
        "first": {name: [repr(v) for v in values[name][:FIRST_VALUES]] for name in FIRST_OF},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--raw", type=Path, help="also write every series in full, one .npz per configuration")
    args = parser.parse_args()
    if args.raw:
        args.raw.mkdir(parents=True, exist_ok=True)
    records, total = [], 0
    for index, config in enumerate(configurations()):
        values = series(config.build())
        records.append(record(config, values))
        total += sum(len(v) for v in values.values())
        if args.raw:
            np.savez(args.raw / f"{index:04d}.npz", config=json.dumps(asdict(config)), **{k: np.asarray(v) for k, v in values.items()})
    fixture = {
        "about": "IterationLatencyModel values recorded from the pure-Python evaluator before the C++ port "
        "(tests/latency_fixture/record.py): per configuration, the SHA-256 of each series' float64 "
        "little-endian bytes.",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "seed": SEED,
        "config_fields": [f.name for f in fields(Config)],
        "series": list(SERIES),
        "configs": records,
    }
    FIXTURE.write_text(json.dumps(fixture, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"record: {len(records)} configurations, {total} values, {FIXTURE.stat().st_size} bytes in {FIXTURE}")


if __name__ == "__main__":
    main()
