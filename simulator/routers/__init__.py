"""Global routers (which instance takes each arrival), chosen by name: the registry beside the
local schedulers' (``simulator.schedulers``), as Vidur keeps its global and replica scheduler
registries side by side.

A router is a callable ``router(cluster, seq) -> instance id`` (``simulator.routers.base``);
``make_router(name, **options)`` builds a fresh one (routers keep per-episode state, e.g. the
round-robin position), and ``Cluster(router=name)`` resolves names here. Routers built from
a plan or a model cascade (Mélange's ``GpuShareRouter``, ``CascadeRouter``) take their plan as
constructor arguments and are built directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulator.routers.base import Router, fewest_requests
from simulator.routers.freeness import FreestInstanceRouter
from simulator.routers.least_loaded import LeastLoadedRouter
from simulator.routers.round_robin import RoundRobinRouter
from simulator.routers.session import SessionAffinityRouter

ROUTERS: dict[str, Callable[..., Router]] = {
    "round_robin": RoundRobinRouter,
    "least_loaded": LeastLoadedRouter,
    "llumnix": FreestInstanceRouter,
    "session_affinity": SessionAffinityRouter,
}


def router_names() -> list[str]:
    return sorted(ROUTERS)


def register_router(name: str, factory: Callable[..., Router]) -> None:
    """Add a router under ``name`` (refuses a name already taken)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a router name must be a non-empty string, got {name!r}")
    if name in ROUTERS:
        raise ValueError(f"router {name!r} is already registered")
    ROUTERS[name] = factory


def make_router(name: str, **options: Any) -> Router:
    """A new router registered under ``name`` with ``options`` (``llumnix`` needs
    ``headroom_fractions``); an unknown name or option raises naming it."""
    if name not in ROUTERS:
        raise ValueError(f"unknown router {name!r}; known: {router_names()}")
    try:
        return ROUTERS[name](**options)
    except TypeError as error:
        raise ValueError(f"router {name!r} cannot take options {options}: {error}") from None


__all__ = ["ROUTERS", "Router", "fewest_requests", "make_router", "register_router", "router_names"]
