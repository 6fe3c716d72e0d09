"""One interface for heuristics, planners and learned agents: SB3's ``predict``.

A heuristic reads only the observation, through the schema its env publishes
(``env.schema``, ``envs.schema``): ``self.decode(observation)`` gives raw values by name, so
no policy indexes the observation or inverts its encodings itself, and a learned agent sees
exactly what it sees. Besides the observation a policy may read the env's public settings (its
action mode, levels, gears, unit kinds: what its action space means) and ``self.scenario``, the
problem statement (deployment, workload, inventory) that planners take; never the env's
simulator, reward function or other internals (``tests/test_baselines_contract.py``).
Policies are built for an env: ``make(name, env)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from envs.base import ServingEnv
from envs.scenario import Scenario
from envs.schema import DecodedObservation, ObservationSchema


class Policy:
    """Base class. Subclasses implement ``act(observation) -> action`` and say which env IDs
    they drive (``env_ids``) and the paper rule they implement (docstring with § / Alg. / eq.).
    """

    name: ClassVar[str] = ""
    env_ids: ClassVar[tuple[str, ...]] = ()
    action_modes: ClassVar[tuple[str, ...]] = ()  # the env's ``action_mode`` values it drives; () = any

    def __init__(self, env: gym.Env) -> None:
        unwrapped = env.unwrapped
        if not isinstance(unwrapped, ServingEnv):
            raise ValueError(f"{type(self).__name__} drives servegym envs, got {type(unwrapped).__name__}")
        env_id = unwrapped.env_id
        if self.env_ids and env_id not in self.env_ids:
            raise ValueError(f"policy {self.name!r} drives {list(self.env_ids)}, not {env_id}")
        mode = getattr(unwrapped, "action_mode", None)
        if self.action_modes and mode not in self.action_modes:
            raise ValueError(f"policy {self.name!r} drives {env_id} with action in {list(self.action_modes)}, not {mode!r}")
        self.env = unwrapped
        self.action_space = env.action_space
        self.schema: ObservationSchema = unwrapped.schema
        self.scenario: Scenario = unwrapped.scenario

    def reset(self) -> None:
        """Forget any per-episode state (called at every episode start)."""

    def act(self, observation: dict[str, np.ndarray]) -> Any:
        raise NotImplementedError

    def predict(
        self,
        observation: dict[str, np.ndarray],
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[Any, Any]:
        """SB3's signature: ``(action, state)``; heuristics are deterministic and stateless here."""
        if episode_start is not None and bool(np.any(episode_start)):
            self.reset()
        return self.act(observation), state

    def decode(self, observation: dict[str, np.ndarray]) -> DecodedObservation:
        """The observation's raw values by name (``envs.schema.DecodedObservation``)."""
        return self.schema.decode(observation)


_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator adding a policy to the registry under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY:
        raise ValueError(f"policy name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def policy_names(env_id: str | None = None) -> list[str]:
    """Registered policy names, optionally only those that drive ``env_id``."""
    return sorted(n for n, c in _REGISTRY.items() if env_id is None or not c.env_ids or env_id in c.env_ids)


def make(name: str, env: gym.Env, **options: Any) -> Policy:
    """Build the policy registered as ``name`` for ``env``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown policy {name!r}; known: {policy_names()}")
    return _REGISTRY[name](env, **options)

