"""Loading a model runs no code from its files (issue 42): a crafted model zip whose ``data``
pickles a payload in ``lr_schedule``, and crafted VecNormalize statistics beside a valid model,
are evaluated or refused without the payload running; older pickled statistics load only
behind ``--trust-pickle``."""

from __future__ import annotations

import base64
import json
import pickle
import zipfile
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from agents.config import build_config, vecnormalize_path
from agents.evaluate import main as evaluate_main
from agents.train import main as train_main
from agents.train import resume, train

ROUTING = "servegym/Routing-v0"
TINY = ["n_steps=32", "batch_size=32", "n_epochs=1", "policy_kwargs.net_arch=[16]", "env_kwargs.episode_requests=20",
        "normalize={norm_obs: true, norm_reward: true}"]


class Payload:
    """Unpickling it creates ``marker``: the stand-in for ``touch PWNED``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished 64-step run whose observations and rewards are normalised."""
    config = build_config(ROUTING, "default", "maskable_ppo", 0, n_timesteps=64, n_envs=1, device="cpu",
                          overrides=TINY, checkpoint_freq=0)
    return train(config, tmp_path_factory.mktemp("runs")).run_dir


def _evaluate(model: Path, tmp_path: Path, *extra: str) -> int:
    return evaluate_main(["--env", ROUTING, "--policies", str(model), "--seeds", "10000", "--set", "episode_requests=20",
                          "--out", str(tmp_path / "eval"), *extra])


def _with_data(source: Path, target: Path, change) -> Path:
    """A copy of the model zip ``source`` at ``target`` with its ``data`` JSON changed by ``change``."""
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    change(data)
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return target


def _pickled(payload: object) -> dict[str, str]:
    return {":type:": "<class 'function'>", ":serialized:": base64.b64encode(cloudpickle.dumps(payload)).decode()}


def _copy_run(run_dir: Path, tmp_path: Path) -> Path:
    """The run's config and statistics beside a new model path in ``tmp_path``."""
    (tmp_path / "config.yml").write_bytes((run_dir / "config.yml").read_bytes())
    return tmp_path / "final_model.zip"


def test_a_payload_in_the_model_zip_does_not_run(run_dir, tmp_path):
    marker = tmp_path / "PWNED"
    model = _with_data(run_dir / "final_model.zip", _copy_run(run_dir, tmp_path),
                       lambda data: data.update(lr_schedule=_pickled(Payload(marker))))
    stats = vecnormalize_path(run_dir / "final_model.zip")
    vecnormalize_path(model).write_bytes(stats.read_bytes())
    assert _evaluate(model, tmp_path) == 0  # evaluated with the schedule rebuilt from config.yml
    assert not marker.exists()


def test_a_model_pickling_a_setting_servegym_does_not_rebuild_is_refused(run_dir, tmp_path, capsys):
    marker = tmp_path / "PWNED"
    model = _with_data(run_dir / "final_model.zip", _copy_run(run_dir, tmp_path),
                       lambda data: data.update(surprise=_pickled(Payload(marker))))
    vecnormalize_path(model).write_bytes(vecnormalize_path(run_dir / "final_model.zip").read_bytes())
    assert _evaluate(model, tmp_path) == 2
    err = capsys.readouterr().err
    assert "pickles ['surprise'], which servegym does not rebuild" in err and "--trust-pickle" in err
    assert not marker.exists()


def test_crafted_statistics_beside_a_valid_model_do_not_run(run_dir, tmp_path, capsys):
    marker = tmp_path / "PWNED"
    model = _copy_run(run_dir, tmp_path)
    model.write_bytes((run_dir / "final_model.zip").read_bytes())
    stats = vecnormalize_path(model)
    stats.unlink(missing_ok=True)
    stats.with_suffix(".pkl").write_bytes(pickle.dumps(Payload(marker)))  # the older pickled name
    assert _evaluate(model, tmp_path) == 2
    err = capsys.readouterr().err
    assert "final_model_vecnormalize.pkl: VecNormalize statistics in a pickle, which runs code" in err
    assert "--trust-pickle" in err and not marker.exists()
    stats.with_suffix(".pkl").unlink()
    np.savez(stats, settings=np.array([Payload(marker)], dtype=object))  # arrays that are pickles
    assert _evaluate(model, tmp_path) == 2
    assert "unreadable VecNormalize statistics" in capsys.readouterr().err and not marker.exists()


def test_older_pickled_statistics_load_only_behind_trust_pickle(run_dir, tmp_path, capsys):
    from stable_baselines3.common.vec_env import DummyVecEnv

    from agents.model_files import load_vecnormalize
    from agents.train import make_env

    model = _copy_run(run_dir, tmp_path)
    model.write_bytes((run_dir / "final_model.zip").read_bytes())
    saved = load_vecnormalize(vecnormalize_path(run_dir / "final_model.zip"),
                              DummyVecEnv([lambda: make_env(ROUTING, "default", {"episode_requests": 20}, False)]))
    saved.save(str(vecnormalize_path(model).with_suffix(".pkl")))  # as SB3 wrote statistics before
    assert _evaluate(model, tmp_path) == 2 and "--trust-pickle" in capsys.readouterr().err
    assert _evaluate(model, tmp_path, "--trust-pickle") == 0


def test_resume_reads_no_pickle_and_trust_pickle_goes_with_resume_only(run_dir, tmp_path, capsys):
    checkpoint = next((run_dir / "checkpoints").glob("model_*_steps.zip"))
    assert vecnormalize_path(checkpoint).suffix == ".npz" and vecnormalize_path(checkpoint).is_file()
    assert resume(run_dir, timesteps=32).num_timesteps == 96
    with pytest.raises(SystemExit):
        train_main(["--env", ROUTING, "--algo", "maskable_ppo", "--trust-pickle"])
    assert "--trust-pickle goes with --resume" in capsys.readouterr().err
