"""A MaskablePPO actor-critic whose first policy prefers the no-op action.

Why: with Scaling-v0's ``action="one_unit"`` on ``cauchy_autoscaling`` there are 24 change
actions and one hold. A uniform first policy changes the deployment almost every window, so
early episodes drift far from the planned deployment, the backlog makes every later addition
look wasted, and PPO settled twice on scaling in as far as allowed (agents/recipes/cauchy.yml).
``noop_logit`` is added to the no-op's initial logit (the action net's bias), so the first
policy holds with probability about e^b / (e^b + n − 1) and explores changes one at a time
around the plan, as the heuristics act (Algorithm 1 changes nothing until a full window is out
of its band). The bias is an ordinary trained parameter afterwards. Alone (bias 5 or 8) it
did not prevent the scale-in optimum; with the queue shaping of ``waiting_potential`` and no
entropy bonus the Cauchy recipe learns to hold (docs/agents_vs_papers.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.type_aliases import Schedule


class NoOpPriorPolicy(MaskableMultiInputActorCriticPolicy):
    """``MultiInputPolicy`` for MaskablePPO with ``noop_logit`` added to action ``noop_action``'s
    initial logit (``policy_kwargs``: ``noop_action``, default 0; ``noop_logit``, default 0)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule: Schedule,
                 noop_action: int = 0, noop_logit: float = 0.0, **kwargs: Any) -> None:
        if not isinstance(action_space, spaces.Discrete):
            raise ValueError(f"NoOpPriorPolicy needs a Discrete action space, got {action_space}")
        if not (isinstance(noop_action, int) and 0 <= noop_action < int(action_space.n)):
            raise ValueError(f"noop_action must be an action of {action_space}, got {noop_action!r}")
        if not (isinstance(noop_logit, (int, float)) and math.isfinite(noop_logit)):
            raise ValueError(f"noop_logit must be a finite number, got {noop_logit!r}")
        self._noop = (noop_action, float(noop_logit))  # read by _build, which the base __init__ calls
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)
        action, logit = self._noop
        with th.no_grad():
            self.action_net.bias[action] += logit

    def _get_constructor_parameters(self) -> dict[str, Any]:
        action, logit = self._noop
        return {**super()._get_constructor_parameters(), "noop_action": action, "noop_logit": logit}
