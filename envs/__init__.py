"""Gymnasium environments over the serving simulator, registered on import under ``servegym/``.

    import gymnasium as gym, envs
    env = gym.make("servegym/Routing-v0", scenario="default", reward="slo")
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from envs.presets import make_scenario, register_scenario, scenario_names

ENV_IDS = {
    "servegym/Routing-v0": "envs.routing:RoutingEnv",
    "servegym/Tier-v0": "envs.tier:TierEnv",
    "servegym/Migration-v0": "envs.migration:MigrationEnv",
    "servegym/Scaling-v0": "envs.scaling:ScalingEnv",
    "servegym/Cascade-v0": "envs.cascade:CascadeEnv",
}

for env_id, entry_point in ENV_IDS.items():
    if env_id not in registry:
        register(id=env_id, entry_point=entry_point)

__all__ = ["ENV_IDS", "make_scenario", "register_scenario", "scenario_names"]
