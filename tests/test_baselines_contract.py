"""The baselines read the observation only through the env's schema (``envs.schema``): no
literal index into ``instances`` / ``context`` / ``action_mask``, no encoding inverted by hand,
no env internals (simulator, reward function, private attributes). Checked on the source of
every module in ``baselines/`` (``baselines.policy`` explains the contract)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BASELINES = Path(__file__).resolve().parent.parent / "baselines"
OBSERVATION_KEYS = {"instances", "context", "action_mask"}
# The env's public settings a policy may read besides the observation: what its action space
# means (modes, levels, gears, unit kinds), its schema, and ``scenario`` in the base class only.
PUBLIC_ENV_ATTRIBUTES = {
    "schema", "env_id", "action_space", "unwrapped", "action_mode", "mode", "continuous", "threshold_levels",
    "min_queue_lengths", "models", "gears", "entry_stages", "quality_kind", "difficulty_mean", "quality_min",
    "quality_penalty_mu", "units", "kind_names", "scaling_window_s", "hold_action",
}
SCENARIO_READER = "policy.py"  # baselines.policy.Policy hands the scenario to planners as self.scenario
ENCODING_NAMES = ("squash", "COUNT_SCALE", "TOKEN_SCALE", "FREENESS_SCALE", "KV_BLOCKS_SCALE", "SERVICE_TIME_SCALE_S",
                  "KV_TOKENS_SCALE", "CONTEXT_", "GLOBAL_CONTEXT", "PER_SLOT_CONTEXT", "feature_index")


def _is_env(node: ast.AST) -> bool:
    """``env``, ``self.env``, ``unwrapped`` or ``<anything>.unwrapped``."""
    if isinstance(node, ast.Name):
        return node.id in ("env", "unwrapped")
    if isinstance(node, ast.Attribute):
        return node.attr == "unwrapped" or (node.attr == "env" and isinstance(node.value, ast.Name) and node.value.id == "self")
    return False


def violations(source: str, filename: str) -> list[str]:
    """Where ``source`` reads the observation or the env other than through the schema."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in OBSERVATION_KEYS:
            found.append(f"{filename}:{line}: indexes observation[{node.slice.value!r}]")
        elif isinstance(node, ast.Attribute) and _is_env(node.value):
            allowed = node.attr in PUBLIC_ENV_ATTRIBUTES or (node.attr == "scenario" and filename == SCENARIO_READER)
            if not allowed:
                found.append(f"{filename}:{line}: reads env.{node.attr}")
        elif isinstance(node, (ast.Name, ast.Attribute, ast.alias, ast.FunctionDef)):
            name = {ast.Name: "id", ast.Attribute: "attr", ast.alias: "name", ast.FunctionDef: "name"}[type(node)]
            text = getattr(node, name)
            if any(marker in text for marker in ENCODING_NAMES):
                found.append(f"{filename}:{line}: uses {text} (an encoding or layout detail)")
    return found


def test_no_baseline_indexes_the_observation_inverts_encodings_or_reads_env_internals():
    files = sorted(BASELINES.rglob("*.py"))
    assert len(files) > 30
    found = [v for path in files for v in violations(path.read_text(), path.name if path.parent == BASELINES else
                                                      f"{path.parent.name}/{path.name}")]
    assert found == []


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ("x = observation['context'][0]", "indexes observation['context']"),
        ("m = obs['action_mask'].reshape(3, 3)", "indexes observation['action_mask']"),
        ("q = unsquash(v, 16.0)", "uses unsquash"),
        ("from envs.observation import COUNT_SCALE", "uses COUNT_SCALE"),
        ("from envs.cascade import CONTEXT_STAGES", "uses CONTEXT_STAGES"),
        ("r = self.env.reward_fn", "reads env.reward_fn"),
        ("c = self.env.cluster", "reads env.cluster"),
        ("s = env.unwrapped.scenario", "reads env.scenario"),
        ("p = self.env._decision", "reads env._decision"),
    ],
)
def test_the_check_catches_each_kind_of_violation(snippet, what):
    (message,) = violations(snippet, "some_policy.py")
    assert what in message


def test_the_check_allows_schema_reads_and_public_settings():
    source = "view = self.schema.decode(observation)\nq = view.context['arrivals_per_s']\nn = self.env.threshold_levels\n"
    assert violations(source, "some_policy.py") == []
    assert violations("s = env.unwrapped.scenario", SCENARIO_READER) == []
