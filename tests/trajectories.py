"""Golden trajectories: every registered env ID on every scenario it supports, driven by a seeded
random masked policy, recorded before a refactor so a test can check the env still produces
the same observations, masks, rewards and infos bit for bit.

    .venv/bin/python tests/trajectories.py          # (re)record tests/golden/*.npz
    .venv/bin/python tests/trajectories.py default,pascal   # only these scenarios' cases

A case that cannot be built (the env refuses the scenario) is listed as unsupported in
``tests/golden/index.json`` and skipped.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import envs
from envs.random_policy import random_masked_action

GOLDEN_DIR = Path(__file__).parent / "golden"
SEED = 7
BUDGET_S = 3.0  # recording stops a case after this much wall time (at least MIN_STEPS steps)
MIN_STEPS = 5
UNRECORDED_INFO = ("episode_outcomes",)  # the request outcomes (objects): episode_metrics summarises them
STEPS = {  # per env ID at most: enough decisions to load the instances, few enough for small files
    "servegym/Routing-v0": 300,
    "servegym/Tier-v0": 200,
    "servegym/Migration-v0": 200,
    "servegym/Scaling-v0": 150,
    "servegym/Cascade-v0": 200,
}
VARIANTS: dict[str, tuple[dict[str, Any], ...]] = {  # options beyond the defaults, per env ID
    "servegym/Migration-v0": ({"mode": "phase"},),
}


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    """(env ID, scenario, options) for every ID on every registered scenario, defaults first."""
    found = []
    for env_id in envs.ENV_IDS:
        for scenario in envs.scenario_names():
            for options in ({}, *VARIANTS.get(env_id, ())):
                found.append((env_id, scenario, options))
    return found


def case_name(env_id: str, scenario: str, options: dict[str, Any]) -> str:
    suffix = "".join(f"-{k}_{v}" for k, v in sorted(options.items()))
    return f"{env_id.split('/')[1]}-{scenario}{suffix}"


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot record {type(value).__name__} in an info")


def record(
    env_id: str, scenario: str, options: dict[str, Any], steps: int, seed: int = SEED, budget_s: float = float("inf")
) -> dict[str, np.ndarray]:
    """Run ``steps`` steps (resetting at episode ends; fewer, but at least ``MIN_STEPS``, once
    ``budget_s`` wall seconds have passed) and return the trajectory as arrays: observations
    (per key), masks from ``action_masks()``, actions, rewards, done flags and the infos as one
    JSON string (floats written by ``repr``, so they round-trip exactly)."""
    started = time.perf_counter()
    env = gym.make(env_id, scenario=scenario, **options)
    rng = np.random.default_rng(seed)
    observation, info = env.reset(seed=seed)
    keys = sorted(observation)
    columns: dict[str, list[np.ndarray]] = {f"obs_{k}": [observation[k]] for k in keys}
    masks, actions, rewards, dones, infos = [], [], [], [], [info]
    for step in range(steps):
        if step >= MIN_STEPS and time.perf_counter() - started > budget_s:
            break
        mask = env.unwrapped.action_masks()
        masks.append(np.asarray(mask).reshape(-1))
        action = random_masked_action(env.action_space, np.asarray(mask).reshape(-1), rng)
        observation, reward, terminated, truncated, info = env.step(action)
        actions.append(np.asarray(action, dtype=np.float64).reshape(-1))
        rewards.append(reward)
        dones.append(terminated or truncated)
        infos.append({k: v for k, v in info.items() if k not in UNRECORDED_INFO})
        for k in keys:
            columns[f"obs_{k}"].append(observation[k])
        if terminated or truncated:
            observation, info = env.reset()
            infos.append(info)
            for k in keys:
                columns[f"obs_{k}"].append(observation[k])
    env.close()
    arrays = {name: np.stack(values) for name, values in columns.items()}
    arrays["masks"] = np.stack(masks)
    arrays["actions"] = np.stack(actions)
    arrays["rewards"] = np.asarray(rewards, dtype=np.float64)
    arrays["dones"] = np.asarray(dones, dtype=bool)
    arrays["infos"] = np.asarray(json.dumps(infos, default=_json_default, allow_nan=True))
    return arrays


def main(argv: list[str] | None = None) -> int:
    """Record every case, or with a comma-separated list of scenarios only theirs (the other
    cases' files and index entries stay as they are)."""
    argv = sys.argv[1:] if argv is None else argv
    GOLDEN_DIR.mkdir(exist_ok=True)
    index: dict[str, Any] = {"seed": SEED, "recorded": {}, "unsupported": {}}
    only = set(argv[0].split(",")) if argv else None
    if only is not None:
        unknown = sorted(only - set(envs.scenario_names()))
        if unknown:
            print(f"trajectories.py: error: scenario {unknown[0]!r}: not registered; known: {envs.scenario_names()}", file=sys.stderr)
            return 2
        index = json.loads((GOLDEN_DIR / "index.json").read_text())
    for env_id, scenario, options in cases():
        if only is not None and scenario not in only:
            continue
        name = case_name(env_id, scenario, options)
        index["recorded"].pop(name, None)
        index["unsupported"].pop(name, None)
        try:
            gym.make(env_id, scenario=scenario, **options).close()
        except ValueError as error:
            index["unsupported"][name] = str(error)
            print(f"{name:<48} unsupported: {error}")
            continue
        started = time.perf_counter()
        arrays = record(env_id, scenario, options, STEPS[env_id], budget_s=BUDGET_S)
        seconds = time.perf_counter() - started
        np.savez_compressed(GOLDEN_DIR / f"{name}.npz", **arrays)
        index["recorded"][name] = {"env_id": env_id, "scenario": scenario, "options": options,
                                   "steps": len(arrays["rewards"])}
        size_kb = (GOLDEN_DIR / f"{name}.npz").stat().st_size / 1024
        print(f"{name:<48} {len(arrays['rewards']):>4} steps {size_kb:>7.0f} KiB {seconds:>6.1f} s")
    (GOLDEN_DIR / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
