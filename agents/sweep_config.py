"""A sweep's configuration (``python -m agents.sweep CONFIG.yml``), read strictly and checked in
full before any trial starts: every bad entry raises an error that names it.

    name: smoke                         # default: the file's stem
    scenarios:                          # one entry per (scenario, env)
      - recipe: cauchy                  # an agents/recipes/ file's settings; the entry's own keys win
      - scenario: default
        env_id: servegym/Routing-v0
        env_kwargs: {episode_requests: 60}
        agent_env_kwargs: {}            # the agent's own action interface (e.g. action: one_unit)
        heuristics: [least_outstanding] # default: every registered policy that applies
        metric: slo_attainment          # default: the scenario's headline (agents.headline)
        constraint: {metric: quality_mean, min: 80}   # a target the policy's mean must meet (default: the headline's)
        timesteps: 2000                 # overrides the top level's, as n_envs and algorithms do
        hyperparams: {}                 # constants, merged over the top level's
    algorithms: [maskable_ppo, ppo]
    rewards: [slo_balance]              # default: the scenario's env_kwargs reward (or the env's own)
    timesteps: 2000
    n_envs: 1
    train_seeds: [0, 1, 2]
    eval_seeds: [10000, 10001, 10002]
    hyperparams:                        # agents.train --set keys; dotted keys reach into dicts
      n_steps: 64                       # a constant
      learning_rate: {grid: [1.0e-4, 3.0e-4]}
      gamma: {uniform: [0.9, 0.999]}    # also loguniform, randint [low, high), choice [...]
    search: grid                        # grid | random | optuna
    samples: 1                          # random / optuna: hyper-parameter draws per cell
    search_seed: 0
    scheduler: fifo                     # fifo | asha (early stopping on periodic evaluations)
    asha: {reports: 4, grace_period: 1, reduction_factor: 2}
    cpus_per_trial: 1

A *cell* is one (scenario entry, algorithm, reward); a *trial* trains one cell's agent with one
hyper-parameter assignment on one training seed, then evaluates it and the cell's heuristics
on the evaluation seeds. ``grid`` crosses every ``grid`` entry; ``random`` draws ``samples``
assignments of the distributions (crossed with the grids); ``optuna`` asks Optuna's TPE for
``samples`` assignments per cell, each trained on every training seed (Tune's ``Repeater``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

import baselines
import envs
from agents.config import TrainConfig, as_int, build_config, check_action_space, deep_merge, get_algorithm, load_yaml
from agents.dashboard import episode_metric_names
from agents.headline import RECIPES_DIR, base_metric, recipe_headline, scenario_headline
from agents.train import make_env, native_covers
from envs.rewards import REWARDS

SEARCHES = ("grid", "random", "optuna")
SCHEDULERS = ("fifo", "asha")
DISTRIBUTIONS = ("grid", "choice", "uniform", "loguniform", "randint")
KEYS = frozenset({
    "name", "scenarios", "algorithms", "rewards", "timesteps", "n_envs", "train_seeds", "eval_seeds", "hyperparams",
    "search", "samples", "search_seed", "scheduler", "asha", "cpus_per_trial",
})
SCENARIO_KEYS = frozenset({"recipe", "scenario", "env_id", "env_kwargs", "agent_env_kwargs", "heuristics", "metric",
                           "constraint", "timesteps", "n_envs", "algorithms", "hyperparams"})
# What a scenario entry's ``recipe`` (agents/recipes/<name>.yml) gives it, besides its algorithm and headline metric.
RECIPE_KEYS = ("scenario", "env_id", "env_kwargs", "agent_env_kwargs", "timesteps", "n_envs", "hyperparams")
ASHA_KEYS = frozenset({"reports", "grace_period", "reduction_factor"})


@dataclass(frozen=True)
class Cell:
    """One (scenario entry, algorithm, reward) of a sweep: what its trials train and compare."""

    index: int
    scenario: str
    env_id: str
    algo: str
    reward: str | None
    metric: str
    heuristics: tuple[str, ...]
    timesteps: int
    n_envs: int
    constraint: tuple[str, float] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    agent_env_kwargs: dict[str, Any] = field(default_factory=dict)
    hyperparams: dict[str, Any] = field(default_factory=dict)

    @property
    def board(self) -> str:
        """The leaderboard section the cell belongs to: its scenario and env."""
        return f"{self.scenario} ({self.env_id})"

    @property
    def plain_env(self) -> dict[str, Any]:
        """The heuristics' env arguments: the scenario's, with the cell's reward."""
        return {**self.env_kwargs, **({"reward": self.reward} if self.reward is not None else {})}

    @property
    def agent_env(self) -> dict[str, Any]:
        """The agent's env arguments: the heuristics' and its own action interface."""
        return {**self.plain_env, **self.agent_env_kwargs}

    def label(self) -> str:
        """``scenario/env/algo[/reward]``: how errors and Tune name the cell."""
        return f"{self.scenario}/{self.env_id.split('/')[-1]}/{self.algo}" + (f"/{self.reward}" if self.reward else "")


@dataclass(frozen=True)
class SweepConfig:
    """A checked sweep configuration (see the module docstring)."""

    name: str
    cells: tuple[Cell, ...]
    train_seeds: tuple[int, ...]
    eval_seeds: tuple[int, ...]
    search: str = "grid"
    samples: int = 1
    search_seed: int = 0
    scheduler: str = "fifo"
    asha: dict[str, int] = field(default_factory=dict)
    cpus_per_trial: int = 1
    space: dict[str, dict[str, Any]] = field(default_factory=dict)

    def assignments(self) -> list[dict[str, Any]]:
        """The hyper-parameter assignments of a grid or random search: every combination of the
        ``grid`` entries, each with ``samples`` draws of the distributions for ``random`` (NumPy,
        seeded by ``search_seed``, so a sweep's trials are the same every time it is started)."""
        grids = {key: entry["grid"] for key, entry in self.space.items() if "grid" in entry}
        combos = [dict(zip(grids, values)) for values in itertools.product(*grids.values())]
        drawn = {key: entry for key, entry in self.space.items() if "grid" not in entry}
        if not drawn:
            return combos
        rng = np.random.default_rng(self.search_seed)
        return [{**combo, **{key: _draw(rng, entry) for key, entry in drawn.items()}}
                for combo in combos for _ in range(self.samples)]

    @property
    def per_cell(self) -> bool:
        """Whether each cell is its own Tune experiment: a search that adapts (Optuna) or stops
        trials early (ASHA) must compare a cell's trials only with one another."""
        return self.search == "optuna" or self.scheduler == "asha"

    def train_config(self, cell: Cell, seed: int, assignment: Mapping[str, Any]) -> TrainConfig:
        """``agents.train``'s configuration of one trial: the algorithm's hyper-parameter file
        for the env, then the cell's constants and ``assignment`` as ``--set`` overrides. Its envs
        step in the trial's process (unless the cell names a ``vec_env``): in the native vector env
        where it covers the cell, else in a ``DummyVecEnv``."""
        overrides = [f"{k}={_json(v)}" for k, v in {**constants(cell.hyperparams), **assignment}.items()]
        overrides += [f"env_kwargs.{k}={_json(v)}" for k, v in cell.agent_env.items()]
        overrides += [] if "vec_env" in cell.hyperparams else ["vec_env=dummy"]
        train_config = build_config(cell.env_id, cell.scenario, cell.algo, seed, n_timesteps=cell.timesteps,
                                    n_envs=cell.n_envs, device="cpu", overrides=overrides, torch_threads=1)
        if "vec_env" not in cell.hyperparams and native_covers(train_config):
            train_config = replace(train_config, vec_env="native")
        return train_config


def _draw(rng: np.random.Generator, entry: Mapping[str, Any]) -> Any:
    """One value of a distribution entry."""
    kind, values = next(iter(entry.items()))
    if kind == "choice":
        return values[int(rng.integers(len(values)))]
    if kind == "randint":
        return int(rng.integers(values[0], values[1]))
    if kind == "loguniform":
        return float(math.exp(rng.uniform(math.log(values[0]), math.log(values[1]))))
    return float(rng.uniform(values[0], values[1]))


def is_searched(value: Any) -> bool:
    """Whether a hyper-parameter entry is a grid or distribution: one key, a ``DISTRIBUTIONS`` kind."""
    return isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in DISTRIBUTIONS


def constants(space: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a hyper-parameter space that are values (``policy_kwargs: {...}`` included)."""
    return {k: v for k, v in space.items() if not is_searched(v)}


def searched(space: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries of a hyper-parameter space that are grids or distributions (``{kind: values}``)."""
    return {k: v for k, v in space.items() if is_searched(v)}


def probe_assignments(space: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Assignments that between them give every searched entry each of its listed values (a
    range: both ends), the others at their first: what the configuration check builds."""
    values = {key: list(next(iter(entry.values()))) for key, entry in searched(space).items()}
    first = {key: options[0] for key, options in values.items()}
    return [first] + [{**first, key: option} for key, options in values.items() for option in options[1:]]


def load_sweep_config(path: Path) -> SweepConfig:
    """Read and check ``path`` (see the module docstring); raises naming the first bad entry."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no sweep config at {path}")
    return check_sweep_config(load_yaml(path), default_name=path.stem, where=str(path))


def check_sweep_config(data: Any, default_name: str = "sweep", where: str = "sweep config") -> SweepConfig:
    """A ``SweepConfig`` from a parsed YAML mapping; every scenario, env, algorithm, reward,
    heuristic, metric, seed and hyper-parameter is checked by building what a trial builds."""
    _check_keys(where, data, KEYS)
    search = _one_of(f"{where}: search", data.get("search", "grid"), SEARCHES)
    scheduler = _one_of(f"{where}: scheduler", data.get("scheduler", "fifo"), SCHEDULERS)
    samples = as_int(f"{where}: samples", data.get("samples", 1), minimum=1)
    if search == "grid" and "samples" in data and samples != 1:
        raise ValueError(f"{where}: samples {samples} needs search random or optuna (a grid is run once)")
    train_seeds = _seeds(f"{where}: train_seeds", data.get("train_seeds"))
    eval_seeds = _seeds(f"{where}: eval_seeds", data.get("eval_seeds"))
    asha = _asha(f"{where}: asha", data.get("asha") or {}, scheduler)
    if search == "optuna" and scheduler == "asha" and len(train_seeds) > 1:
        raise ValueError(f"{where}: scheduler asha with search optuna needs one training seed, got {list(train_seeds)} "
                         "(Tune's Repeater averages a configuration's seeds only when every one finishes)")
    algorithms = _algorithms(f"{where}: algorithms", data["algorithms"]) if "algorithms" in data else None
    n_envs = as_int(f"{where}: n_envs", data.get("n_envs", 1), minimum=1)
    rewards = _names(f"{where}: rewards", data["rewards"]) if "rewards" in data else None
    for reward in rewards or ():
        if reward not in REWARDS:
            raise ValueError(f"{where}: rewards: unknown reward {reward!r}; known: {sorted(REWARDS)}")
    top_space = _space(f"{where}: hyperparams", data.get("hyperparams") or {}, search)
    if search != "grid" and not any("grid" not in entry for entry in searched(top_space).values()):
        raise ValueError(f"{where}: hyperparams: search {search} needs at least one distribution to draw "
                         f"({[d for d in DISTRIBUTIONS if d != 'grid']})")
    timesteps = data.get("timesteps")
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list) or not scenarios:
        raise ValueError(f"{where}: scenarios must be a non-empty list, got {scenarios!r}")
    cells: list[Cell] = []
    for position, entry in enumerate(scenarios):
        at = f"{where}: scenarios[{position}]"
        _check_keys(at, entry, SCENARIO_KEYS)
        entry = _with_recipe(at, entry)
        if "algorithms" not in entry and algorithms is None:
            raise ValueError(f"{at}: no algorithms: set them at the top level, in the entry or by its recipe")
        entry_algorithms = _algorithms(f"{at}.algorithms", entry["algorithms"]) if "algorithms" in entry else algorithms
        entry_envs = as_int(f"{at}.n_envs", entry.get("n_envs", n_envs), minimum=1)
        own = _space(f"{at}.hyperparams", entry.get("hyperparams") or {}, search)
        if searched(own):
            raise ValueError(f"{at}.hyperparams: {sorted(searched(own))} are searched; a scenario entry sets constants "
                             "only, the search space is the top level's")
        space = {**top_space, **own}
        env_kwargs = _mapping(f"{at}.env_kwargs", entry.get("env_kwargs") or {})
        scenario, env_id = _scenario(at, entry)
        steps = as_int(f"{at}.timesteps", entry.get("timesteps", timesteps), minimum=1)
        try:
            plain = make_env(env_id, scenario, env_kwargs, flat=False)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{at}.env_kwargs: {error}") from None
        try:
            metric, constraint = _headline(at, entry, scenario, env_id)
            _check_metric(f"{at}.metric", metric, plain.unwrapped.scenario.num_tiers)
            if constraint is not None:
                _check_metric(f"{at}.constraint", constraint[0], plain.unwrapped.scenario.num_tiers)
            heuristics = _heuristics(at, entry.get("heuristics"), env_id, plain)
        finally:
            plain.close()
        for reward in rewards or [env_kwargs.get("reward")]:
            kwargs = {k: v for k, v in env_kwargs.items() if k != "reward"}
            for algo in entry_algorithms:
                cell = Cell(len(cells), scenario, env_id, algo, reward, metric, heuristics, steps, entry_envs, constraint,
                            kwargs, _mapping(f"{at}.agent_env_kwargs", entry.get("agent_env_kwargs") or {}), space)
                cells.append(cell)
    config = SweepConfig(str(data.get("name") or default_name), tuple(cells), train_seeds, eval_seeds, search, samples,
                         as_int(f"{where}: search_seed", data.get("search_seed", 0)), scheduler, asha,
                         as_int(f"{where}: cpus_per_trial", data.get("cpus_per_trial", 1), minimum=1), searched(top_space))
    for cell in config.cells:
        _check_cell(where, config, cell)
    return config


def select_scenarios(config: SweepConfig, scenarios: Sequence[str]) -> SweepConfig:
    """``config`` with only the cells of ``scenarios`` (renumbered in order): one section of a
    board run again. A name no cell has raises, naming it and the scenarios the sweep holds."""
    present = list(dict.fromkeys(cell.scenario for cell in config.cells))
    missing = [name for name in scenarios if name not in present]
    if missing or not scenarios:
        raise ValueError(f"--scenarios: {missing or list(scenarios)} not in sweep {config.name!r}; it holds {present}")
    kept = [cell for cell in config.cells if cell.scenario in scenarios]
    return replace(config, cells=tuple(replace(cell, index=index) for index, cell in enumerate(kept)))


def _check_cell(where: str, config: SweepConfig, cell: Cell) -> None:
    """Build the cell's training configuration (with every listed value of the search space) and
    envs as a trial does."""
    at = f"{where}: cell {cell.label()}"
    try:
        for assignment in probe_assignments(cell.hyperparams):
            train_config = config.train_config(cell, config.train_seeds[0], assignment)
        probe = make_env(cell.env_id, cell.scenario, cell.agent_env, flat=False)
        try:
            check_action_space(cell.algo, probe.action_space)
        finally:
            probe.close()
        make_env(cell.env_id, cell.scenario, cell.plain_env, flat=False).close()
    except (ValueError, TypeError) as error:
        raise ValueError(f"{at}: {error}") from None
    if train_config.n_envs > config.cpus_per_trial and train_config.vec_env not in ("dummy", "native"):
        raise ValueError(f"{at}: n_envs {train_config.n_envs} subprocess envs need cpus_per_trial >= "
                         f"{train_config.n_envs}, got {config.cpus_per_trial}")


def _with_recipe(at: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry over its ``recipe``'s settings (``agents/recipes/<recipe>.yml``): scenario, env,
    env arguments (reward included), the agent's action interface, algorithm, steps, parallel
    envs, hyper-parameters and headline metric (the entry's mappings merged key by key into the
    recipe's); without ``recipe``, the entry as it is."""
    if "recipe" not in entry:
        return dict(entry)
    path = RECIPES_DIR / f"{entry['recipe']}.yml"
    if not path.is_file():
        known = sorted(p.stem for p in RECIPES_DIR.glob("*.yml"))
        raise ValueError(f"{at}.recipe: unknown recipe {entry['recipe']!r}; known: {known}")
    recipe = load_yaml(path)
    settings = {key: recipe[key] for key in RECIPE_KEYS if key in recipe}
    metric, constraint = recipe_headline(recipe)
    settings.update({"algorithms": [recipe["algo"]], "metric": metric})
    if constraint is not None:
        settings["constraint"] = {"metric": constraint[0], "min": constraint[1]}
    return deep_merge(settings, {k: v for k, v in entry.items() if k != "recipe"})


def _headline(at: str, entry: Mapping[str, Any], scenario: str, env_id: str) -> tuple[str, tuple[str, float] | None]:
    """The entry's ``metric`` and ``constraint`` (``{metric, min}``: a target the metric's mean
    must meet), each defaulting to the scenario's (``agents.headline.scenario_headline``); a
    constraint belongs to its headline, so an entry naming another metric has none by default."""
    default_metric, default_constraint = scenario_headline(scenario, env_id)
    metric = str(entry.get("metric") or default_metric)
    if "constraint" not in entry:
        return metric, default_constraint if metric == default_metric else None
    constraint = _mapping(f"{at}.constraint", entry["constraint"])
    if set(constraint) != {"metric", "min"}:
        raise ValueError(f"{at}.constraint must have exactly the keys ['metric', 'min'], got {constraint!r}")
    minimum = constraint["min"]
    if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or not math.isfinite(minimum):
        raise ValueError(f"{at}.constraint.min must be a finite number, got {minimum!r}")
    return metric, (str(constraint["metric"]), float(minimum))


def _algorithms(at: str, names: Any) -> list[str]:
    for algo in _names(at, names):
        try:
            get_algorithm(algo)
        except ValueError as error:
            raise ValueError(f"{at}: {error}") from None
    return names


def _scenario(at: str, entry: Mapping[str, Any]) -> tuple[str, str]:
    scenario, env_id = entry.get("scenario"), entry.get("env_id")
    if scenario not in envs.scenario_names():
        raise ValueError(f"{at}.scenario: unknown scenario {scenario!r}; known: {envs.scenario_names()}")
    if env_id not in envs.ENV_IDS:
        raise ValueError(f"{at}.env_id: unknown env {env_id!r}; known: {sorted(envs.ENV_IDS)}")
    return str(scenario), str(env_id)


def _heuristics(at: str, names: Any, env_id: str, env: Any) -> tuple[str, ...]:
    """The named heuristics (each must build for the env), or every registered one that does."""
    if names is None:
        usable = []
        for name in baselines.policy_names(env_id):
            try:
                baselines.make(name, env)
            except ValueError:
                continue
            usable.append(name)
        return tuple(usable)
    for name in _names(f"{at}.heuristics", names):
        try:
            baselines.make(name, env)
        except ValueError as error:
            raise ValueError(f"{at}.heuristics: {name!r} does not apply: {error}") from None
    return tuple(names)


def _check_metric(at: str, metric: str, num_tiers: int) -> None:
    known = episode_metric_names(num_tiers)
    if base_metric(metric) not in known:
        raise ValueError(f"{at}: unknown metric {metric!r}; known: {known} or tier<k>.<one of them>")


def _space(at: str, space: Any, search: str) -> dict[str, Any]:
    """A hyper-parameter space: constants and single-key ``{kind: values}`` entries, checked."""
    space = _mapping(at, space)
    for key, value in space.items():
        if key.split(".")[0] in ("env_kwargs", "n_timesteps", "n_envs"):
            raise ValueError(f"{at}.{key}: set {key.split('.')[0]} in the scenario entry or at the top level, "
                             "not as a hyper-parameter")
        if is_searched(value):
            _distribution(f"{at}.{key}", value, search)
    return dict(space)


def _distribution(at: str, value: Mapping[str, Any], search: str) -> None:
    kind, values = next(iter(value.items()))
    if not isinstance(values, list) or not values:
        raise ValueError(f"{at}: empty {kind} {values!r}: give at least one value")
    if search == "grid" and kind != "grid":
        raise ValueError(f"{at}: {kind} needs search random or optuna; search grid takes only grid entries")
    if search == "optuna" and kind == "grid":
        raise ValueError(f"{at}: search optuna takes no grid; use choice")
    if kind in ("uniform", "loguniform", "randint"):
        if len(values) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                        for v in values) or not values[0] < values[1]:
            raise ValueError(f"{at}: {kind} takes [low, high] with low < high, got {values!r}")
        if kind == "loguniform" and values[0] <= 0:
            raise ValueError(f"{at}: loguniform needs low > 0, got {values!r}")
        if kind == "randint" and not all(isinstance(v, int) for v in values):
            raise ValueError(f"{at}: randint takes integers, got {values!r}")


def _asha(at: str, options: Any, scheduler: str) -> dict[str, int]:
    options = _mapping(at, options)
    _check_keys(at, options, ASHA_KEYS)
    if options and scheduler != "asha":
        raise ValueError(f"{at}: options given but scheduler is {scheduler!r}")
    checked = {"reports": as_int(f"{at}.reports", options.get("reports", 4), minimum=2),
               "grace_period": as_int(f"{at}.grace_period", options.get("grace_period", 1), minimum=1),
               "reduction_factor": as_int(f"{at}.reduction_factor", options.get("reduction_factor", 2), minimum=2)}
    if checked["grace_period"] > checked["reports"]:
        raise ValueError(f"{at}.grace_period {checked['grace_period']} exceeds reports {checked['reports']}")
    return checked if scheduler == "asha" else {}


def _seeds(at: str, seeds: Any) -> tuple[int, ...]:
    if not isinstance(seeds, list) or not seeds:
        raise ValueError(f"{at} must be a non-empty list of seeds, got {seeds!r}")
    checked = tuple(as_int(f"{at} seed", seed, minimum=0) for seed in seeds)
    if len(set(checked)) != len(checked):
        raise ValueError(f"{at} must be distinct, got {list(checked)}")
    return checked


def _names(at: str, names: Any) -> list[str]:
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{at} must be a non-empty list of names, got {names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{at} must be distinct, got {names!r}")
    return names


def _one_of(at: str, value: Any, known: Sequence[str]) -> str:
    if value not in known:
        raise ValueError(f"{at}: unknown {value!r}; known: {list(known)}")
    return str(value)


def _mapping(at: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{at} must be a mapping, got {value!r}")
    return dict(value)


def _check_keys(at: str, data: Any, known: frozenset[str]) -> None:
    if not isinstance(data, Mapping):
        raise ValueError(f"{at} must be a mapping, got {data!r}")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{at}: unknown key(s) {unknown}; known: {sorted(known)}")


def _json(value: Any) -> str:
    """A value as ``--set`` parses it back (JSON, which YAML reads)."""
    return json.dumps(value)
