"""Hand-built Routing-v0 observations for baseline rule tests: raw feature values per slot,
squashed as ``envs.observation`` fills them."""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.observation import COUNT_SCALE, SERVICE_TIME_SCALE_S, TOKEN_SCALE, squash

SCALES = {  # raw value -> squashed, as envs.observation fills them
    "waiting": COUNT_SCALE, "running": COUNT_SCALE, "swapped": COUNT_SCALE, "reasoning": COUNT_SCALE,
    "demoted": COUNT_SCALE, "fresh_answering": COUNT_SCALE, "answers_overdue": COUNT_SCALE,
    "kv_capacity": 1e6, "kv_footprint": 1e6, "pending_prefill_tokens": TOKEN_SCALE,
    "service_time_ewma": SERVICE_TIME_SCALE_S,
}


def routing_observation(
    policy: Any, rows: list[dict[str, float]], *, defaults: dict[str, float] | None = None, mask=None,
    source: int | None = None, prompt_tokens: int = 100, generated_tokens: int = 0,
) -> dict[str, np.ndarray]:
    """An observation with ``rows`` of raw feature values (unlisted features take ``defaults``
    or 0; unscaled features such as ``kv_used_fraction`` are taken as they are); ``source``
    makes it a phase decision of a request with ``prompt_tokens + generated_tokens`` of KV."""
    n_slots = policy.max_instances
    matrix = np.zeros(policy.env.observation_space["instances"].shape, dtype=np.float32)
    for slot, row in enumerate(rows):
        matrix[slot, policy.feature_index["present"]] = 1.0
        for name, value in {**(defaults or {}), **row}.items():
            matrix[slot, policy.feature_index[name]] = squash(value, SCALES[name]) if name in SCALES else value
    context = np.zeros(policy.env.observation_space["context"].shape, dtype=np.float32)
    context[0], context[1] = source is None, source is not None
    context[2], context[3] = squash(prompt_tokens, TOKEN_SCALE), squash(generated_tokens, TOKEN_SCALE)
    if source is not None:
        context[len(context) - n_slots + source] = 1.0
    if mask is None:
        mask = [1.0] * len(rows) + [0.0] * (n_slots - len(rows))
    return {"instances": matrix, "context": context, "action_mask": np.asarray(mask, dtype=np.float32)}
