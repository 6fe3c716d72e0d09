"""The request record: what arrives, what it asks for, and what happened to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class Phase(IntEnum):
    """Lifecycle of a request. Reasoning requests decode ``REASONING`` then ``ANSWERING``."""

    WAITING = 0
    PREFILL = 1
    REASONING = 2
    ANSWERING = 3
    DONE = 4
    REJECTED = 5


@dataclass(slots=True)
class SLO:
    """Latency targets of one request; ``None`` means no target.

    ``ttft_s`` time to first token, ``tbt_s`` worst gap between tokens (also the TPOT target),
    ``ttfat_s`` time to first *answer* token (reasoning models, pascal.txt §V-A),
    ``e2e_s`` end-to-end latency.
    """

    ttft_s: float | None = None
    tbt_s: float | None = None
    ttfat_s: float | None = None
    e2e_s: float | None = None


@dataclass(slots=True)
class Request:
    """One inference request.

    ``output_tokens`` counts every generated token; of those, the first
    ``reasoning_tokens`` are reasoning (``<think>`` ... ``</think>``) and the rest answer.
    ``tier`` is the priority tier, 0 the highest. ``model`` names the model that must serve it
    (``None``: any instance). Cascade attributes are optional.
    Timing fields are filled by the simulator (seconds, simulation clock; NaN = not yet).
    """

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    tier: int = 0
    slo: SLO = field(default_factory=SLO)
    model: str | None = None
    difficulty: float = 0.0
    quality_by_model: dict[str, float] | None = None

    @property
    def answer_tokens(self) -> int:
        return self.output_tokens - self.reasoning_tokens
