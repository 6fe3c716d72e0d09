"""Same trajectories: every env ID on every scenario it supports, replayed with the recorded seed
and random masked policy, gives the recorded observations, masks, rewards and infos bit for
bit (recorded by ``tests/trajectories.py`` before the observation was rebuilt from arrays)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trajectories import GOLDEN_DIR, record

INDEX = json.loads((GOLDEN_DIR / "index.json").read_text())
CASES = sorted(INDEX["recorded"])


def test_every_registered_id_is_recorded_on_a_scenario():
    import envs

    recorded_ids = {case["env_id"] for case in INDEX["recorded"].values()}
    assert recorded_ids == set(envs.ENV_IDS)
    assert len(CASES) >= 39
    assert all(name.startswith("Cascade-v0-") or name.endswith("-mode_phase") for name in INDEX["unsupported"])


@pytest.mark.parametrize("name", CASES)
def test_replay_is_bit_identical(name):
    case = INDEX["recorded"][name]
    golden = np.load(GOLDEN_DIR / f"{name}.npz")
    replay = record(case["env_id"], case["scenario"], case["options"], case["steps"], seed=INDEX["seed"])
    assert sorted(replay) == sorted(golden.files)
    for key in golden.files:
        expected, actual = golden[key], replay[key]
        assert actual.shape == expected.shape, key
        if key == "infos":
            assert str(actual) == str(expected), f"{name}: infos differ"
        else:
            assert actual.dtype == expected.dtype, key
            np.testing.assert_array_equal(actual, expected, err_msg=f"{name}: {key}")
            assert actual.tobytes() == expected.tobytes(), f"{name}: {key} differs in its bits"
