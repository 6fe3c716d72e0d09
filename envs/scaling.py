"""servegym/Scaling-v0: add or remove instances of each kind once per scaling window."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv
from envs.observation import COUNT_SCALE, squash
from envs.scenario import Scenario
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig, Lifecycle, Role
from simulator.sequence import Sequence

REMOVE, HOLD, ADD = 0, 1, 2
KIND_FEATURES = ("serving", "starting", "draining")


def instance_kinds(scenario: Scenario) -> tuple[InstanceConfig, ...]:
    """The distinct ``InstanceConfig`` of the scenario's instance groups, in group order."""
    kinds: list[InstanceConfig] = []
    for group in scenario.instances:
        if group.config not in kinds:
            kinds.append(group.config)
    return tuple(kinds)


def least_outstanding_router(cluster: Cluster, seq: Sequence) -> int:
    """The serving instance with the fewest requests (waiting + running + swapped); lowest id on ties."""
    best_id, best_load = -1, 0
    for instance_id in cluster.routable_ids():
        load = cluster.instances[instance_id].num_requests
        if best_id < 0 or load < best_load:
            best_id, best_load = instance_id, load
    if best_id < 0:
        raise RuntimeError(f"no serving instance can take request {seq.request_id}")
    return best_id


class ScalingEnv(ServingEnv):
    """Scale the deployment: once per window, add or remove one instance of each kind.

    ## Description
    A step is one scaling window of ``scaling_window_s`` simulated seconds (cauchy.txt §3.5
    scales on a 2-minute sliding window). The scenario's ``instances`` serve at reset; its
    ``gpu_inventory`` bounds what may be added and ``max_instances`` is the number of instance
    slots. An *instance kind* is each distinct ``InstanceConfig`` of the scenario (GPU type,
    GPU count, model, ...). Between steps, arrivals go to the serving instance with the fewest
    outstanding requests (lowest id on ties). The clock starts at 0 at reset; the first window
    runs after the first action.

    ## Action space
    ``MultiDiscrete([3] * kinds)``, per kind: 0 = remove one (drain the most recently added
    serving instance of that kind: it takes no new request and stops, freeing its GPUs, once
    its requests are done), 1 = hold, 2 = add one (GPUs are held and paid from now; it serves
    after its weight-load time plus the scenario's ``provisioning_s``).
    ``action_masks()`` is the concatenation of per-kind masks [remove, hold, add]: remove needs
    a serving instance of that kind and at least two serving instances overall; add needs
    free inventory GPUs of its type and a free slot; hold is always valid. An action is also
    invalid when its parts together would remove every serving instance or exceed the free
    GPUs or slots. An invalid action becomes hold for every kind, costs
    ``invalid_action_penalty`` and sets ``info["invalid_action"]``; ``strict=True`` raises.

    ## Observation space
    ``Dict``: ``instances`` (max_instances x features, ``envs.observation``; an instance keeps
    its slot for life, a stopped instance's slot is reused), ``action_mask`` and ``context`` =
    [arrivals per second over the last window (squashed by 16), waiting, running and swapped
    requests in the cluster (each squashed by 16), cluster $ per hour (squashed by 100), SLO
    attainment of the requests finished in the last window (0 when none), their count
    (squashed by 16), episode progress (arrived / episode_requests)] + per kind [serving,
    starting, draining instances, each / max_instances].

    ## Rewards
    ``reward="cost"`` (default: SLO-meeting output tokens against dollars spent, cauchy.txt
    §3.2's tokens per USD), ``"slo"`` or ``"latency"``: see ``envs.rewards``, over the requests
    that finished during the window and the dollars spent in it.

    ## Episode end
    Truncated at the end of the window in which the last of the ``episode_requests`` requests
    ended; never terminated. The last step's ``info["episode_metrics"]`` holds the summary.

    ## Arguments
    ``scenario`` (name or ``Scenario``), ``scaling_window_s`` (seconds; default the scenario's
    ``control_interval_s``, e.g. 120 s, the autoscaler window of cauchy.txt §3.5, for ``cauchy``),
    ``reward``, ``strict``, ``invalid_action_penalty``, ``render_mode="ansi"``, and scenario /
    workload overrides as keywords (e.g. ``gpu_inventory``, ``max_instances``, ``rate_rps``).

    ## Scenarios
    Any with aggregated instances; ``default`` deploys its whole inventory, so give it a larger
    ``gpu_inventory`` and ``max_instances`` to allow additions.
    """

    env_id = "servegym/Scaling-v0"

    def __init__(
        self, scenario: Any = "default", *, scaling_window_s: float | None = None, reward: str = "cost", **kwargs: Any
    ) -> None:
        if scaling_window_s is not None and not (scaling_window_s > 0 and math.isfinite(scaling_window_s)):
            raise ValueError(f"scaling_window_s must be positive and finite, got {scaling_window_s!r}")
        super().__init__(scenario, reward=reward, **kwargs)
        self.scaling_window_s = float(scaling_window_s or self.scenario.control_interval_s)
        self.kinds = instance_kinds(self.scenario)
        for config in self.kinds:
            if config.role != Role.AGGREGATED:
                raise ValueError(
                    f"Scaling-v0 scales aggregated instances only; {config.model} on {config.gpu} has role {config.role!r}"
                )
        self.kind_names = tuple(f"{c.model}@{c.num_gpus}x{c.gpu}" for c in self.kinds)
        self.action_space = spaces.MultiDiscrete([3] * len(self.kinds))
        self._slots: list[int | None] = []
        self._kind_of: dict[int, int] = {}
        self._until_s = 0.0
        self._window_first_outcome = 0

    def context_size(self) -> int:
        return 8 + len(KIND_FEATURES) * len(instance_kinds(self.scenario))

    def mask_size(self) -> int:
        return 3 * len(instance_kinds(self.scenario))

    def cluster_options(self) -> dict[str, Any]:
        return {"router": least_outstanding_router}

    def on_reset(self) -> None:
        assert self.cluster is not None
        # InstanceFeatures caches hardware columns by id(instance); the last episode's instances
        # are gone and a new one may reuse an id, so each episode starts with an empty cache.
        self._slots = [None] * self.scenario.max_instances
        self._kind_of = {}
        for slot, instance in enumerate(self.cluster.instances.values()):
            self._slots[slot] = instance.instance_id
            self._kind_of[instance.instance_id] = self.kinds.index(instance.config)
        self._until_s = 0.0
        self._window_first_outcome = 0

    def advance(self) -> bool:
        assert self.cluster is not None
        self._window_first_outcome = len(self.cluster.outcomes)
        self.cluster.advance(self._until_s)
        return self.cluster.pending_requests() == 0

    # ----------------------------------------------------------------- state queries
    def _ids_in(self, kind: int, lifecycle: Lifecycle) -> list[int]:
        assert self.cluster is not None
        instances = self.cluster.instances
        return [i for i, k in self._kind_of.items() if k == kind and instances[i].lifecycle == lifecycle]

    def _free_slots(self) -> list[int]:
        assert self.cluster is not None
        instances = self.cluster.instances
        return [s for s, i in enumerate(self._slots) if i is None or instances[i].lifecycle == Lifecycle.STOPPED]

    def _free_gpus(self, gpu: str) -> int:
        assert self.cluster is not None
        return self.cluster.gpu_inventory.get(gpu, 0) - self.cluster.gpus_in_use.get(gpu, 0)

    def _serving_total(self) -> int:
        return sum(len(self._ids_in(k, Lifecycle.SERVING)) for k in range(len(self.kinds)))

    # ----------------------------------------------------------------- actions
    def action_masks(self) -> np.ndarray:
        mask = np.zeros((len(self.kinds), 3), dtype=bool)
        mask[:, HOLD] = True
        serving_total = self._serving_total()
        has_free_slot = bool(self._free_slots())
        for kind, config in enumerate(self.kinds):
            mask[kind, REMOVE] = serving_total >= 2 and bool(self._ids_in(kind, Lifecycle.SERVING))
            mask[kind, ADD] = has_free_slot and self._free_gpus(config.gpu) >= config.num_gpus
        return mask.reshape(-1)

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        choices = [int(a) for a in action]
        per_kind = mask.reshape(len(self.kinds), 3)
        if not all(per_kind[kind, choice] for kind, choice in enumerate(choices)):
            return False
        if self._serving_total() - choices.count(REMOVE) < 1:
            return False
        if choices.count(ADD) > len(self._free_slots()):
            return False
        wanted: dict[str, int] = {}
        for kind, choice in enumerate(choices):
            if choice == ADD:
                config = self.kinds[kind]
                wanted[config.gpu] = wanted.get(config.gpu, 0) + config.num_gpus
        return all(count <= self._free_gpus(gpu) for gpu, count in wanted.items())

    def fallback_action(self) -> np.ndarray:
        return np.full(len(self.kinds), HOLD, dtype=np.int64)

    def apply(self, action: Any, valid: bool) -> None:
        assert self.cluster is not None
        for kind, choice in enumerate(int(a) for a in action):
            if choice == REMOVE:
                self.cluster.drain(max(self._ids_in(kind, Lifecycle.SERVING)))
            elif choice == ADD:
                instance_id = self.cluster.deploy(self.kinds[kind])
                self._slots[self._free_slots()[0]] = instance_id
                self._kind_of[instance_id] = kind
        self._until_s = self.cluster.events.now_s + self.scaling_window_s

    # ----------------------------------------------------------------- observation
    def slot_instance_ids(self) -> list[int | None]:
        """Rows follow this env's slots: an instance keeps its slot for life; a stopped
        instance's slot is reused by the next one added."""
        return list(self._slots)

    def context(self) -> np.ndarray:
        assert self.cluster is not None
        cluster = self.cluster
        vector = np.zeros(self.context_size(), dtype=np.float32)
        active = cluster.active_instances()
        finished = cluster.outcomes[self._window_first_outcome:]
        met = sum(o.completed and self.reward_fn.met(o) for o in finished)
        vector[0] = squash(self.recent_qps(self.scaling_window_s), COUNT_SCALE)
        vector[1] = squash(sum(len(i.waiting) for i in active), COUNT_SCALE)
        vector[2] = squash(sum(len(i.running) for i in active), COUNT_SCALE)
        vector[3] = squash(sum(len(i.swapped) for i in active), COUNT_SCALE)
        vector[4] = squash(cluster.cost_rate_usd_per_s() * 3600.0, 100.0)
        vector[5] = met / len(finished) if finished else 0.0
        vector[6] = squash(len(finished), COUNT_SCALE)
        vector[7] = cluster.arrived / self.scenario.episode_requests
        slots = self.scenario.max_instances
        for kind in range(len(self.kinds)):
            for offset, lifecycle in enumerate((Lifecycle.SERVING, Lifecycle.STARTING, Lifecycle.DRAINING)):
                vector[8 + len(KIND_FEATURES) * kind + offset] = len(self._ids_in(kind, lifecycle)) / slots
        return vector
