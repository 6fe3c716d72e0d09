"""Same trajectories: every env ID on every scenario it supports, replayed with the recorded seed
and random masked policy, gives the recorded observations, masks, rewards and infos (recorded by
``tests/trajectories.py`` before the observation was rebuilt from arrays).

Integers, booleans and strings must match exactly; floats to ``FLOAT_RTOL``. On the machine that
recorded them they match bit for bit, but numpy's SIMD kernels (``exp``, BLAS dot products) round
the last bit differently by CPU: on an AVX-512 machine Cascadia's utopia − nadir (a quadrature,
``simulator.cascade_quality``) comes out one ulp larger than on the recording machine, which moves
a third of the Cascade-v0 rewards by one ulp. Same-machine repeatability is checked bit for bit
here (two replays) and across processes in ``tests/test_determinism.py``.

Every case is replayed on both simulation engines: the compiled core (``backend="compiled"``, the
default) and the Python reference engine (``backend="python"``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trajectories import GOLDEN_DIR, record

INDEX = json.loads((GOLDEN_DIR / "index.json").read_text())
CASES = sorted(INDEX["recorded"])
FLOAT_RTOL = 1e-12  # a few ulps: far below any change of behaviour, above cross-CPU rounding
BACKENDS = ("compiled", "python")


def assert_same(actual, expected, where: str) -> None:
    """``actual`` equals ``expected`` (nested JSON values or arrays): floats to ``FLOAT_RTOL``, the rest exactly."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(actual) == sorted(expected), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert isinstance(actual, (int, float)), where
        np.testing.assert_allclose(actual, expected, rtol=FLOAT_RTOL, atol=0.0, err_msg=where)
    else:
        assert actual == expected, where


def test_every_registered_id_is_recorded_on_a_scenario():
    import envs

    recorded_ids = {case["env_id"] for case in INDEX["recorded"].values()}
    assert recorded_ids == set(envs.ENV_IDS)
    assert len(CASES) >= 39
    assert all(name.startswith("Cascade-v0-") or name.endswith("-mode_phase") for name in INDEX["unsupported"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CASES)
def test_replay_matches_the_recording(name, backend):
    case = INDEX["recorded"][name]
    options = {**case["options"], "backend": backend}
    assert_matches_the_recording(name, record(case["env_id"], case["scenario"], options, case["steps"], seed=INDEX["seed"]))


def assert_matches_the_recording(name: str, replay: dict[str, np.ndarray]) -> None:
    golden = np.load(GOLDEN_DIR / f"{name}.npz")
    assert sorted(replay) == sorted(golden.files)
    for key in golden.files:
        expected, actual = golden[key], replay[key]
        assert actual.shape == expected.shape, key
        if key == "infos":
            assert_same(json.loads(str(actual)), json.loads(str(expected)), f"{name}: infos")
        elif np.issubdtype(expected.dtype, np.floating):
            assert actual.dtype == expected.dtype, key
            np.testing.assert_allclose(actual, expected, rtol=FLOAT_RTOL, atol=0.0, err_msg=f"{name}: {key}")
        else:
            assert actual.dtype == expected.dtype, key
            np.testing.assert_array_equal(actual, expected, err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name", ["Cascade-v0-cascadia", "Routing-v0-default"])
def test_two_replays_on_one_machine_agree_bit_for_bit(name):
    case = INDEX["recorded"][name]
    first, second = (record(case["env_id"], case["scenario"], case["options"], 60, seed=INDEX["seed"]) for _ in range(2))
    assert sorted(first) == sorted(second)
    for key in first:
        assert first[key].tobytes() == second[key].tobytes(), f"{name}: {key} differs in its bits"
