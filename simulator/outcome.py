"""What happened to one request: the per-request record every metric is computed from."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.request import SLO


@dataclass(slots=True)
class RequestOutcome:
    """Timing of one request, written once when it completes or is rejected.

    All times are absolute simulation seconds; NaN where the event never happened.
    ``token_curve`` is the delivered-token curve as breakpoints ``(time_s, tokens)``:
    tokens delivered by ``time_s`` (cumulative, output tokens only, reasoning included);
    between consecutive breakpoints tokens arrive at a constant rate. It starts at
    ``(first_token_s, 1)`` and ends at ``(finish_s, output_tokens)``.
    ``max_tbt_s`` is the largest gap between two consecutive output tokens.
    ``reasoning_end_s`` is when the last reasoning token (``</think>``) was produced; the
    wait from it to ``first_answer_token_s`` is the blocking after the phase change
    (PASCAL Fig. 13).
    """

    request_id: int
    tier: int
    instance_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    reasoning_tokens: int
    first_scheduled_s: float
    first_token_s: float
    first_answer_token_s: float
    reasoning_end_s: float
    finish_s: float
    max_tbt_s: float
    preempted_s: float
    num_preemptions: int
    num_migrations: int
    token_curve: tuple[tuple[float, int], ...]
    slo: SLO
    rejected_reason: str | None = None
    quality: float = float("nan")

    @property
    def completed(self) -> bool:
        return self.rejected_reason is None

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def ttfat_s(self) -> float:
        return self.first_answer_token_s - self.arrival_s

    @property
    def phase_change_blocking_s(self) -> float:
        """Wait between the last reasoning token and the first answer token (NaN if no reasoning)."""
        return self.first_answer_token_s - self.reasoning_end_s

    @property
    def e2e_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> float:
        return self.first_scheduled_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first (NaN for one-token outputs)."""
        if self.output_tokens <= 1:
            return float("nan")
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)
