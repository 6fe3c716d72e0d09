"""Saved models and normalisation statistics, loaded without running code from the files.

An SB3 model zip keeps its network weights in ``policy.pth`` (read by torch with
``weights_only=True``: tensors only) and its settings in ``data``, a JSON file in which SB3
stores every value JSON cannot hold (the policy class, the spaces, the learning-rate and clip
schedules, the last observation, the episode buffer) as a cloudpickle: unpickling it runs
whatever code the file's author put there. ``load_model`` unpickles none of them: it hands SB3
(``custom_objects``) the same objects rebuilt from the run's ``config.yml`` and the env, checks
that the spaces the file describes are the env's, and refuses a file holding another pickled
value. VecNormalize statistics are plain arrays in an ``.npz`` file (``save_vecnormalize``,
``load_vecnormalize``), read with ``allow_pickle=False``. Files written before, whose
statistics are a pickled ``.pkl``, are refused with the reason, or loaded as SB3 loads them when
the caller trusts them (``trust_pickle``, the commands' ``--trust-pickle``).
"""

from __future__ import annotations

import inspect
import json
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.save_util import data_to_json
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from agents.config import TrainConfig, get_algorithm

SERIALIZED = ":serialized:"
TRUST_FLAG = "--trust-pickle"
# Pickled members of ``data`` that SB3 rebuilds itself when a model is set up (``_setup_model``,
# ``_setup_learn``) from the other settings, so None stands in for them.
REBUILT_BY_SB3 = ("lr_schedule", "exploration_schedule", "rollout_buffer_class", "replay_buffer_class", "_last_obs",
                  "_last_episode_starts", "_last_original_obs", "_last_lstm_states", "ep_info_buffer",
                  "ep_success_buffer")
# VecNormalize settings kept beside its statistics.
VECNORMALIZE_SETTINGS = ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys",
                         "training")


def pickled_members(model_path: Path) -> list[str]:
    """The keys of a model zip's ``data`` whose values are cloudpickles (nothing is unpickled)."""
    try:
        with zipfile.ZipFile(model_path) as archive:
            data = json.loads(archive.read("data"))
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as error:
        raise ValueError(f"{model_path}: not a readable SB3 model zip: {error}") from None
    return [key for key, value in data.items() if isinstance(value, dict) and SERIALIZED in value]


def stored_space_text(model_path: Path, name: str) -> dict[str, Any]:
    """What a model zip's ``data`` says of one of its spaces in plain text (SB3 writes each
    JSON-able attribute beside the pickle), the random generator left out."""
    with zipfile.ZipFile(model_path) as archive:
        entry = json.loads(archive.read("data")).get(name, {})
    return _space_text(entry)


def _space_text(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {"value": entry}
    return {key: value for key, value in entry.items() if key not in (SERIALIZED, "_np_random")}


def _short(text: dict[str, Any]) -> str:
    """A space's type and size from its plain-text description."""
    kind = str(text.get(":type:", "")).split("'")[1::2][:1] or ["space"]
    size = {key: text[key] for key in ("_shape", "n", "nvec", "spaces") if key in text}
    return f"{kind[0].rsplit('.', 1)[-1]} {size}"


def rebuilt_objects(config: TrainConfig, env: gym.Env | VecEnv) -> dict[str, Any]:
    """The objects ``data`` pickles, rebuilt from the run's configuration and the env."""
    algorithm = get_algorithm(config.algo)
    parameters = inspect.signature(algorithm.cls.__init__).parameters
    kwargs = config.sb3_algo_kwargs()
    objects: dict[str, Any] = {name: None for name in REBUILT_BY_SB3}
    objects.update({"policy_class": algorithm.cls.policy_aliases[config.policy],
                    "policy_kwargs": config.sb3_policy_kwargs(),
                    "observation_space": env.observation_space, "action_space": env.action_space})
    for name in ("learning_rate", "clip_range", "clip_range_vf"):
        if name in parameters:
            objects[name] = kwargs.get(name, parameters[name].default)
    return objects


def load_model(model_path: Path, config: TrainConfig, env: gym.Env | VecEnv, device: str = "cpu",
               trust_pickle: bool = False) -> BaseAlgorithm:
    """The model saved at ``model_path`` by a run of ``config``, for ``env`` (whose spaces must be
    the ones it was trained with), without unpickling anything from the file; a file pickling a
    value servegym does not rebuild is refused unless ``trust_pickle`` (then SB3 loads it whole)."""
    model_path = Path(model_path)
    cls = get_algorithm(config.algo).cls
    vec_env = env if isinstance(env, VecEnv) else None
    if trust_pickle:
        return cls.load(model_path, env=vec_env, device=device)
    objects = rebuilt_objects(config, env)
    unknown = sorted(set(pickled_members(model_path)) - set(objects))
    if unknown:
        raise ValueError(f"{model_path}: its data pickles {unknown}, which servegym does not rebuild; unpickling them "
                         f"would run code from the file: pass {TRUST_FLAG} only if you trust who wrote it")
    expected = json.loads(data_to_json({name: objects[name] for name in ("observation_space", "action_space")}))
    for name, entry in expected.items():
        stored = stored_space_text(model_path, name)
        if stored != _space_text(entry):
            raise ValueError(f"{model_path} was trained with {name} {_short(stored)}, the evaluation env has "
                             f"{_short(_space_text(entry))}")
    return cls.load(model_path, env=vec_env, device=device, custom_objects=objects)


def save_vecnormalize(vec_normalize: VecNormalize, path: Path) -> None:
    """Write ``vec_normalize``'s running statistics and settings to ``path`` (``.npz``: arrays only)."""
    arrays: dict[str, np.ndarray] = {}
    stats = {}
    if vec_normalize.norm_obs:
        stats = vec_normalize.obs_rms if isinstance(vec_normalize.obs_rms, dict) else {"": vec_normalize.obs_rms}
    for key, rms in stats.items():
        arrays.update({f"obs/{key}/mean": rms.mean, f"obs/{key}/var": rms.var, f"obs/{key}/count": np.array(rms.count)})
    rms = vec_normalize.ret_rms
    arrays.update({"ret/mean": np.asarray(rms.mean), "ret/var": np.asarray(rms.var), "ret/count": np.array(rms.count)})
    settings = {name: getattr(vec_normalize, name) for name in VECNORMALIZE_SETTINGS}
    settings["obs_keys"] = list(stats)
    arrays["settings"] = np.array(json.dumps(settings))
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def load_vecnormalize(path: Path, venv: VecEnv, trust_pickle: bool = False) -> VecNormalize:
    """``venv`` behind the VecNormalize statistics saved at ``path`` (``save_vecnormalize``); an
    older pickled ``.pkl`` beside it is refused unless ``trust_pickle``."""
    path = Path(path)
    if not path.is_file():
        pickled = path.with_suffix(".pkl")
        if pickled.is_file():
            if trust_pickle:
                return VecNormalize.load(str(pickled), venv)
            raise ValueError(f"{pickled}: VecNormalize statistics in a pickle, which runs code when loaded (servegym "
                             f"now writes {path.name}, plain arrays): pass {TRUST_FLAG} only if you trust who wrote it")
        raise ValueError(f"{path}: no VecNormalize statistics")
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
        settings = json.loads(str(arrays.pop("settings")))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: unreadable VecNormalize statistics: {error}") from None
    keys = settings.pop("obs_keys")
    training = settings.pop("training")
    vec_normalize = VecNormalize(venv, **settings)
    for key in keys:
        rms = vec_normalize.obs_rms[key] if key else vec_normalize.obs_rms
        _fill(rms, arrays, f"obs/{key}", path)
    _fill(vec_normalize.ret_rms, arrays, "ret", path)
    vec_normalize.training = training
    return vec_normalize


def _fill(rms: RunningMeanStd, arrays: dict[str, np.ndarray], prefix: str, path: Path) -> None:
    mean, var = arrays[f"{prefix}/mean"], arrays[f"{prefix}/var"]
    if np.shape(mean) != np.shape(rms.mean):
        raise ValueError(f"{path}: statistics {prefix} have shape {np.shape(mean)}, the env's {np.shape(rms.mean)}")
    rms.mean, rms.var, rms.count = mean.astype(np.float64), var.astype(np.float64), float(arrays[f"{prefix}/count"])

