"""Training configuration: which SB3 algorithms drive servegym envs, their hyper-parameter files
(``agents/hyperparams/<algo>.yml``), ``--set key=value`` overrides, and the resolved run
configuration saved as ``config.yml`` beside every model.

The files are servegym's own format, not RL Zoo's (``rl_zoo3`` cannot read them: it has no
``defaults`` section and does not know servegym's policies such as ``NoOpPriorPolicy``); key
names follow SB3's constructor arguments. A hyper-parameter file has a ``defaults`` section and optional sections named by env ID; the
env's section overrides ``defaults`` key by key (nested dicts are merged). Keys: ``policy``,
``n_envs``, ``vec_env`` (``subproc``: one process per env when n_envs > 1; ``dummy``: all in
this process; ``native``: servegym/Routing-v0's or Tier-v0's envs stepped together in the compiled core,
``agents.vec_env.NativeVecEnv``, for the configurations it covers; ``auto``, the default:
``native`` where it covers the configuration, else ``subproc`` where the machine has a core for
each env and one more for training, else ``dummy``; the same seed trains the same model under
each, only the wall time differs; ``agents.train.resolve_vec_env``), ``n_timesteps``, ``normalize`` (false, true or VecNormalize
keyword arguments),
``learning_rate``, ``clip_range`` and ``clip_range_vf`` may be ``lin_<value>`` (RL Zoo's linear
schedule: ``value`` at the start of training, 0 at its end);
``env_kwargs``, ``policy_kwargs`` and the algorithm's own constructor arguments.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import logging
import math
import re
import types
import typing
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from gymnasium import spaces
from sb3_contrib import MaskablePPO, RecurrentPPO
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecNormalize

from agents.noop_prior import NoOpPriorPolicy
from agents.policies import InstanceScoringPolicy, MaskableInstanceScoringPolicy

HYPERPARAMS_DIR = Path(__file__).parent / "hyperparams"
DEFAULTS_SECTION = "defaults"
RUN_KEYS = ("policy", "n_envs", "vec_env", "n_timesteps", "normalize", "env_kwargs", "policy_kwargs")
VEC_ENVS = ("auto", "subproc", "dummy", "native")
# Constructor arguments a run fixes itself, or that take Python classes a YAML file cannot name.
RESERVED_ALGO_ARGS = frozenset({
    "self", "policy", "env", "seed", "device", "verbose", "tensorboard_log", "policy_kwargs",
    "_init_setup_model", "rollout_buffer_class", "replay_buffer_class",
})
ACTIVATIONS = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU, "leaky_relu": torch.nn.LeakyReLU}
# Observation keys VecNormalize scales; the 0/1 action mask is left as it is.
NORMALIZED_OBS_KEYS = ["instances", "context"]
DEVICES = ("cpu", "cuda", "auto")
# Where runs train and saved models act unless told otherwise. SB3's MLP and multi-input policies
# train faster on the CPU: on an H200 machine (16 cores), MaskablePPO through
# ``experiments.benchmarks.env_speed`` made 354 / 205 / 202 / 189 / 176 steps/s with ``--ppo-device
# cuda`` against 523 / 293 / 282 / 267 / 388 on its CPU with one torch thread (Routing, Tier,
# Migration, Scaling, Cascade; one run each). The CPU default also keeps a seed's result the same on machines
# with and without a GPU.
DEFAULT_DEVICE = "cpu"
# How a trained policy acts in evaluation: its most likely action, or a sampled one.
EVAL_MODES = ("deterministic", "stochastic")
SCHEDULE_ARGS = ("learning_rate", "clip_range", "clip_range_vf")  # take ``lin_<value>``
LINEAR_SCHEDULE = re.compile(r"lin_(.+)")
SB3_ARCHIVE_MEMBERS = ("data", "policy.pth")  # what every saved SB3 model holds
# Integer constructor arguments that count something and so must be at least 1.
COUNT_ARGS = frozenset({"n_steps", "batch_size", "n_epochs", "buffer_size", "gradient_steps", "target_update_interval",
                        "stats_window_size"})

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Algorithm:
    """An SB3 algorithm and the action spaces its policies can act in."""

    name: str
    cls: type[BaseAlgorithm]
    action_spaces: tuple[type[spaces.Space], ...]

    @property
    def takes_masks(self) -> bool:
        return issubclass(self.cls, MaskablePPO)

    def constructor_args(self) -> list[str]:
        """Keyword arguments a hyper-parameter file may set."""
        return [p for p in inspect.signature(self.cls.__init__).parameters if p not in RESERVED_ALGO_ARGS]

    def check_types(self, kwargs: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the first argument whose value does not fit the type the
        constructor declares (``n_steps: "abc"``, ``gamma: .nan``, ``n_epochs: 0``), so a bad
        hyper-parameter fails before any env or model is built."""
        parameters = inspect.signature(self.cls.__init__).parameters
        for name, value in kwargs.items():
            hint = parameters[name].annotation
            if not _fits(value, hint):
                raise ValueError(f"{name} {value!r}: {self.name} takes {_describe(hint)}")
            if name in COUNT_ARGS and isinstance(value, int) and value < 1:
                raise ValueError(f"{name} {value!r}: must be an integer >= 1")


def _fits(value: Any, hint: Any) -> bool:
    """Whether a YAML value fits a constructor annotation (a schedule may be ``lin_<value>``;
    floats must be finite; annotations not listed here are left to the constructor)."""
    if hint is inspect.Parameter.empty or hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin is collections.abc.Callable:
        return isinstance(value, str)  # lin_<value>, checked by linear_schedule
    if hint is dict or origin is dict:
        return isinstance(value, dict)
    if origin is tuple:
        return isinstance(value, (list, tuple)) and len(value) == len(args) and all(map(_fits, value, args))
    return True


def _describe(hint: Any) -> str:
    """An annotation as a reader would say it: ``int``, ``float or a schedule 'lin_<value>' or None``."""
    if hint is None or hint is type(None):
        return "None"
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if typing.get_origin(hint) is collections.abc.Callable:
        return "a schedule 'lin_<value>'"
    if hint is float:
        return "a finite number"
    return getattr(hint, "__name__", str(hint))


# servegym's own policies by the name a hyper-parameter file gives (``policy: InstanceScoringPolicy``);
# the algorithms below know them as SB3 knows its ``MultiInputPolicy``.
INSTANCE_SCORING = "InstanceScoringPolicy"
NOOP_PRIOR = "NoOpPriorPolicy"


class ServegymPPO(PPO):
    """PPO that also knows ``InstanceScoringPolicy`` (``agents.policies``) by name."""

    policy_aliases = {**PPO.policy_aliases, INSTANCE_SCORING: InstanceScoringPolicy}


class ServegymA2C(A2C):
    """A2C that also knows ``InstanceScoringPolicy`` (``agents.policies``) by name."""

    policy_aliases = {**A2C.policy_aliases, INSTANCE_SCORING: InstanceScoringPolicy}


class ServegymMaskablePPO(MaskablePPO):
    """MaskablePPO that also knows ``InstanceScoringPolicy`` (its maskable variant) and
    ``NoOpPriorPolicy`` (``agents.noop_prior``) by name."""

    policy_aliases = {**MaskablePPO.policy_aliases, INSTANCE_SCORING: MaskableInstanceScoringPolicy,
                      NOOP_PRIOR: NoOpPriorPolicy}


_ALL_SPACES = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)
ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm("ppo", ServegymPPO, _ALL_SPACES),
    "maskable_ppo": Algorithm("maskable_ppo", ServegymMaskablePPO, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)),
    "a2c": Algorithm("a2c", ServegymA2C, _ALL_SPACES),
    "dqn": Algorithm("dqn", DQN, (spaces.Discrete,)),
    "recurrent_ppo": Algorithm("recurrent_ppo", RecurrentPPO, _ALL_SPACES),
}


def get_algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]


def check_action_space(algo: str, action_space: spaces.Space) -> None:
    """Raise if ``algo`` cannot act in ``action_space`` (e.g. DQN needs ``Discrete``)."""
    algorithm = get_algorithm(algo)
    if not isinstance(action_space, algorithm.action_spaces):
        known = [s.__name__ for s in algorithm.action_spaces]
        raise ValueError(f"algorithm {algo!r} cannot act in {action_space} (it supports {known})")


def resolve_device(device: str) -> str:
    """``cpu``; ``cuda`` (an error when CUDA is absent); ``auto`` = CUDA when present, else CPU."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; known: {list(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device 'cuda' asked but CUDA is not available (torch {torch.__version__})")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on; ``config.yml`` is ``to_dict()`` of this.

    ``normalize`` is None (no VecNormalize) or VecNormalize's keyword arguments.
    ``eval_freq`` (env steps, 0 = off), ``eval_seeds``, ``eval_baselines``, ``eval_metric``
    (the mean episode metric that picks ``best_model.zip``) and ``eval_mode`` (one of
    ``EVAL_MODES``) drive periodic evaluation;
    ``checkpoint_freq`` (env steps, 0 = only the final one) drives checkpoints.
    ``torch_threads``: torch's intra-op threads (small MLPs on few cores train fastest on one).
    """

    env_id: str
    scenario: str
    algo: str
    seed: int
    n_envs: int
    n_timesteps: int
    device: str
    policy: str
    normalize: dict[str, Any] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    algo_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_freq: int = 0
    eval_seeds: list[int] = field(default_factory=list)
    eval_baselines: list[str] = field(default_factory=list)
    eval_metric: str = "return"
    checkpoint_freq: int = 0
    vec_env: str = "auto"
    torch_threads: int = 1
    eval_mode: str = "deterministic"

    def __post_init__(self) -> None:
        algorithm = get_algorithm(self.algo)
        for name in ("seed", "eval_freq", "checkpoint_freq"):
            object.__setattr__(self, name, as_int(name, getattr(self, name), minimum=0))
        for name in ("n_envs", "n_timesteps", "torch_threads"):
            object.__setattr__(self, name, as_int(name, getattr(self, name), minimum=1))
        object.__setattr__(self, "eval_seeds", [as_int("eval seed", s, minimum=0) for s in self.eval_seeds])
        if self.eval_mode not in EVAL_MODES:
            raise ValueError(f"unknown eval_mode {self.eval_mode!r}; known: {list(EVAL_MODES)}")
        if self.vec_env not in VEC_ENVS:
            raise ValueError(f"unknown vec_env {self.vec_env!r}; known: {list(VEC_ENVS)}")
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}; known: {list(DEVICES)}")
        if self.policy not in algorithm.cls.policy_aliases or self.policy.startswith("Cnn"):
            known = sorted(p for p in algorithm.cls.policy_aliases if not p.startswith("Cnn"))
            raise ValueError(f"unknown policy {self.policy!r} for {self.algo}; known: {known}")
        unknown = sorted(set(self.algo_kwargs) - set(algorithm.constructor_args()))
        if unknown:
            raise ValueError(f"unknown hyper-parameter(s) {unknown} for {self.algo}; known: "
                             f"{sorted([*RUN_KEYS, *algorithm.constructor_args()])}")
        algorithm.check_types(self.algo_kwargs)
        for name in SCHEDULE_ARGS:
            if isinstance(self.algo_kwargs.get(name), str):
                linear_schedule(name, self.algo_kwargs[name])
        if self.normalize is not None:
            bad = sorted(set(self.normalize) - set(inspect.signature(VecNormalize.__init__).parameters) - {"self", "venv"})
            if bad:
                raise ValueError(f"unknown normalize option(s) {bad}")
        if "activation_fn" in self.policy_kwargs and self.policy_kwargs["activation_fn"] not in ACTIVATIONS:
            raise ValueError(f"unknown activation_fn {self.policy_kwargs['activation_fn']!r}; known: {sorted(ACTIVATIONS)}")
        if self.eval_freq > 0 and not self.eval_seeds:
            raise ValueError("eval_freq > 0 needs at least one evaluation seed")

    @property
    def flat_observation(self) -> bool:
        """``Mlp*`` policies take the flattened observation; ``MultiInput*`` and
        ``InstanceScoringPolicy`` take the Dict."""
        return self.policy.startswith("Mlp")

    def sb3_policy_kwargs(self) -> dict[str, Any]:
        """``policy_kwargs`` with the activation name replaced by its torch class."""
        kwargs = dict(self.policy_kwargs)
        if "activation_fn" in kwargs:
            kwargs["activation_fn"] = ACTIVATIONS[kwargs["activation_fn"]]
        return kwargs

    def sb3_algo_kwargs(self) -> dict[str, Any]:
        """``algo_kwargs`` with each ``lin_<value>`` schedule made SB3's ``LinearSchedule``."""
        return {name: linear_schedule(name, value) if name in SCHEDULE_ARGS and isinstance(value, str) else value
                for name, value in self.algo_kwargs.items()}

    def vec_normalize_kwargs(self) -> dict[str, Any]:
        """VecNormalize arguments: the action mask is not scaled; gamma follows the algorithm's."""
        assert self.normalize is not None
        kwargs = dict(self.normalize)
        if not self.flat_observation:
            kwargs.setdefault("norm_obs_keys", NORMALIZED_OBS_KEYS)
        if "gamma" in self.algo_kwargs:
            kwargs.setdefault("gamma", self.algo_kwargs["gamma"])
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def save(self, path: Path) -> None:
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def load(cls, path: Path) -> TrainConfig:
        if not path.is_file():
            raise ValueError(f"no training config at {path}")
        return cls.from_dict(load_yaml(path))


def build_config(
    env_id: str,
    scenario: str,
    algo: str,
    seed: int,
    *,
    n_timesteps: int | None = None,
    n_envs: int | None = None,
    device: str = DEFAULT_DEVICE,
    hyperparams_path: Path | None = None,
    overrides: Sequence[str] = (),
    eval_freq: int = 0,
    eval_seeds: Sequence[int] = (),
    eval_baselines: Sequence[str] = (),
    eval_metric: str = "return",
    checkpoint_freq: int = 0,
    torch_threads: int = 1,
    vec_env: str | None = None,
    eval_mode: str = "deterministic",
) -> TrainConfig:
    """Resolve a run's configuration: hyper-parameter file (``env_id`` section over
    ``defaults``), then ``overrides`` (``key=value``, dotted keys reach into dicts), then the
    explicit ``n_timesteps`` / ``n_envs`` / ``vec_env`` when given."""
    algorithm = get_algorithm(algo)
    hyperparams = load_hyperparams(algo, env_id, hyperparams_path)
    hyperparams = apply_overrides(hyperparams, overrides, [*RUN_KEYS, *algorithm.constructor_args()])

    def required(key: str, explicit: Any = None) -> Any:
        value = explicit if explicit is not None else hyperparams.get(key)
        if value is None:
            raise ValueError(f"hyper-parameters for {algo} on {env_id} do not set {key!r}")
        return value

    normalize = hyperparams.get("normalize", False)
    if not isinstance(normalize, (bool, dict)):
        raise ValueError(f"normalize must be true, false or a dict of VecNormalize options, got {normalize!r}")
    return TrainConfig(
        env_id=env_id,
        scenario=scenario,
        algo=algo,
        seed=seed,
        n_envs=required("n_envs", n_envs),
        n_timesteps=required("n_timesteps", n_timesteps),
        device=device,
        policy=required("policy"),
        normalize=({} if normalize is True else None) if isinstance(normalize, bool) else normalize,
        env_kwargs=_as_dict("env_kwargs", hyperparams.get("env_kwargs", {})),
        policy_kwargs=_as_dict("policy_kwargs", hyperparams.get("policy_kwargs", {})),
        algo_kwargs={k: v for k, v in hyperparams.items() if k not in RUN_KEYS},
        eval_freq=eval_freq,
        eval_seeds=list(eval_seeds),
        eval_baselines=list(eval_baselines),
        eval_metric=eval_metric,
        checkpoint_freq=checkpoint_freq,
        vec_env=vec_env or hyperparams.get("vec_env", "auto"),
        torch_threads=torch_threads,
        eval_mode=eval_mode,
    )


def linear_schedule(name: str, text: str) -> LinearSchedule:
    """``lin_<value>`` (RL Zoo): ``value`` at the start of training, linearly down to 0 at the end."""
    match = LINEAR_SCHEDULE.fullmatch(text)
    try:
        start = float(match[1]) if match else math.nan
    except ValueError:
        start = math.nan
    if not (math.isfinite(start) and start > 0):
        raise ValueError(f"{name} must be a number or 'lin_<positive number>', got {text!r}")
    return LinearSchedule(start, 0.0, 1.0)


def load_hyperparams(algo: str, env_id: str, path: Path | None = None) -> dict[str, Any]:
    """The ``defaults`` section of ``path`` (default: ``hyperparams/<algo>.yml``) merged with
    its ``env_id`` section."""
    get_algorithm(algo)
    path = HYPERPARAMS_DIR / f"{algo}.yml" if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"no hyper-parameter file {path}")
    sections = load_yaml(path)
    if not isinstance(sections, dict) or (DEFAULTS_SECTION not in sections and env_id not in sections):
        raise ValueError(f"{path} has neither a {DEFAULTS_SECTION!r} nor a {env_id!r} section")
    merged: dict[str, Any] = {}
    for name in (DEFAULTS_SECTION, env_id):
        section = sections.get(name) or {}
        if not isinstance(section, dict):
            raise ValueError(f"section {name!r} of {path} is not a mapping")
        merged = deep_merge(merged, section)
    return merged


def apply_overrides(hyperparams: Mapping[str, Any], assignments: Sequence[str], known_keys: Sequence[str]) -> dict[str, Any]:
    """``hyperparams`` with each ``key=value`` applied; the value is parsed as YAML
    (``1e-4`` as a float), ``a.b=v`` sets key ``b`` of dict ``a``."""
    result = deep_merge({}, hyperparams)
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        if not sep or not key:
            raise ValueError(f"override {assignment!r} is not key=value")
        path = key.split(".")
        if path[0] not in known_keys:
            raise ValueError(f"unknown hyper-parameter {path[0]!r} in {assignment!r}; known: {sorted(known_keys)}")
        target = result
        for part in path[:-1]:
            child = target.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"cannot set {key!r}: {part!r} is {child!r}, not a mapping")
            target = child
        target[path[-1]] = parse_value(text)
    return result


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: ``update`` over ``base``, merging nested dicts key by key."""
    merged = {k: deep_merge({}, v) if isinstance(v, Mapping) else v for k, v in base.items()}
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = deep_merge({}, value) if isinstance(value, Mapping) else value
    return merged


class _Loader(yaml.SafeLoader):
    """YAML 1.1 loader that also reads ``1e-4`` (no dot) as a float, as YAML 1.2 does."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+"
               r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)


def load_yaml(path: Path) -> Any:
    """The YAML file at ``path``; a file YAML cannot read raises ``ValueError`` naming it and where."""
    with open(path) as handle:
        try:
            return yaml.load(handle, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
        except yaml.YAMLError as error:
            raise ValueError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None


def parse_value(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)


def as_int(name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``; floats must be whole (``2e5`` is fine, ``2.5`` is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def _as_dict(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a mapping, got {value!r}")
    return value


def run_name(config: TrainConfig, timestamp: str) -> str:
    """``{env}__{scenario}__{algo}__{seed}__{timestamp}`` with the env ID's ``/`` made ``_``."""
    return f"{sanitize(config.env_id)}__{config.scenario}__{config.algo}__{config.seed}__{timestamp}"


def sanitize(name: str) -> str:
    """``name`` usable as one path component: ``servegym/Routing-v0`` -> ``servegym_Routing-v0``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def vecnormalize_path(model_path: Path) -> Path:
    """Where a saved model's VecNormalize statistics live (``agents.model_files``: plain arrays):
    ``<stem>_vecnormalize.npz`` beside it, or SB3's checkpoint name
    ``model_vecnormalize_<n>_steps.npz`` for ``model_<n>_steps.zip``."""
    model_path = Path(model_path)
    match = re.fullmatch(r"(.*)_(\d+)_steps", model_path.stem)
    if match:
        return model_path.with_name(f"{match[1]}_vecnormalize_{match[2]}_steps.npz")
    return model_path.with_name(f"{model_path.stem}_vecnormalize.npz")


def latest_checkpoint(run_dir: Path, with_stats: bool = False) -> tuple[Path, int]:
    """The intact checkpoint ``checkpoints/model_<n>_steps.zip`` of ``run_dir`` with the
    largest n (and its VecNormalize statistics when ``with_stats``); newer ones that are
    truncated or corrupt are skipped with a logged warning naming them."""
    found = []
    for path in (Path(run_dir) / "checkpoints").glob("model_*_steps.zip"):
        match = re.fullmatch(r"model_(\d+)_steps", path.stem)
        if match:
            found.append((int(match[1]), path))
    if not found:
        raise ValueError(f"no checkpoint model_<steps>_steps.zip under {Path(run_dir) / 'checkpoints'}")
    skipped = []
    for steps, path in sorted(found, reverse=True):
        problem = checkpoint_problem(path, with_stats)
        if problem is None:
            return path, steps
        skipped.append(f"{path.name} ({problem})")
        logger.warning("skipping checkpoint %s: %s", path, problem)
    raise ValueError(f"no intact checkpoint under {Path(run_dir) / 'checkpoints'}: {'; '.join(skipped)}")


def checkpoint_problem(path: Path, with_stats: bool) -> str | None:
    """Why the saved model at ``path`` cannot be loaded (a truncated or corrupt zip, SB3's
    ``data`` or ``policy.pth`` missing, or, ``with_stats``, its VecNormalize statistics
    missing or unreadable), or None when it is intact."""
    try:
        with zipfile.ZipFile(path) as archive:
            missing = sorted(set(SB3_ARCHIVE_MEMBERS) - set(archive.namelist()))
            if missing:
                return f"the archive lacks {missing}"
            corrupt = archive.testzip()
            if corrupt is not None:
                return f"archive member {corrupt} is corrupt"
    except (zipfile.BadZipFile, OSError) as error:
        return f"not a readable zip archive: {error}"
    if with_stats:
        stats = vecnormalize_path(path)
        if not stats.is_file():
            if stats.with_suffix(".pkl").is_file():
                return None  # an older pickle: agents.model_files.load_vecnormalize says whether it may load
            return f"its VecNormalize statistics {stats.name} are missing"
        try:
            with np.load(stats, allow_pickle=False) as stored:
                for key in stored.files:
                    stored[key]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            return f"its VecNormalize statistics {stats.name} are unreadable: {error!r}"
    return None


def config_path_for(model_path: Path) -> Path:
    """The ``config.yml`` of the run a saved model belongs to (beside it, or one folder up for checkpoints)."""
    model_path = Path(model_path)
    if not model_path.is_file():
        raise ValueError(f"no saved model at {model_path}")
    for folder in (model_path.parent, model_path.parent.parent):
        if (folder / "config.yml").is_file():
            return folder / "config.yml"
    raise ValueError(f"no config.yml beside {model_path} or in its parent folder")
