"""Hand-built Routing-v0 observations for baseline rule tests: raw feature values per slot,
encoded by the env's schema (``envs.schema.ObservationSchema.encode``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def routing_observation(
    policy: Any, rows: list[dict[str, float]], *, defaults: dict[str, float] | None = None, mask=None,
    source: int | None = None, prompt_tokens: int = 100, generated_tokens: int = 0,
) -> dict[str, np.ndarray]:
    """An observation with ``rows`` of raw feature values (unlisted features take ``defaults``
    or 0); ``source`` makes it a phase decision of a request with ``prompt_tokens +
    generated_tokens`` of KV."""
    schema = policy.schema
    names = {name for row in rows for name in row} | set(defaults or {}) | {"present"}
    instances = {name: np.zeros(schema.max_instances) for name in names}
    for slot, row in enumerate(rows):
        for name, value in {**(defaults or {}), "present": 1.0, **row}.items():
            instances[name][slot] = value
    context = {
        "is_arrival": source is None, "is_phase_change": source is not None,
        "prompt_tokens": prompt_tokens, "generated_tokens": generated_tokens,
        "source_slot": -1 if source is None else source,
    }
    if mask is None:
        mask = [1.0] * len(rows) + [0.0] * (schema.max_instances - len(rows))
    return schema.encode(instances, context, np.asarray(mask, dtype=np.float32))
