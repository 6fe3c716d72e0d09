"""PASCAL's instance-level scheduler (PASCAL §IV-B) on servegym/Routing-v0.

- New (reasoning) requests: Algorithm 1. Candidates are the instances whose token pacer reports
  no answering-SLO violation (``t_i`` = TRUE); among them (all instances if none) the smallest
  KV footprint ``m_i``, GPU plus CPU memory (``kv_footprint``).
- At ``</think>``: Algorithm 2. Among SLO-compliant instances the fewest reasoning requests in
  the high-priority queue ``r_i`` (reasoning requests not demoted, §IV-C); if none is compliant,
  among all the smallest ``r_i + a_i``, ``a_i`` the answering requests still in their first
  time quantum (``fresh_answering``).
- Adaptive migration (§IV-B, Fig. 7): stay on the current instance when it has memory and
  Algorithm 2's choice has not.

Choices the paper leaves open, fixed here:

- ``t_i``: the simulator's pacer flag (``pacer_behind``: an answering request delivered fewer
  answer tokens than a reader at one per TPOT target since its first one) misses requests that
  finished reasoning and have no answer token yet, which is what piles up on an instance whose
  memory is taken (Fig. 7(a)): their pacer buffer is empty while the user waits. So ``t_i`` is
  also FALSE while ``answers_overdue`` > 0 (such a request queued or swapped for over one TPOT
  target since its ``</think>``). Without it, on the ``pascal`` scenario at the high rate,
  Algorithm 2 kept sending answers to a saturated instance (P99 blocking 20 s, 23% violations);
- *has memory*: an instance has memory for the answering request when its *unclaimed* GPU KV
  (free KV minus the prompts waiting to be prefilled and the KV of swapped requests, which
  queued requests will take first) holds the request's KV (prompt + generated tokens) plus
  ``answer_headroom_tokens`` (default 500, one RR quantum, §V-A), i.e. the request fits and
  can run its first answering quantum without preemption. At a phase decision the simulator
  has already released the request's blocks on its source, so the source's free KV counts the
  request's own KV, which is resident there;
- ties in Algorithm 1 go to fewer waiting requests, then the lower slot (``least_kv_slot``);
  ties in Algorithm 2 go to the source instance (no transfer for nothing), then the smaller
  KV footprint, then the lower slot;
- a source instance that can no longer take requests (masked out) never keeps the request.

The intra-instance two-level queue is the simulator's ``pascal`` local scheduler, set by the
scenario. Variants (§V-D): ``pascal_no_migration`` always stays at ``</think>``;
``pascal_non_adaptive`` always moves to Algorithm 2's choice.
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np

from baselines.policy import register
from baselines.routing_classic import RoutingPolicy
from envs.schema import DecodedObservation

@register
class Pascal(RoutingPolicy):
    """PASCAL: Algorithm 1 for arrivals, Algorithm 2 with adaptive migration at ``</think>``
    (PASCAL §IV-B; choices the paper leaves open in the module docstring)."""

    name = "pascal"
    migration: ClassVar[str] = "adaptive"  # "adaptive", "never" (stay) or "always" (Algorithm 2)

    def __init__(self, env: gym.Env, answer_headroom_tokens: int = 500) -> None:
        super().__init__(env)
        if (
            isinstance(answer_headroom_tokens, bool)
            or not isinstance(answer_headroom_tokens, (int, np.integer))
            or answer_headroom_tokens < 0
        ):
            raise ValueError(f"answer_headroom_tokens must be a non-negative integer, got {answer_headroom_tokens!r}")
        self.answer_headroom_tokens = int(answer_headroom_tokens)

    @staticmethod
    def slo_compliant(view: DecodedObservation) -> np.ndarray:
        """``t_i``: the token pacer reports every answering request on pace, counting those
        still waiting for their first answer token (``answers_overdue``)."""
        return ~view.instances["pacer_behind"] & (view.instances["answers_overdue"] == 0)

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        """Algorithm 1 (PASCAL §IV-B)."""
        candidates = valid & self.slo_compliant(view)
        if not candidates.any():
            candidates = valid
        return self.least_kv_slot(view, candidates)

    def algorithm2(self, view: DecodedObservation, valid: np.ndarray, source: int) -> int:
        """Algorithm 2 (PASCAL §IV-B): the answering request's instance."""
        load = view.instances["reasoning"] - view.instances["demoted"]
        candidates = valid & self.slo_compliant(view)
        if not candidates.any():
            candidates = valid
            load = load + view.instances["fresh_answering"]
        slots = np.flatnonzero(candidates)
        not_source = (slots != source).astype(np.int64)
        footprint = view.instances["kv_footprint"][slots]
        order = np.lexsort((slots, footprint, not_source, load[slots]))
        return int(slots[order[0]])

    def has_memory(self, view: DecodedObservation) -> np.ndarray:
        """Per instance: GPU KV that is free and that no queued request is waiting for holds
        the request's KV plus ``answer_headroom_tokens``."""
        need = self.request_kv_tokens(view) + self.answer_headroom_tokens
        return self.unclaimed_kv_tokens(view) >= need

    def place_answer(self, view: DecodedObservation, valid: np.ndarray, source: int) -> int:
        if self.migration == "never" and valid[source]:
            return source
        chosen = self.algorithm2(view, valid, source)
        if self.migration == "adaptive" and valid[source] and chosen != source:
            memory = self.has_memory(view)
            if memory[source] and not memory[chosen]:
                return source
        return chosen


@register
class PascalNoMigration(Pascal):
    """PASCAL(NoMigration) (PASCAL §V-D, Fig. 13): Algorithm 1 placement, hierarchical
    queues, but every request stays on its instance at ``</think>``."""

    name = "pascal_no_migration"
    migration = "never"


@register
class PascalNonAdaptive(Pascal):
    """PASCAL(NonAdaptive) (PASCAL §V-D, Fig. 15): always moves to Algorithm 2's choice at
    ``</think>``, whatever the memory of either instance."""

    name = "pascal_non_adaptive"
    migration = "always"
