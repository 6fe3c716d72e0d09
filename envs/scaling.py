"""servegym/Scaling-v0: add or remove deployment units of each kind once per scaling window."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv
from envs.observation import COUNT_SCALE, arrived_field, cost_rate_field, count_field, instance_fields_doc
from envs.scenario import ScalingUnit
from envs.schema import (
    IDENTITY,
    Block,
    Entry,
    Field,
    MaskPart,
    linear,
    observation_tables,
    ratio,
    with_observation_tables,
)
from simulator.instance import Lifecycle
from simulator.instance_arrays import LIFECYCLE, LIFECYCLE_CODES, RUNNING, SWAPPED, WAITING
from simulator.routers.units import WeightedUnitRouter

REMOVE, HOLD, ADD = 0, 1, 2
KIND_FEATURES = ("serving", "starting", "draining")
SERVING_CODE, DRAINING_CODE, STOPPED_CODE = (LIFECYCLE_CODES[state] for state in ("serving", "draining", "stopped"))
KIND_FEATURE_OF_CODE = np.array([KIND_FEATURES.index(lifecycle) if lifecycle in KIND_FEATURES else -1
                                 for lifecycle, _ in sorted(LIFECYCLE_CODES.items(), key=lambda item: item[1])])
"""The ``KIND_FEATURES`` column counting a unit of each lifecycle code (-1: stopped, not counted)."""
ACTION_MODES = ("per_kind", "one_unit")


def scaling_context(kinds: int, max_instances: int, episode_requests: int) -> tuple[Entry, ...]:
    """Scaling-v0's context fields (``envs.schema``): the cluster's last window, then per kind
    its units by state."""
    per_kind = tuple(
        Field(f"{state}_units", "units", linear(max_instances), f"units of the kind {state}", integer=True,
              scale_text="N")
        for state in KIND_FEATURES
    )
    return (
        Field("arrivals_per_s", "req/s", ratio(COUNT_SCALE), "arrivals per second over the last window"),
        count_field("waiting", "requests waiting in the cluster"),
        count_field("running", "requests running in the cluster"),
        count_field("swapped", "requests swapped out in the cluster"),
        cost_rate_field(),
        Field("slo_attainment", "fraction", IDENTITY, "SLO attainment of the requests finished in the last window"),
        count_field("finished", "requests finished in the last window"),
        arrived_field(episode_requests),
        Block("kind", kinds, per_kind, count_text="kinds"),
    )


def scaling_mask(kinds: int, action_mode: str) -> tuple[MaskPart, ...]:
    if action_mode == "per_kind":
        return (MaskPart("choice", (kinds, 3), "per kind: remove, hold, add", shape_text="kinds x 3"),)
    return (MaskPart("hold", (1,), "hold (always valid; action='one_unit')"),
            MaskPart("add", (kinds,), "add one unit of the kind", shape_text="kinds"),
            MaskPart("remove", (kinds,), "remove one unit of the kind", shape_text="kinds"))


@dataclass
class DeployedUnit:
    """A unit in the cluster: its kind (index into ``ScalingEnv.units``) and instance ids, entry first."""

    kind: int
    instance_ids: tuple[int, ...]


class ScalingEnv(ServingEnv):
    """Scale the deployment: once per window, add or remove one unit of each kind.

    ## Description
    A step is one scaling window of ``scaling_window_s`` simulated seconds (Cauchy §3.5
    scales on a 2-minute sliding window). The scenario's ``instances`` serve at reset; its
    ``gpu_inventory`` bounds what may be added and ``max_instances`` is the number of instance
    slots. A *unit kind* is one of the scenario's ``scaling_units()``: by default each distinct
    aggregated ``InstanceConfig`` (GPU type, GPU count, model, ...); a scenario of GPU combos
    (Cauchy §3.1) makes each combo, a prefill instance with its decode instances, one unit
    that is added and removed whole. Between steps, arrivals go to the serving unit with the
    fewest outstanding requests (waiting + running + swapped, over its instances) per
    ``routing_weight``, counting the new one (lowest entry id on ties); inside a unit the
    scenario's cluster places them (prefill on the entry, decode by its decode router). The
    clock starts at 0 at reset; the first window runs after the first action.

    ## Action space
    ``action="per_kind"`` (default): ``MultiDiscrete([3] * kinds)``, per kind: 0 = remove one
    (drain the most recently added serving unit of that kind: its instances take no new request
    and stop, freeing their GPUs, once their requests are done), 1 = hold, 2 = add one (GPUs are held and paid from now; an
    instance serves after its weight-load time plus the scenario's ``provisioning_s``).
    ``action_masks()`` is the concatenation of per-kind masks [remove, hold, add]: remove needs
    a serving unit of that kind and at least two serving units overall; add needs free
    inventory GPUs of its types and a free slot per instance; hold is always valid. An action
    is also invalid when its parts together would remove every serving unit or exceed the free
    GPUs or slots: per-kind masks cannot show these joint limits.
    ``action="one_unit"``: ``Discrete(1 + 2 * kinds)``, one change a window: 0 = hold, 1 + k =
    add one unit of kind k, 1 + kinds + k = remove one of kind k, under the same rules; its
    mask (hold, adds, removes) is exact, so a masked policy never acts invalidly.
    An invalid action becomes hold for every kind, costs ``invalid_action_penalty`` and sets
    ``info["invalid_action"]``; ``strict=True`` raises.

    ## Observation space
    ``Dict``: ``instances`` (max_instances x features, ``envs.observation``; an instance keeps
    its slot for life, a stopped instance's slot is reused), ``context`` (the cluster's last
    window, then per kind its serving, starting and draining units) and ``action_mask``; the
    tables at the end (from ``self.schema``) give every entry, its unit and encoding. A unit is
    in its entry instance's state; once its entry has stopped, draining until its last
    instance stops.

    ## Rewards
    ``reward="cost"`` (default: SLO-meeting output tokens against dollars spent, Cauchy
    §3.2's tokens per USD; with ``reference_tokens_per_usd`` R, positive exactly when the
    window beats R tokens per USD; with ``waiting_potential`` c, plus the shaping
    c · (requests waiting before the window − after it), which sums to 0 over an episode),
    ``"slo"`` or ``"latency"``: see ``envs.rewards``, over the
    requests that finished during the window and the dollars spent in it.

    ## Episode end
    Truncated at the end of the window in which the last of the ``episode_requests`` requests
    ended; never terminated. The last step's ``info["episode_metrics"]`` holds the summary,
    ``info["episode_outcomes"]`` every request's outcome.

    ## Arguments
    ``scenario`` (name or ``Scenario``), ``action`` (``"per_kind"`` or ``"one_unit"``),
    ``scaling_window_s`` (seconds; default the scenario's ``control_interval_s``, e.g. 120 s,
    the autoscaler window of Cauchy §3.5, for ``cauchy``), ``reward``,
    ``reference_tokens_per_usd`` and ``waiting_potential`` (``cost`` reward only), ``strict``, ``invalid_action_penalty``,
    ``render_mode`` ("ansi" or "rgb_array", ``envs.frame``), ``backend``
    (``"compiled"``, the default: the compiled simulator core; or ``"python"``, the reference engine), and scenario / workload overrides as keywords (e.g. ``gpu_inventory``,
    ``max_instances``, ``rate_rps``).

    ## Scenarios
    Any with aggregated instances, or one that defines its own ``scaling_units`` (the GPU-combo
    scenarios of ``envs.combo_scenario``); ``default`` deploys its whole
    inventory, so give it a larger ``gpu_inventory`` and ``max_instances`` to allow additions.
    """

    env_id = "servegym/Scaling-v0"

    def __init__(
        self,
        scenario: Any = "default",
        *,
        action: str = "per_kind",
        scaling_window_s: float | None = None,
        reward: str = "cost",
        reference_tokens_per_usd: float | None = None,
        waiting_potential: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if action not in ACTION_MODES:
            raise ValueError(f"unknown action mode {action!r}; known: {list(ACTION_MODES)}")
        self.action_mode = action
        if scaling_window_s is not None and not (scaling_window_s > 0 and math.isfinite(scaling_window_s)):
            raise ValueError(f"scaling_window_s must be positive and finite, got {scaling_window_s!r}")
        reward_kwargs = dict(kwargs.pop("reward_kwargs", None) or {})
        if reference_tokens_per_usd is not None or waiting_potential != 0.0:
            if reward != "cost":
                raise ValueError(f"reference_tokens_per_usd and waiting_potential apply to reward='cost' only, "
                                 f"got reward={reward!r}")
            reward_kwargs.update(reference_tokens_per_usd=reference_tokens_per_usd, waiting_potential=waiting_potential)
        super().__init__(scenario, reward=reward, reward_kwargs=reward_kwargs, **kwargs)
        self.scaling_window_s = float(scaling_window_s or self.scenario.control_interval_s)
        self.units: tuple[ScalingUnit, ...] = self.scenario.scaling_units()
        self.kind_names = tuple(u.name for u in self.units)
        self._unit_gpus = [u.gpu_counts() for u in self.units]
        kinds = len(self.units)
        self.action_space = spaces.MultiDiscrete([3] * kinds) if action == "per_kind" else spaces.Discrete(1 + 2 * kinds)
        self._slots: list[int | None] = []
        self._deployed: list[DeployedUnit] = []
        self._unit_kinds = self._unit_members = self._unit_starts = np.zeros(0, dtype=np.int64)
        empty = np.zeros(0, dtype=np.int64)
        self._unit_cache: tuple[Any, int, np.ndarray, np.ndarray] = (None, -1, empty, empty)
        """The units' lifecycle codes and counts (``_unit_state``), with the cluster and version they are of."""
        self._window_met: tuple[int, int, int] = (-1, -1, 0)
        """The last step's (outcomes then, outcomes finished in the window, of them meeting their SLO)."""
        self._until_s = 0.0
        self._window_first_outcome = 0

    def context_entries(self) -> tuple[Entry, ...]:
        kinds = len(self.scenario.scaling_units())
        return scaling_context(kinds, self.scenario.max_instances, self.scenario.episode_requests)

    def mask_parts(self) -> tuple[MaskPart, ...]:
        return scaling_mask(len(self.scenario.scaling_units()), self.action_mode)

    def cluster_options(self) -> dict[str, Any]:
        return {"router": WeightedUnitRouter(self._unit_weights)}

    def _unit_weights(self) -> list[tuple[tuple[int, ...], float]]:
        """The deployed units' instances and routing weights (``simulator.routers.units``)."""
        return [(unit.instance_ids, self.units[unit.kind].routing_weight) for unit in self._deployed]

    def on_reset(self) -> None:
        assert self.cluster is not None
        self._slots = [None] * self.scenario.max_instances
        self._deployed = [DeployedUnit(kind, ids) for kind, ids in self.scenario.deployed_units(self.cluster)]
        for slot, instance_id in enumerate(self.cluster.instances):
            self._slots[slot] = instance_id
        self._index_units()
        self._until_s = 0.0
        self._window_first_outcome = 0

    def advance(self) -> bool:
        assert self.cluster is not None
        self._window_first_outcome = len(self.cluster.outcomes)
        self.cluster.advance(self._until_s)
        return self.cluster.pending_requests() == 0

    # ----------------------------------------------------------------- state queries
    def unit_lifecycle(self, unit: DeployedUnit) -> Lifecycle:
        """The entry's state; once the entry stopped, draining until every instance stopped."""
        assert self.cluster is not None
        instances = self.cluster.instances
        entry = instances[unit.instance_ids[0]].lifecycle
        if entry != Lifecycle.STOPPED:
            return entry
        if all(instances[i].lifecycle == Lifecycle.STOPPED for i in unit.instance_ids):
            return Lifecycle.STOPPED
        return Lifecycle.DRAINING

    def _index_units(self) -> None:
        """Index the deployed units for the vector queries: their kinds, their instances (flat,
        unit by unit) and where each unit's instances start; after every change of ``_deployed``."""
        self._unit_kinds = np.array([u.kind for u in self._deployed], dtype=np.int64)
        self._unit_members = np.array([i for u in self._deployed for i in u.instance_ids], dtype=np.int64)
        sizes = [len(u.instance_ids) for u in self._deployed]
        self._unit_starts = np.cumsum([0] + sizes[:-1], dtype=np.int64) if sizes else np.zeros(0, dtype=np.int64)
        self._unit_cache = (None, -1, self._unit_cache[2], self._unit_cache[3])

    def unit_lifecycle_codes(self) -> np.ndarray:
        """``unit_lifecycle`` of every deployed unit as its code (``LIFECYCLE_CODES``), read from
        the cluster's instance arrays in a few vector operations (read-only; once per state)."""
        return self._unit_state()[0]

    def _lifecycle_counts(self) -> np.ndarray:
        """(kinds x 3) units serving, starting and draining (read-only; once per state)."""
        return self._unit_state()[1]

    def _unit_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The units' lifecycle codes and their counts per kind, worked out again when the
        cluster's state (``version``) or the deployed units changed."""
        assert self.cluster is not None and self.cluster.arrays is not None
        cluster, version, codes, counts = self._unit_cache
        if cluster is self.cluster and version == self.cluster.version:
            return codes, counts
        kinds = len(self.units)
        if self._deployed:
            member_codes = self.cluster.arrays.table[self._unit_members, LIFECYCLE]
            entry_codes = member_codes[self._unit_starts]
            all_stopped = np.logical_and.reduceat(member_codes == STOPPED_CODE, self._unit_starts)
            codes = np.where(entry_codes != STOPPED_CODE, entry_codes,
                             np.where(all_stopped, STOPPED_CODE, DRAINING_CODE))
        else:
            codes = np.zeros(0, dtype=np.int64)
        columns = KIND_FEATURE_OF_CODE[codes]
        counted = columns >= 0
        counts = np.bincount(self._unit_kinds[counted] * len(KIND_FEATURES) + columns[counted],
                             minlength=kinds * len(KIND_FEATURES)).reshape(kinds, len(KIND_FEATURES))
        codes.flags.writeable = counts.flags.writeable = False
        self._unit_cache = (self.cluster, self.cluster.version, codes, counts)
        return codes, counts

    def _free_slots(self) -> list[int]:
        assert self.cluster is not None and self.cluster.arrays is not None
        codes = self.cluster.arrays.table[:, LIFECYCLE].tolist()  # by instance id
        return [s for s, i in enumerate(self._slots) if i is None or codes[i] == STOPPED_CODE]

    def _free_gpus(self) -> dict[str, int]:
        assert self.cluster is not None
        return {gpu: n - self.cluster.gpus_in_use.get(gpu, 0) for gpu, n in self.cluster.gpu_inventory.items()}

    def _serving_total(self) -> int:
        return int(self._lifecycle_counts()[:, 0].sum())

    def _fits(self, kinds: list[int], free_slots: int, free_gpus: dict[str, int]) -> bool:
        """Whether adding one unit of each of ``kinds`` fits the free slots and GPUs."""
        if sum(len(self.units[k].configs) for k in kinds) > free_slots:
            return False
        wanted: dict[str, int] = {}
        for kind in kinds:
            for gpu, n in self._unit_gpus[kind].items():
                wanted[gpu] = wanted.get(gpu, 0) + n
        return all(n <= free_gpus.get(gpu, 0) for gpu, n in wanted.items())

    # ----------------------------------------------------------------- actions
    def compute_action_mask(self) -> np.ndarray:
        mask = np.zeros((len(self.units), 3), dtype=bool)
        mask[:, HOLD] = True
        serving = self._lifecycle_counts()[:, 0]
        free_slots, free_gpus = len(self._free_slots()), self._free_gpus()
        for kind in range(len(self.units)):
            mask[kind, REMOVE] = serving.sum() >= 2 and serving[kind] > 0
            mask[kind, ADD] = self._fits([kind], free_slots, free_gpus)
        if self.action_mode == "one_unit":
            return np.concatenate(([True], mask[:, ADD], mask[:, REMOVE]))
        return mask.reshape(-1)

    def per_kind_choices(self, action: Any) -> list[int]:
        """The action as one choice (remove / hold / add) per kind, in either action mode."""
        if self.action_mode == "per_kind":
            return [int(a) for a in action]
        kinds, index = len(self.units), int(action)
        choices = [HOLD] * kinds
        if 1 <= index <= kinds:
            choices[index - 1] = ADD
        elif index > kinds:
            choices[index - 1 - kinds] = REMOVE
        return choices

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        if self.action_mode == "one_unit":
            return bool(mask[int(action)])
        choices = self.per_kind_choices(action)
        per_kind = mask.reshape(len(self.units), 3)
        if not all(per_kind[kind, choice] for kind, choice in enumerate(choices)):
            return False
        if self._serving_total() - choices.count(REMOVE) < 1:
            return False
        adds = [kind for kind, choice in enumerate(choices) if choice == ADD]
        return self._fits(adds, len(self._free_slots()), self._free_gpus())

    def hold_action(self) -> Any:
        """The action that changes nothing, in this env's action mode."""
        return np.full(len(self.units), HOLD, dtype=np.int64) if self.action_mode == "per_kind" else 0

    def fallback_action(self) -> Any:
        return self.hold_action()

    def apply(self, action: Any, valid: bool) -> None:
        assert self.cluster is not None
        codes = self.unit_lifecycle_codes()  # units added below start up; a removal drains one kind's units only
        added = False
        for kind, choice in enumerate(self.per_kind_choices(action)):
            if choice == REMOVE:
                unit = self._deployed[np.flatnonzero((self._unit_kinds == kind) & (codes == SERVING_CODE))[-1]]
                for instance_id in unit.instance_ids:
                    if self.cluster.instances[instance_id].lifecycle in (Lifecycle.SERVING, Lifecycle.STARTING):
                        self.cluster.drain(instance_id)
            elif choice == ADD:
                instance_ids = self.scenario.deploy_unit(self.cluster, kind)
                for instance_id, slot in zip(instance_ids, self._free_slots()):
                    self._slots[slot] = instance_id
                self._deployed.append(DeployedUnit(kind, instance_ids))
                added = True
        if added:
            self._index_units()
        stopped = self.unit_lifecycle_codes() == STOPPED_CODE
        if stopped.any():
            self._deployed = [u for u, gone in zip(self._deployed, stopped.tolist()) if not gone]
            self._index_units()
        self._until_s = self.cluster.events.now_s + self.scaling_window_s

    # ----------------------------------------------------------------- observation
    def step_info(self, finished: list | None = None) -> dict[str, Any]:
        info = super().step_info(finished)
        assert self.cluster is not None
        self._window_met = (len(self.cluster.outcomes), info["finished"], info["slo_met"])
        return info

    def slot_instance_ids(self) -> list[int | None]:
        """Rows follow this env's slots: an instance keeps its slot for life; a stopped
        instance's slot is reused by the next one added."""
        return list(self._slots)

    def context(self) -> np.ndarray:
        assert self.cluster is not None and self.cluster.arrays is not None
        cluster = self.cluster
        finished = cluster.outcomes[self._window_first_outcome:]
        if self._window_met[:2] == (len(cluster.outcomes), len(finished)):  # the window step_info counted
            met = self._window_met[2]
        else:
            met = sum(o.completed and self.reward_fn.met(o) for o in finished)
        queues = cluster.arrays.table[:len(cluster.instances), WAITING:SWAPPED + 1].sum(axis=0)
        units = self._lifecycle_counts()
        return self.schema.encode_context({
            "arrivals_per_s": self.recent_qps(self.scaling_window_s),
            "waiting": queues[WAITING],
            "running": queues[RUNNING],
            "swapped": queues[SWAPPED],
            "cost_rate": cluster.cost_rate_usd_per_s() * 3600.0,
            "slo_attainment": met / len(finished) if finished else 0.0,
            "finished": len(finished),
            "arrived": cluster.arrived,
            "serving_units": units[:, 0],
            "starting_units": units[:, 1],
            "draining_units": units[:, 2],
        })


ScalingEnv.__doc__ = with_observation_tables(
    ScalingEnv.__doc__,
    observation_tables(instance_fields_doc(), scaling_context(1, 1, 1), scaling_mask(1, "per_kind") + scaling_mask(1, "one_unit")),
)
