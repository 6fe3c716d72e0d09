"""Permutation-equivariant actor-critic policies for envs whose Discrete action picks one
instance slot (``servegym/Routing-v0``).

A plain ``MultiInputPolicy`` puts one MLP over the flattened observation, so "send the request
to the least-loaded instance" must be learnt separately for every slot. Here one shared MLP
scores each instance row (its features, its entry of a per-slot context block, and the shared
context) and the logits are those scores, one per slot: permuting the instance rows permutes
the logits the same way, and a rule such as "prefer low queues" is a few weights used by every
slot. The critic reads the mean and the max of a second row encoder's outputs over the present
instances (feature column 0) with the shared context. The observation's ``action_mask`` sets
masked slots' logits to ``MASKED_LOGIT``, so plain PPO / A2C never pick them either; MaskablePPO
masks the same slots again from ``action_masks()``.

``InstanceScoringPolicy`` (PPO, A2C) and ``MaskableInstanceScoringPolicy`` (MaskablePPO) share
the network; ``policy_kwargs``: ``net_arch`` (hidden sizes of each row encoder, default
[64, 64]), ``activation_fn``, ``slot_context`` (default true: the context's last
``max_instances`` entries are per-slot values, e.g. Routing-v0's source-instance one-hot, and
travel with their row), ``ortho_init``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

OBSERVATION_KEYS = ("instances", "context", "action_mask")
PRESENT_COLUMN = 0  # ``envs.observation.BASE_FEATURES[0]``: 1 for a live instance, 0 for an empty slot
MASKED_LOGIT = -1e8  # sb3-contrib's MaskableCategorical uses the same value
DEFAULT_NET_ARCH = (64, 64)
SCORE_INIT_GAIN = 0.01  # near-uniform first policy (SB3's action_net gain)


def check_slot_observation(observation_space: spaces.Space, action_space: spaces.Space) -> tuple[int, int, int]:
    """(slots, instance features, context size) of a Dict observation with ``instances``
    (slots x features), ``context`` and ``action_mask`` (slots) and a ``Discrete(slots)`` action."""
    if not isinstance(observation_space, spaces.Dict) or set(observation_space.spaces) != set(OBSERVATION_KEYS):
        raise ValueError(f"instance-scoring policies need a Dict observation with keys {list(OBSERVATION_KEYS)}, "
                         f"got {observation_space}")
    instances = observation_space["instances"].shape
    if len(instances) != 2:
        raise ValueError(f"observation 'instances' must be (slots, features), got shape {instances}")
    slots, features = instances
    if not isinstance(action_space, spaces.Discrete) or int(action_space.n) != slots:
        raise ValueError(f"instance-scoring policies need a Discrete({slots}) action (one per instance slot), "
                         f"got {action_space}")
    if observation_space["action_mask"].shape != (slots,):
        raise ValueError(f"observation 'action_mask' must have shape ({slots},), got {observation_space['action_mask'].shape}")
    return slots, features, int(np.prod(observation_space["context"].shape))


class SlotObservationExtractor(BaseFeaturesExtractor):
    """Concatenates ``instances`` (row-major), ``context`` and ``action_mask`` into one tensor;
    ``InstanceScoringNetwork`` splits it again (SB3 passes one tensor between the two)."""

    def __init__(self, observation_space: spaces.Dict) -> None:
        features_dim = sum(int(np.prod(observation_space[k].shape)) for k in OBSERVATION_KEYS)
        super().__init__(observation_space, features_dim)

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        return th.cat([observations[k].flatten(start_dim=1) for k in OBSERVATION_KEYS], dim=1)


def _mlp(input_dim: int, net_arch: list[int], activation_fn: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in net_arch:
        layers += [nn.Linear(input_dim, size), activation_fn()]
        input_dim = size
    return nn.Sequential(*layers)


class InstanceScoringNetwork(nn.Module):
    """SB3 ``mlp_extractor`` replacement: ``forward_actor`` gives one logit per slot (masked),
    ``forward_critic`` a ``latent_dim_vf`` vector from pooled row encodings and the context."""

    def __init__(self, slots: int, instance_features: int, context_size: int, net_arch: list[int],
                 activation_fn: type[nn.Module], slot_context: bool) -> None:
        super().__init__()
        if not net_arch or any(int(size) != size or size < 1 for size in net_arch):
            raise ValueError(f"net_arch must be a non-empty list of positive layer sizes, got {net_arch!r}")
        if slot_context and context_size < slots:
            raise ValueError(f"slot_context needs a context of at least {slots} entries, got {context_size}")
        self.slots, self.instance_features, self.context_size = slots, instance_features, context_size
        self.slot_context = slot_context
        self.shared_context_size = context_size - slots if slot_context else context_size
        row_dim = instance_features + int(slot_context) + self.shared_context_size
        hidden = int(net_arch[-1])
        self.actor_encoder = _mlp(row_dim, list(net_arch), activation_fn)
        self.actor_score = nn.Linear(hidden, 1)
        self.critic_encoder = _mlp(row_dim, list(net_arch), activation_fn)
        self.critic_head = nn.Sequential(nn.Linear(2 * hidden + self.shared_context_size, hidden), activation_fn())
        self.latent_dim_pi = slots
        self.latent_dim_vf = hidden

    def split(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """(per-row inputs (batch, slots, row_dim), shared context, mask, present) of ``features``."""
        slots, cells = self.slots, self.slots * self.instance_features
        instances = features[:, :cells].reshape(-1, slots, self.instance_features)
        context = features[:, cells:cells + self.context_size]
        mask = features[:, cells + self.context_size:]
        shared = context[:, :self.shared_context_size]
        parts = [instances]
        if self.slot_context:
            parts.append(context[:, self.shared_context_size:].unsqueeze(-1))
        parts.append(shared.unsqueeze(1).expand(-1, slots, -1))
        return th.cat(parts, dim=-1), shared, mask, instances[..., PRESENT_COLUMN] > 0.5

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        rows, _, mask, _ = self.split(features)
        return self._actor(rows, mask)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        rows, shared, _, present = self.split(features)
        return self._critic(rows, shared, present)

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Both heads from one ``split`` (rollouts and updates call this): the same values as
        ``forward_actor`` and ``forward_critic``, with half the slicing."""
        rows, shared, mask, present = self.split(features)
        return self._actor(rows, mask), self._critic(rows, shared, present)

    def _actor(self, rows: th.Tensor, mask: th.Tensor) -> th.Tensor:
        logits = self.actor_score(self.actor_encoder(rows)).squeeze(-1)
        return logits.masked_fill(mask < 0.5, MASKED_LOGIT)

    def _critic(self, rows: th.Tensor, shared: th.Tensor, present: th.Tensor) -> th.Tensor:
        encoded = self.critic_encoder(rows)
        weight = present.unsqueeze(-1).to(encoded.dtype)
        mean = (encoded * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)
        peak = encoded.masked_fill(~present.unsqueeze(-1), -th.inf).amax(dim=1)
        peak = th.where(th.isfinite(peak), peak, th.zeros_like(peak))  # no instance present: 0
        return self.critic_head(th.cat([mean, peak, shared], dim=1))


class _InstanceScoringMixin:
    """What both policy classes add to SB3's actor-critic: the extractor, the network, an
    identity ``action_net`` (the network's outputs are the logits) and their initialisation."""

    def _setup_scoring(self, observation_space: spaces.Space, action_space: spaces.Space, kwargs: dict[str, Any]) -> None:
        self.slot_shape = check_slot_observation(observation_space, action_space)
        self.slot_context = bool(kwargs.pop("slot_context", True))
        kwargs.setdefault("net_arch", list(DEFAULT_NET_ARCH))
        if not isinstance(kwargs["net_arch"], (list, tuple)):
            raise ValueError(f"net_arch must be a list of layer sizes, got {kwargs['net_arch']!r}")
        kwargs["features_extractor_class"] = SlotObservationExtractor
        kwargs["features_extractor_kwargs"] = {}
        kwargs["share_features_extractor"] = True

    def _build_mlp_extractor(self) -> None:
        slots, features, context = self.slot_shape
        self.mlp_extractor = InstanceScoringNetwork(slots, features, context, list(self.net_arch), self.activation_fn,
                                                    self.slot_context).to(self.device)

    def _build(self, lr_schedule: Schedule) -> None:
        self._build_mlp_extractor()
        self.action_net = nn.Identity()
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:
            network = self.mlp_extractor
            for module, gain in ((network, np.sqrt(2)), (network.actor_score, SCORE_INIT_GAIN), (self.value_net, 1.0)):
                module.apply(partial(self.init_weights, gain=gain))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["slot_context"] = self.slot_context
        data.pop("features_extractor_class", None)
        data.pop("features_extractor_kwargs", None)
        return data


class InstanceScoringPolicy(_InstanceScoringMixin, MultiInputActorCriticPolicy):
    """Permutation-equivariant instance-scoring actor-critic for PPO and A2C (see the module docstring)."""

    def __init__(self, observation_space: spaces.Dict, action_space: spaces.Space, lr_schedule: Schedule,
                 **kwargs: Any) -> None:
        self._setup_scoring(observation_space, action_space, kwargs)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)


class MaskableInstanceScoringPolicy(_InstanceScoringMixin, MaskableMultiInputActorCriticPolicy):
    """Permutation-equivariant instance-scoring actor-critic for MaskablePPO (see the module docstring)."""

    def __init__(self, observation_space: spaces.Dict, action_space: spaces.Space, lr_schedule: Schedule,
                 **kwargs: Any) -> None:
        self._setup_scoring(observation_space, action_space, kwargs)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)
