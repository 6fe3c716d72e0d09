"""The latency model gives, bit for bit, the values recorded from its pure-Python evaluator before
the port to C++ (``tests/latency_fixture``, issue #43 §6): every series of every recorded
configuration hashes to the recorded SHA-256."""

from __future__ import annotations

import json

import pytest
from latency_fixture.record import FIRST_VALUES, FIXTURE, SERIES, Config, digest, series

_FIXTURE = json.loads(FIXTURE.read_text(encoding="utf-8"))
_CONFIGS = [(Config(*entry["config"]), entry) for entry in _FIXTURE["configs"]]


def test_the_fixture_covers_the_catalog_breadth_it_claims():
    configs = [config for config, _ in _CONFIGS]
    assert len(configs) == len(set(configs)) == 757
    assert {c.engine for c in configs} == {"vidur-2024", "vllm-0.6", "vllm-0.6-chunked", "vllm-v1"}
    assert {c.dtype for c in configs} == {"fp16", "fp8", "int4"}
    assert {(c.tp, c.pp) for c in configs} >= {(8, 1), (4, 2), (8, 2), (2, 4), (4, 4)}
    assert {"DeepSeek-R1-671B", "Mixtral-8x7B", "Qwen3-30B-A3B", "BERT-base"} <= {c.model for c in configs}
    assert _FIXTURE["series"] == list(SERIES)


@pytest.mark.parametrize(("config", "entry"), _CONFIGS, ids=[str(c) for c, _ in _CONFIGS])
def test_every_series_matches_the_recorded_python_values_bit_for_bit(config: Config, entry: dict) -> None:
    values = series(config.build())
    assert tuple(values) == SERIES[: len(entry["sha256"])]
    for (name, got), expected in zip(values.items(), entry["sha256"]):
        if digest(got) != expected:
            first = [repr(v) for v in got[:FIRST_VALUES]]
            recorded = entry["first"].get(name, "not stored")
            pytest.fail(f"{name} differs from the recording; first values {first}, recorded {recorded}")
