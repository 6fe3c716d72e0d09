"""servegym/Migration-v0: choose which instance sheds a request to which (live migration)."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv
from envs.observation import (
    COUNT_SCALE,
    FREENESS_SCALE,
    TOKEN_SCALE,
    arrived_field,
    count_field,
    flag_field,
    instance_fields_doc,
)
from envs.schema import (
    Block,
    Entry,
    Field,
    MaskPart,
    linear,
    observation_tables,
    ratio,
    signed_ratio,
    with_observation_tables,
)
from simulator.cluster import Decision
from simulator.headroom import default_headroom_fractions
from simulator.instance import Instance, Lifecycle, Role
from simulator.instance_arrays import LIFECYCLE, LIFECYCLE_CODES
from simulator.kv_blocks import blocks_for_tokens
from simulator.request import Phase
from simulator.routers import Router, make_router
from simulator.sequence import Residency, Sequence

LLUMNIX_POLLING_INTERVAL_S = 0.05  # Llumnix's migration polling interval (Llumnix-K §3.5)
MIGRATION_INTERVAL_BY_SCENARIO_S = {"default": 0.5}  # coarser where 0.05 s would make ~20k steps
MODES = ("periodic", "phase")
ROUTERS = ("round_robin", "least_loaded", "llumnix")
SERVING_CODE = LIFECYCLE_CODES["serving"]
CANDIDATE_LIFECYCLES = (SERVING_CODE, LIFECYCLE_CODES["draining"])
"""An instance gives up a request only while serving or draining."""


def migration_context(max_instances: int, num_tiers: int, episode_requests: int) -> tuple[Entry, ...]:
    """Migration-v0's context fields (``envs.schema``): the cluster, then each slot's candidate."""
    last_tier = max(num_tiers - 1, 1)
    per_slot = (
        flag_field("has_queued_candidate", "the slot would give up a queued request"),
        flag_field("has_running_candidate", "the slot would give up a running request (phase mode: the request)"),
        Field("candidate_kv_tokens", "tokens", ratio(TOKEN_SCALE),
              "the candidate's KV need: its prompt (+ generated) tokens if queued, else its KV"),
        Field("candidate_tier", "tier", linear(last_tier), "the candidate's tier", integer=True, scale_text="max(K − 1, 1)"),
        Field("freeness_full", "blocks/request", signed_ratio(FREENESS_SCALE),
              "the slot's F_full with the paper's default headroom (``simulator.headroom.freeness_full``)"),
    )
    return (
        flag_field("phase_mode", "mode='phase'"),
        Field("recent_qps", "req/s", ratio(COUNT_SCALE), "arrivals per second over the last 10 s"),
        arrived_field(episode_requests),
        count_field("live_migrations", "live migrations this env started that are still in flight"),
        Field("prompt_tokens", "tokens", ratio(TOKEN_SCALE), "the phase-change request's prompt (0 in periodic mode)"),
        Field("generated_tokens", "tokens", ratio(TOKEN_SCALE), "its generated tokens (0 in periodic mode)"),
        Block("slot", max_instances, per_slot, count_text="N"),
    )


def migration_mask(max_instances: int) -> tuple[MaskPart, ...]:
    slots = max_instances + 1
    return (MaskPart("source", (slots,), "source slots with a candidate; the last entry is the no-op", shape_text="N + 1"),
            MaskPart("destination", (slots,), "serving slots of a source's model; the last entry is the no-op",
                     shape_text="N + 1"))


def migration_candidate(instance: Instance, excluded: Collection[int] = ()) -> Sequence | None:
    """The request ``instance`` would migrate out (``Instance.migration_candidate``, Llumnix-K
    §3.5: queued requests first, then low-priority running decode requests with small KV
    footprints), skipping request ids in ``excluded``."""
    return instance.migration_candidate(excluded)


class MigrationEnv(ServingEnv):
    """Live-migrate requests between instances (the Llumnix rescheduling knob).

    ## Description
    ``mode="periodic"`` (default): a step is one migration interval; the simulation runs
    ``migration_interval_s`` simulated seconds between decisions (default: Llumnix's 0.05 s
    polling interval, 0.5 s for the ``default`` scenario; the first decision is after one
    interval). The action names a source and a destination instance; the source gives up
    the request Llumnix would pick (``migration_candidate``: queued requests first, then
    low-priority running decode requests with small KV, Llumnix-K §3.5) and the
    cluster migrates it: a queued request moves at once, a running one live, in stages,
    while it keeps decoding on the source (§3.5, Fig. 4). A request whose live migration is
    in flight (or was aborted) is not picked again while it stays on its source.
    ``mode="phase"`` (reasoning scenarios): a step is one request reaching ``</think>``
    (PASCAL §IV-B); the action keeps its answering phase in place or moves it, with its
    KV, to another instance. Arrivals are routed inside the env between decisions:
    round-robin (default), ``router="least_loaded"`` (fewest requests, ties to the
    lowest id) or ``router="llumnix"`` (K-tier Llumnix dispatch: the highest F_full under
    the paper's default headroom, ``simulator.routers.freeness``, Llumnix-K §3.4;
    with migration this is the paper's Llumnix global scheduler).

    ## Action space
    ``MultiDiscrete([n + 1, n + 1])`` with n = ``max_instances``: (source slot, destination
    slot); index n in either dimension means no-op (phase mode: stay). ``action_masks()`` is
    the two per-dimension masks concatenated (MaskablePPO): sources are present instances
    (serving or draining) with a migratable request (phase mode: only the instance where the
    request finished reasoning); destinations are serving instances of a model some valid
    source serves; the no-op index is always valid. An action with a masked-out index, or a
    pair that cannot run (source == destination, another model, a role that cannot take the
    request, a request larger than the destination's KV capacity, or a running request whose
    KV does not fit there now) falls back to the no-op, costs ``invalid_action_penalty`` and
    sets ``info["invalid_action"]``; ``strict=True`` raises. An action outside the space
    raises ``ValueError``.

    ## Observation space
    ``Dict``: ``instances`` (``envs.observation``), ``context`` (the cluster and the
    phase-change request, then per slot the request it would give up and its F_full) and
    ``action_mask``; the tables at the end (from ``self.schema``) give every entry, its unit
    and encoding.

    ## Rewards
    ``reward="slo"`` (default), ``"latency"`` or ``"cost"``: see ``envs.rewards``, over the
    requests that finished during the step.

    ## Episode end
    Truncated once every request has arrived and finished; never terminated. The last
    step's ``info["episode_metrics"]`` holds the episode summary and ``info["episode_outcomes"]``
    every request's outcome; every ``info`` carries the
    cluster's ``migrations_started`` / ``migrations_done`` / ``migrations_aborted``.

    ## Arguments
    ``scenario`` (name or ``Scenario``), ``mode``, ``migration_interval_s`` (periodic mode),
    ``router``, ``reward``, ``strict``, ``invalid_action_penalty``, ``render_mode`` ("ansi" or "rgb_array", ``envs.frame``),
    ``backend`` (``"compiled"``, the default: the compiled simulator core; or ``"python"``, the reference engine),
    scenario / workload overrides as keywords.

    ## Scenarios
    Periodic: any (``default``, ``multitier``). Phase: reasoning scenarios (``pascal``, or
    ``lengths="servegen_deepseek_r1"``).
    """

    env_id = "servegym/Migration-v0"

    def __init__(
        self,
        scenario: Any = "default",
        *,
        mode: str = "periodic",
        migration_interval_s: float | None = None,
        router: str = "round_robin",
        **kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {list(MODES)}")
        if router not in ROUTERS:
            raise ValueError(f"unknown router {router!r}; known: {list(ROUTERS)}")
        super().__init__(scenario, **kwargs)
        if mode == "phase":
            if migration_interval_s is not None:
                raise ValueError(f"migration_interval_s={migration_interval_s!r} has no meaning in mode='phase'")
            if not self.scenario.reasoning:
                raise ValueError(f"mode='phase' needs a reasoning scenario; {self.scenario.name!r} samples "
                                 f"lengths={self.scenario.workload.lengths!r}")
        if migration_interval_s is None:
            migration_interval_s = MIGRATION_INTERVAL_BY_SCENARIO_S.get(self.scenario.name, LLUMNIX_POLLING_INTERVAL_S)
        if (isinstance(migration_interval_s, bool) or not isinstance(migration_interval_s, (int, float))
                or not (math.isfinite(migration_interval_s) and migration_interval_s > 0)):
            raise ValueError(f"migration_interval_s must be a positive number, got {migration_interval_s!r}")
        self.mode = mode
        self.migration_interval_s = float(migration_interval_s)
        self.router_name = router
        slots = self.scenario.max_instances
        self.noop_index = slots
        self.action_space = spaces.MultiDiscrete([slots + 1, slots + 1])
        self._default_headroom = default_headroom_fractions(self.scenario.num_tiers)
        self._decision: Decision | None = None
        self._next_tick_s = 0.0
        self._in_flight: dict[int, tuple[Sequence, int]] = {}
        self._candidates: np.ndarray | None = None
        self._models: tuple[Any, np.ndarray] = (None, np.zeros(0, dtype=np.int64))
        self._candidates_version = -1

    # ----------------------------------------------------------------- ServingEnv interface
    def context_entries(self) -> tuple[Entry, ...]:
        return migration_context(self.scenario.max_instances, self.scenario.num_tiers, self.scenario.episode_requests)

    def mask_parts(self) -> tuple[MaskPart, ...]:
        return migration_mask(self.scenario.max_instances)

    def state_changed(self) -> None:
        super().state_changed()
        self._candidates = None

    def cluster_options(self) -> dict[str, Any]:
        # By name where it takes no options: the compiled engine then routes in C++, not in Python per arrival.
        router: Router | str = self.router_name
        if self.router_name == "llumnix":
            router = make_router(self.router_name, headroom_fractions=self._default_headroom)
        return {"router": router, "external_phase_decisions": self.mode == "phase"}

    def on_reset(self) -> None:
        self._decision = None
        self._next_tick_s = 0.0
        self._in_flight = {}

    def advance(self) -> bool:
        assert self.cluster is not None
        cluster = self.cluster
        if self.mode == "phase":
            self._decision = cluster.advance()
            return self._decision is None
        self._next_tick_s += self.migration_interval_s
        cluster.advance(until_s=self._next_tick_s)
        return cluster.pending_requests() == 0

    # ----------------------------------------------------------------- slots and candidates
    @property
    def phase_decision(self) -> Decision | None:
        """Phase mode: the request waiting at its ``</think>`` for this step's action."""
        return self._decision

    def _slot_instance(self, slot: int) -> Instance | None:
        assert self.cluster is not None
        ids = list(self.cluster.instances)
        if slot >= len(ids):
            return None
        return self.cluster.instances[ids[slot]]

    def live_migrations_in_flight(self) -> dict[int, tuple[Sequence, int]]:
        """Running requests this env started migrating that are still on their source:
        request id → (request, source instance id)."""
        self._in_flight = {
            rid: (seq, source_id) for rid, (seq, source_id) in self._in_flight.items()
            if seq.instance_id == source_id and seq.phase not in (Phase.DONE, Phase.REJECTED)
        }
        return self._in_flight

    def candidate(self, slot: int) -> Sequence | None:
        """The request the instance in ``slot`` would give up now (phase mode: the request at
        its phase change, for its source slot only)."""
        return self._candidate_of(self._slot_instance(slot))

    def observed_candidates(self) -> np.ndarray:
        """``candidate(slot)`` of every slot as ``Cluster.migration_candidates`` gives it, one row
        per slot: (queued: 1 waiting / 0 running or phase mode, prompt + generated tokens, KV
        tokens, tier), -1s for none; computed once per observation, in one engine call."""
        assert self.cluster is not None
        cluster = self.cluster
        if self._candidates is None or self._candidates_version != cluster.version:
            self._candidates_version = cluster.version
            table = np.full((self.scenario.max_instances, 4), -1, dtype=np.int64)
            ids = list(cluster.instances)[:self.scenario.max_instances]
            assert cluster.arrays is not None
            lifecycles = cluster.arrays.table[:, LIFECYCLE].tolist()  # by instance id
            slots = [slot for slot, i in enumerate(ids) if lifecycles[i] in CANDIDATE_LIFECYCLES]
            if self.mode == "phase":
                decision = self._decision
                if decision is not None and decision.instance_id in ids and ids.index(decision.instance_id) in slots:
                    seq = decision.seq
                    table[ids.index(decision.instance_id)] = 0, seq.prefill_target_tokens, seq.kv_tokens, seq.tier
            elif slots:
                table[slots] = cluster.migration_candidates([ids[s] for s in slots], set(self.live_migrations_in_flight()))
            self._candidates = table
        return self._candidates

    def _candidate_of(self, instance: Instance | None) -> Sequence | None:
        if instance is None or instance.lifecycle not in (Lifecycle.SERVING, Lifecycle.DRAINING):
            return None
        if self.mode == "phase":
            decision = self._decision
            if decision is None or decision.instance_id != instance.instance_id:
                return None
            return decision.seq
        return migration_candidate(instance, set(self.live_migrations_in_flight()))

    def _refusal(self, seq: Sequence, source: Instance, target: Instance) -> str | None:
        """Why ``target`` cannot take ``seq`` from ``source`` now (None if it can)."""
        if target is source:
            return "source and destination are the same instance"
        if target.lifecycle != Lifecycle.SERVING:
            return f"instance {target.instance_id} is {target.lifecycle.value}"
        if target.model.name != source.model.name:
            return f"instance {target.instance_id} serves {target.model.name}, not {source.model.name}"
        if seq.prompt_tokens + seq.output_tokens > target.max_request_tokens:
            return f"request {seq.request_id} exceeds instance {target.instance_id}'s KV capacity"
        queued = self.mode == "periodic" and seq.residency == Residency.QUEUED
        if queued and target.role == Role.DECODE:
            return f"instance {target.instance_id} is decode-only"
        if not queued and target.role == Role.PREFILL:
            return f"instance {target.instance_id} is prefill-only"
        if not queued and self.mode == "periodic":
            need = blocks_for_tokens(seq.kv_tokens + 1, target.kv.block_size)
            if not target.kv.can_admit(need):
                return f"instance {target.instance_id} has no room for {need} KV blocks now"
        return None

    # ----------------------------------------------------------------- masking and acting
    def compute_action_mask(self) -> np.ndarray:
        slots = self.scenario.max_instances
        sources = np.zeros(slots + 1, dtype=bool)
        destinations = np.zeros(slots + 1, dtype=bool)
        sources[slots] = destinations[slots] = True
        if self.cluster is None:
            return np.concatenate([sources, destinations])
        assert self.cluster.arrays is not None
        sources[:slots] = self.observed_candidates()[:, 0] >= 0
        models = self._model_codes()
        count = len(models)
        serving = self.cluster.arrays.table[:count, LIFECYCLE] == SERVING_CODE
        source_models = np.zeros(count, dtype=bool)  # by model code (codes are below count)
        source_models[models[sources[:count]]] = True
        destinations[:count] = serving & source_models[models]
        return np.concatenate([sources, destinations])

    def _model_codes(self) -> np.ndarray:
        """Each instance's model as a code (equal codes: the same model), by slot; made again
        when the cluster or its instances change."""
        assert self.cluster is not None
        cluster, instances = self.cluster, self.cluster.instances
        if self._models[0] is not cluster or len(self._models[1]) != len(instances):
            names = [instance.model.name for instance in instances.values()]
            self._models = (cluster, np.array([names.index(name) for name in names], dtype=np.int64))
        return self._models[1]

    def is_noop(self, action: Any) -> bool:
        source_slot, destination_slot = (int(a) for a in action)
        return source_slot == self.noop_index or destination_slot == self.noop_index

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        source_slot, destination_slot = (int(a) for a in action)
        if not (mask[source_slot] and mask[self.noop_index + 1 + destination_slot]):
            return False
        if self.is_noop(action):
            return True
        source = self._slot_instance(source_slot)
        target = self._slot_instance(destination_slot)
        assert source is not None and target is not None
        if self.mode == "periodic":
            source.sync()
        seq = self.candidate(source_slot)
        assert seq is not None
        return self._refusal(seq, source, target) is None

    def fallback_action(self) -> np.ndarray:
        return np.array([self.noop_index, self.noop_index], dtype=np.int64)

    def apply(self, action: Any, valid: bool) -> None:
        assert self.cluster is not None
        source_slot, destination_slot = (int(a) for a in action)
        if self.mode == "phase":
            decision = self._decision
            if decision is None:
                return
            target = None if self.is_noop(action) else self._slot_instance(destination_slot)
            self.cluster.place_answering(decision.seq, decision.instance_id if target is None else target.instance_id)
            return
        if self.is_noop(action):
            return
        source = self._slot_instance(source_slot)
        target = self._slot_instance(destination_slot)
        assert source is not None and target is not None
        seq = self.candidate(source_slot)
        assert seq is not None
        running = seq.residency == Residency.RUNNING
        if not self.cluster.migrate(seq, target.instance_id):
            raise RuntimeError(f"instance {target.instance_id} refused request {seq.request_id} after validation")
        if running:
            self._in_flight[seq.request_id] = (seq, source.instance_id)

    # ----------------------------------------------------------------- observation
    def context(self) -> np.ndarray:
        assert self.cluster is not None
        slots = self.scenario.max_instances
        last_tier = max(self.scenario.num_tiers - 1, 1)
        table = self.observed_candidates()
        present = table[:, 0] >= 0
        queued = table[:, 0] == 1
        running = present & ~queued
        kv_tokens = np.where(queued, table[:, 1], np.where(present, table[:, 2], 0)).astype(np.float64)
        tiers = np.where(present, np.minimum(table[:, 3], last_tier), 0).astype(np.float64)
        freeness = np.zeros(slots)
        freeness[self.features.slots] = self.features.freeness_full(self._default_headroom)
        decision = self._decision
        return self.schema.encode_context({
            "phase_mode": self.mode == "phase",
            "recent_qps": self.recent_qps(),
            "arrived": self.cluster.arrived,
            "live_migrations": len(self.live_migrations_in_flight()),
            "prompt_tokens": decision.seq.prompt_tokens if decision is not None else 0,
            "generated_tokens": decision.seq.generated_tokens if decision is not None else 0,
            "has_queued_candidate": queued,
            "has_running_candidate": running,
            "candidate_kv_tokens": kv_tokens,
            "candidate_tier": tiers,
            "freeness_full": freeness,
        })

    def step_info(self, finished: list | None = None) -> dict[str, Any]:
        info = super().step_info(finished)
        assert self.cluster is not None
        info["migrations_started"] = self.cluster.migrations_started
        info["migrations_done"] = self.cluster.migrations_done
        info["migrations_aborted"] = self.cluster.migrations_aborted
        return info


MigrationEnv.__doc__ = with_observation_tables(
    MigrationEnv.__doc__, observation_tables(instance_fields_doc(), migration_context(1, 1, 1), migration_mask(1))
)
