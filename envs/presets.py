"""Scenario presets by name: ``make_scenario("default", rate_rps=12)``.

Each preset lives in ``envs/scenarios/<name>.py`` as a function returning a ``Scenario``
and says what it reproduces and from which paper section.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envs.scenario import Scenario
from envs.scenarios import PRESETS


def scenario_names() -> list[str]:
    return sorted(PRESETS)


def register_scenario(name: str, builder: Callable[[], Scenario]) -> None:
    """Add a preset (a user's own scenario): ``make_scenario(name)`` and ``gym.make(...,
    scenario=name)`` build it from then on. Names already registered are refused."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"scenario name must be a non-empty string, got {name!r}")
    if name in PRESETS and PRESETS[name] is not builder:
        raise ValueError(f"scenario {name!r} is already registered")
    PRESETS[name] = builder


def make_scenario(name: str, **overrides: Any) -> Scenario:
    """The preset ``name`` with keyword overrides (scenario or workload fields)."""
    if name not in PRESETS:
        raise ValueError(f"unknown scenario {name!r}; known: {scenario_names()}")
    builder: Callable[[], Scenario] = PRESETS[name]
    return builder().with_overrides(**overrides)
