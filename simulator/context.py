"""Context length: what happens to a request longer than its model's context window.

The rule is vLLM's (``max_model_len``, taken from the model's ``config.json``; here
``ModelSpec.context_tokens``, ``hardware/data/models.csv``):

- a prompt longer than the context is **rejected** before it is served (vLLM's input check
  raises "The decoder prompt (length P) is longer than the maximum model length of C"); its
  outcome has ``rejected_reason="exceeds_context"`` (``CONTEXT_REJECT_REASON``), so it counts
  in ``rejected_by_reason`` and as an SLO miss;
- otherwise generation **stops at the limit**: ``output_tokens`` becomes
  ``max(context - prompt, 1)`` when ``prompt + output`` exceeds the context (vLLM's length cap,
  ``finish_reason="length"``: a request stops once prompt + output reaches ``max_model_len``,
  after its first token). A reasoning request keeps at least one answer token
  (``reasoning_tokens <= output_tokens - 1``). The request is marked ``context_truncated``.

``python -m simulator`` applies it to every request before the run (one model per run) and
reports ``context_truncated`` (the count) beside the summary's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass

from simulator.outcome import RequestOutcome
from simulator.request import Request
from simulator.sequence import Sequence

CONTEXT_REJECT_REASON = "exceeds_context"


@dataclass(frozen=True)
class ContextFit:
    """Requests after the context rule: those to serve (some truncated), and the rejected ones'
    outcomes (rejected on arrival)."""

    served: list[Request]
    rejected: list[RequestOutcome]

    @property
    def truncated(self) -> int:
        return sum(request.context_truncated for request in self.served)


def truncate_to_context(request: Request, context_tokens: int) -> bool:
    """Apply the length cap to ``request`` in place; False (and no change) when its prompt is
    longer than ``context_tokens``, so it must be rejected."""
    if request.prompt_tokens > context_tokens:
        return False
    limit = max(context_tokens - request.prompt_tokens, 1)
    if request.output_tokens > limit:
        request.output_tokens = limit
        request.reasoning_tokens = min(request.reasoning_tokens, limit - 1)
        request.context_truncated = True
    return True


def fit_to_context(requests: SequenceOf[Request], context_tokens: int) -> ContextFit:
    """The context rule (module docstring) applied to every request of a one-model run."""
    served, rejected = [], []
    for request in requests:
        if truncate_to_context(request, context_tokens):
            served.append(request)
        else:
            rejected.append(Sequence(request, False).outcome(request.arrival_s, rejected_reason=CONTEXT_REJECT_REASON))
    return ContextFit(served, rejected)
