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
  (``reasoning_tokens <= output_tokens - 1``).

Where it applies: inside the simulator, when a request joins an instance's queue
(``Instance.enqueue``, reached by every dispatch, so every env, baseline and experiment gets
it), against *that instance's* model. The rule acts on the ``Sequence`` (the served copy),
never on the ``Request``: a model cascade (``simulator.cascade``) re-serves the same request
on a larger model, where it is capped again by that model's context. A rejection happens at
dispatch, which for a new request is its arrival time; it ends as an explicit outcome
(``Cluster.on_reject``). Truncations are counted per instance (``Instance.context_truncated``)
and for the cluster (``Cluster.context_truncated``); ``python -m simulator`` prints that count
beside the summary's metrics.
"""

from __future__ import annotations

from simulator.sequence import Sequence

CONTEXT_REJECT_REASON = "exceeds_context"


def fit_to_context(seq: Sequence, context_tokens: int) -> bool | None:
    """Apply the rule to ``seq`` in place: ``None`` when its prompt is longer than
    ``context_tokens`` (nothing changes; it must be rejected), True when its output was capped
    at ``max(context_tokens - prompt, 1)``, False when it fits as it is."""
    if seq.prompt_tokens > context_tokens:
        return None
    limit = max(context_tokens - seq.prompt_tokens, 1)
    if seq.output_tokens <= limit:
        return False
    seq.output_tokens = limit
    seq.reasoning_tokens = min(seq.reasoning_tokens, limit - 1)
    return True
