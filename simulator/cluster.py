"""A cluster of instances: GPU inventory, deployment lifecycle, routing, migration, PD transfer, cost.

The cluster drives the event loop. Routing is a hook: ``router(cluster, seq) -> instance_id``,
or the name of one in the router registry (``simulator.routers``; default: round-robin over
serving instances). With ``router=None`` every arrival becomes a
*decision* that ``advance`` returns to its caller (the Gymnasium env), which answers with
``dispatch``. Reasoning→answering transitions can likewise go to ``phase_router`` (PASCAL's
placement at ``</think>``, PASCAL §IV-B).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence as SequenceOf
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from hardware.gpus import get_gpu
from hardware.latency import kv_transfer_time_s, weight_load_time_s
from simulator.events import EventQueue
from simulator.instance import Instance, InstanceConfig, Lifecycle, Role
from simulator.instance_arrays import LIFECYCLE, LIFECYCLE_CODES, ROLE, ROLE_CODES, InstanceArrays
from simulator.kv_blocks import blocks_for_tokens
from simulator.outcome import RequestOutcome
from simulator.pipeline import create_instance
from simulator.prefix_keys import PrefixKeys
from simulator.request import MAX_ARRIVAL_S, Phase, Request, check_block_hashes
from simulator.routers import Router, make_router
from simulator.sequence import Residency, Sequence

PhaseRouter = Callable[["Cluster", Sequence, Instance], int | None]
DecodeRouter = Callable[["Cluster", Sequence, Instance], int]
CompletionHook = Callable[["Cluster", Instance, Sequence], bool]


@dataclass(frozen=True)
class Decision:
    """A point where the simulator waits for an outside policy.

    ``kind`` is ``"route"`` (a new arrival, answer with ``dispatch``) or ``"phase"`` (a
    request finished reasoning on ``instance_id``; answer with ``place_answering``).
    """

    kind: str
    seq: Sequence
    instance_id: int = -1


@dataclass(frozen=True)
class MigrationConfig:
    """Live migration (Llumnix-K §3.5, Fig. 4; Llumnix defaults): copy the KV in
    stages while the request keeps decoding on the source; when the blocks left to copy are at
    most ``last_stage_max_blocks`` or ``max_stages`` stages ran, pause it, copy the rest and
    resume on the destination."""

    last_stage_max_blocks: int = 16
    max_stages: int = 3

    def __post_init__(self) -> None:
        """Integers, ``last_stage_max_blocks`` >= 0 and ``max_stages`` >= 1 (raises naming the bad one)."""
        for name, minimum in (("last_stage_max_blocks", 0), ("max_stages", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
                raise ValueError(f"MigrationConfig.{name} must be an integer >= {minimum}, got {value!r}")


class Cluster:
    """Instances on a GPU inventory, fed by a request stream, with cost accounting in USD."""

    def __init__(
        self,
        gpu_inventory: dict[str, int],
        *,
        router: Router | None | str = "round_robin",
        phase_router: PhaseRouter | None = None,
        decode_router: DecodeRouter | None = None,
        completion_hook: CompletionHook | None = None,
        external_phase_decisions: bool = False,
        migration: MigrationConfig = MigrationConfig(),
        provisioning_s: float = 0.0,
        coalesce: bool = True,
        record_token_curves: bool = False,
        track_arrays: bool = False,
        keep_sequences: bool = True,
    ) -> None:
        for gpu, count in gpu_inventory.items():
            get_gpu(gpu)
            if not isinstance(count, int) or count < 0:
                raise ValueError(f"GPU inventory for {gpu} must be a non-negative integer, got {count!r}")
        if provisioning_s < 0 or provisioning_s != provisioning_s:
            raise ValueError(f"provisioning_s must be non-negative, got {provisioning_s}")
        self.events = EventQueue()
        self.gpu_inventory = dict(gpu_inventory)
        self.gpus_in_use = {gpu: 0 for gpu in gpu_inventory}
        self.instances: dict[int, Instance] = {}
        self.router: Router | None = make_router(router) if isinstance(router, str) else router
        self.phase_router = phase_router
        self.decode_router = decode_router
        self.completion_hook = completion_hook
        self.external_phase_decisions = external_phase_decisions
        self.migration = migration
        self.provisioning_s = provisioning_s
        self.coalesce = coalesce
        self.record_token_curves = record_token_curves
        self.arrays: InstanceArrays | None = InstanceArrays() if track_arrays else None
        """Per-instance queue, KV and lifecycle arrays (``simulator.instance_arrays``), kept with
        ``track_arrays=True``; indexed by instance id."""
        self._accepting: dict[tuple[Role, str | None], tuple[int, np.ndarray]] = {}
        """``accepting``'s masks by (excluded role, model), with the arrays' ``layout_version`` they were read at."""
        self._routable: tuple[int, list[int]] = (-1, [])
        """``routable_ids`` with the ``layout_version`` it was read at."""
        self.outcomes: list[RequestOutcome] = []
        self.arrived = 0
        self.keep_sequences = keep_sequences
        self.arrived_sequences: list[Sequence] = []
        """Every arrival's live state, in arrival order (none with ``keep_sequences=False``, so that
        memory holds only the requests in flight and the outcomes)."""
        self._requests: SequenceOf[Request] | None = ()
        self._stream: Iterator[Request] = iter(())
        self._scheduled = 0
        self._latest_arrival_s = -1.0
        self._decision: Decision | None = None
        self._decisions_behind: list[Decision] = []  # phase changes that came with another one
        self._next_id = 0
        self._held: dict[int, tuple[float, int, float]] = {}
        """Per instance holding GPUs: (since when, GPUs, USD per GPU-second), for ``cost_usd``."""
        self._cost_rate_usd_per_s: float | None = None
        self._cost_closed_usd = 0.0
        self._stopped_at_s: dict[int, float] = {}
        self.migrations_started = 0
        self.migrations_done = 0
        self.migrations_aborted = 0
        self.prefix_keys = PrefixKeys()
        """Chained block keys of the requests that carry ``block_hashes`` (``simulator.prefix_keys``)."""
        self.version = 0
        """Increases whenever a public method may change the state (deploy, drain, dispatch,
        place_answering, migrate, advance): what is derived from the state keeps it to know
        when to derive again."""

    # ----------------------------------------------------------------- deployment
    def deploy(self, config: InstanceConfig, *, ready_now: bool = False) -> int:
        """Deploy an instance; it serves after the weight-load time plus ``provisioning_s``
        (immediately with ``ready_now``, for the initial deployment). GPUs are held (and paid)
        from now on."""
        self.version += 1
        self._check_config(config)
        free = self.gpu_inventory.get(config.gpu, 0) - self.gpus_in_use.get(config.gpu, 0)
        if config.num_gpus > free:
            raise ValueError(
                f"cannot deploy {config.model} on {config.num_gpus} x {config.gpu}: {free} free of "
                f"{self.gpu_inventory.get(config.gpu, 0)} in the inventory"
            )
        instance_id = self._next_id
        self._next_id += 1
        instance = self._add_instance(instance_id, config)
        self.gpus_in_use[config.gpu] = self.gpus_in_use.get(config.gpu, 0) + config.num_gpus
        self._held[instance_id] = (self.events.now_s, config.num_gpus, instance.gpu.price_per_second_usd)
        self._cost_rate_usd_per_s = None
        if ready_now:
            return instance_id
        startup_s = weight_load_time_s(instance.model, instance.gpu, config.tp, config.pp, config.dtype)
        self._start_at(instance, self.events.now_s + startup_s + self.provisioning_s)
        return instance_id

    def _check_config(self, config: InstanceConfig) -> None:
        """Raise on a config ``deploy`` cannot deploy (``InstanceConfig.resolved`` validates it)."""
        config.resolved()

    def _add_instance(self, instance_id: int, config: InstanceConfig) -> Instance:
        """Create the instance ``instance_id`` of ``deploy``, serving, in ``instances`` (and the arrays)."""
        instance = create_instance(instance_id, config, self.events, self, coalesce=self.coalesce)
        self.instances[instance_id] = instance
        if self.arrays is not None:
            instance.track(self.arrays)
        return instance

    def _start_at(self, instance: Instance, time_s: float) -> None:
        """``instance`` is starting; it serves from ``time_s`` on."""
        instance.lifecycle = Lifecycle.STARTING
        self.events.schedule(time_s, self._on_started, instance.instance_id)

    def _on_started(self, instance_id: int) -> None:
        instance = self.instances[instance_id]
        if instance.lifecycle == Lifecycle.STARTING:
            instance.lifecycle = Lifecycle.SERVING

    def drain(self, instance_id: int) -> None:
        """Stop routing to an instance; it stops (and frees its GPUs) once its requests are done."""
        self.version += 1
        instance = self._instance(instance_id)
        if instance.lifecycle in (Lifecycle.DRAINING, Lifecycle.STOPPED):
            raise ValueError(f"instance {instance_id} is already {instance.lifecycle.value}")
        if instance.lifecycle == Lifecycle.STARTING:
            self._stop(instance)
            return
        instance.lifecycle = Lifecycle.DRAINING
        if instance.num_requests == 0 and not instance.busy:
            self._stop(instance)

    def _stop(self, instance: Instance) -> None:
        instance.lifecycle = Lifecycle.STOPPED
        self._release(instance, self.events.now_s)

    def _release(self, instance: Instance, stopped_s: float) -> None:
        """``instance`` stopped at ``stopped_s``: its GPUs are free and no longer paid."""
        config = instance.config
        self.gpus_in_use[config.gpu] -= config.num_gpus
        since_s, num_gpus, usd_per_gpu_s = self._held.pop(instance.instance_id)
        self._cost_rate_usd_per_s = None
        self._cost_closed_usd += (stopped_s - since_s) * num_gpus * usd_per_gpu_s
        self._stopped_at_s[instance.instance_id] = stopped_s

    @staticmethod
    def _refusal(instance: Instance, seq: Sequence | None, new_request: bool = True) -> str | None:
        """Why ``instance`` cannot take ``seq`` now (None: it can): the rule of ``accepting``
        for one instance, so a dispatch checks only its target."""
        excluded = Role.DECODE if new_request else Role.PREFILL
        model = None if seq is None else seq.request.model
        if instance.lifecycle is Lifecycle.SERVING and instance.role is not excluded and (
                model is None or instance.model.name == model):
            return None
        if instance.lifecycle != Lifecycle.SERVING:
            return f"instance {instance.instance_id} is {instance.lifecycle.value}, not serving"
        if instance.role == excluded:
            return (f"instance {instance.instance_id} is decode-only and cannot take new requests" if new_request
                    else f"instance {instance.instance_id} is prefill-only and cannot take answering requests")
        return f"instance {instance.instance_id} serves {instance.model.name}, request needs {model}"

    def _instance(self, instance_id: int) -> Instance:
        if instance_id not in self.instances:
            raise ValueError(f"unknown instance {instance_id}; known: {sorted(self.instances)}")
        return self.instances[instance_id]

    @property
    def context_truncated(self) -> int:
        """Requests whose output was capped at their model's context (``simulator.context``),
        over every instance deployed so far."""
        return sum(instance.context_truncated for instance in self.instances.values())

    def active_instances(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.lifecycle != Lifecycle.STOPPED]

    def accepting(self, seq: Sequence | None = None, *, new_request: bool = True) -> np.ndarray:
        """Which instances (a bool per instance id) can take a request now: serving, not
        decode-only for a new request (``new_request=False``, a request moving to answer after
        reasoning: not prefill-only), and of the request's model when ``seq`` names one. The
        one rule behind ``dispatch``, ``routable_ids`` and the envs' masks; read from the
        instance arrays when the cluster keeps them."""
        excluded = Role.DECODE if new_request else Role.PREFILL
        if self.arrays is not None:
            model = None if seq is None else seq.request.model
            version = self.arrays.layout_version
            cached = self._accepting.get((excluded, model))
            if cached is None or cached[0] != version:  # an instance was added or changed lifecycle
                table = self.arrays.table[:len(self.instances)]
                ok = (table[:, LIFECYCLE] == LIFECYCLE_CODES[Lifecycle.SERVING.value]) & (
                    table[:, ROLE] != ROLE_CODES[excluded.value])
                if model is not None:
                    ok &= np.array([i.model.name == model for i in self.instances.values()], dtype=bool)
                cached = self._accepting[(excluded, model)] = (version, ok)
            return cached[1].copy()
        return np.array([self._refusal(i, seq, new_request) is None for i in self.instances.values()], dtype=bool)

    def routable_ids(self) -> list[int]:
        """Serving instances that take new requests (prefill-capable: not decode-only)."""
        if self.arrays is not None:
            version = self.arrays.layout_version
            if self._routable[0] != version:
                self._routable = (version, np.flatnonzero(self.accepting()).tolist())
            return list(self._routable[1])
        return [instance_id for instance_id, instance in self.instances.items() if self._refusal(instance, None) is None]

    def unsynced_kv_blocks(self, ids: list[int]) -> np.ndarray:
        """``Instance.unsynced_kv_blocks`` of each instance of ``ids``, as an int64 array."""
        instances = self.instances
        return np.array([instances[i].unsynced_kv_blocks() for i in ids], dtype=np.int64)

    def prefix_cache_counters(self, ids: list[int]) -> np.ndarray:
        """Per instance of ``ids``: its prefix cache's (``entry_blocks``, ``query_tokens``,
        ``hit_tokens``, ``host_hit_tokens``), or -1s without prefix caching (int64, ``len(ids)`` x 4)."""
        counters = np.full((len(ids), 4), -1, dtype=np.int64)
        for row, instance_id in enumerate(ids):
            cache = self.instances[instance_id].prefix_cache
            if cache is not None:
                counters[row] = cache.entry_blocks, cache.query_tokens, cache.hit_tokens, cache.host_hit_tokens
        return counters

    def migration_candidates(self, ids: list[int], excluded: Collection[int] = ()) -> np.ndarray:
        """Per instance of ``ids``: the request it would migrate out (``Instance.migration_candidate``,
        skipping request ids in ``excluded``) as (queued: 1 waiting / 0 running, prompt + generated
        tokens, KV tokens, tier), or -1s where there is none (int64, ``len(ids)`` x 4)."""
        table = np.full((len(ids), 4), -1, dtype=np.int64)
        for row, instance_id in enumerate(ids):
            seq = self.instances[instance_id].migration_candidate(excluded)
            if seq is not None:
                table[row] = seq.residency == Residency.QUEUED, seq.prefill_target_tokens, seq.kv_tokens, seq.tier
        return table

    def cost_usd(self) -> float:
        """Σ GPUs × price × time held, starting and draining included, up to now."""
        now = self.events.now_s
        open_usd = sum(
            (now - since_s) * num_gpus * usd_per_gpu_s for since_s, num_gpus, usd_per_gpu_s in self._held.values()
        )
        return self._cost_closed_usd + open_usd

    def cost_rate_usd_per_s(self) -> float:
        """$ per second of the GPUs held now (summed again only when that set changes)."""
        if self._cost_rate_usd_per_s is None:
            self._cost_rate_usd_per_s = sum(num_gpus * usd_per_gpu_s for _, num_gpus, usd_per_gpu_s in self._held.values())
        return self._cost_rate_usd_per_s

    # ----------------------------------------------------------------- requests
    def submit(self, requests: Iterable[Request]) -> None:
        """Feed requests sorted by arrival; replaces any not yet arrived. A list (any sequence)
        is checked whole now; any other iterable is a stream, read one request ahead of the
        clock and checked as each is read (same errors), so it may be longer than memory."""
        self._latest_arrival_s = -1.0
        if isinstance(requests, SequenceOf):
            for request in requests:
                self._check_next(request)
            self._requests = requests
        else:
            self._requests = None
        self._stream = iter(requests)
        self._scheduled = 0
        self._schedule_next_arrival()

    def add_arrival(self, request: Request) -> None:
        """One more request on top of a submitted stream, arriving at ``request.arrival_s`` or now if
        that has passed: a closed-loop client sending its next request when one completes. A list
        given to ``submit`` is a fixed workload, so this needs a stream."""
        if self._requests is not None:
            raise ValueError("add_arrival needs a stream of requests (submit an iterator, not a list)")
        validate_request(request)
        self._scheduled += 1
        self.events.schedule(max(request.arrival_s, self.events.now_s), self._admit, request)

    def _check_next(self, request: Request) -> None:
        """``request`` is valid and arrives no earlier than the one before it."""
        if request.arrival_s < self._latest_arrival_s:
            raise ValueError(f"requests must be sorted by arrival; request {request.request_id} arrives at "
                             f"{request.arrival_s} s after {self._latest_arrival_s} s")
        self._latest_arrival_s = request.arrival_s
        validate_request(request)

    def _schedule_next_arrival(self) -> None:
        request = next(self._stream, None)
        if request is None:
            return
        if self._requests is None:
            self._check_next(request)
        self._scheduled += 1
        self.events.schedule(max(request.arrival_s, self.events.now_s), self._on_arrival, request)

    def _on_arrival(self, request: Request) -> None:
        self._schedule_next_arrival()
        self._admit(request)

    def _admit(self, request: Request) -> None:
        """``request`` arrives now: to the router, or to the caller as a ``"route"`` decision."""
        self.arrived += 1
        seq = Sequence(request, self.record_token_curves)
        if request.block_hashes is not None:
            self.chain_keys(seq)
        if self.keep_sequences:
            self.arrived_sequences.append(seq)
        if self.router is None:
            self._decision = Decision("route", seq)
            return
        self.dispatch(seq, self.router(self, seq))

    def chain_keys(self, seq: Sequence) -> None:
        """Give ``seq`` the chained keys of its request's full hash blocks
        (``PrefixKeys.of_request``)."""
        request = seq.request
        if request.block_hashes is None:
            return
        seq.block_keys = self.prefix_keys.of_request(request)
        seq.block_tokens = request.block_hashes.block_tokens

    def dispatch(self, seq: Sequence, instance_id: int) -> None:
        """Send a new request to an instance (the answer to a ``"route"`` decision)."""
        self.version += 1
        instance = self._instance(instance_id)
        refusal = self._refusal(instance, seq)
        if refusal is not None:
            raise ValueError(refusal)
        if seq.block_keys is None and seq.request.block_hashes is not None:
            self.chain_keys(seq)
        if self._decision is not None and self._decision.seq is seq:
            self._next_decision()
        seq.pd_handoff = instance.role == Role.PREFILL and self.decode_router is not None
        frontend_s = instance.latency.engine.frontend_s
        if frontend_s:
            self.events.schedule(self.events.now_s + frontend_s, instance.enqueue, seq)
        else:
            instance.enqueue(seq)

    def dispatch_in_place(self, seq: Sequence, instance_id: int) -> None:
        """Run a request wholly on one instance whatever its role (Cauchy's opportunistic
        in-place execution, Cauchy §3.4.2)."""
        self.version += 1
        instance = self._instance(instance_id)
        if instance.lifecycle != Lifecycle.SERVING:
            raise ValueError(f"instance {instance_id} is {instance.lifecycle.value}, not serving")
        if seq.block_keys is None and seq.request.block_hashes is not None:
            self.chain_keys(seq)
        if self._decision is not None and self._decision.seq is seq:
            self._next_decision()
        seq.pd_handoff = False
        instance.enqueue(seq)

    # ----------------------------------------------------------------- instance host callbacks
    def on_complete(self, instance: Instance, seq: Sequence) -> None:
        """Record the outcome, unless ``completion_hook(cluster, instance, seq)`` returns False:
        then the hook took the request over (a model cascade re-submits it to its next stage,
        ``simulator.cascade``) and records its one outcome itself later."""
        if self.completion_hook is not None and not self.completion_hook(self, instance, seq):
            return
        self.outcomes.append(seq.outcome(self.events.now_s))

    def on_reject(self, seq: Sequence, reason: str) -> None:
        seq.phase = Phase.REJECTED
        self.outcomes.append(seq.outcome(self.events.now_s, rejected_reason=reason))

    def on_idle(self, instance: Instance) -> None:
        if instance.lifecycle == Lifecycle.DRAINING and instance.num_requests == 0:
            self._stop(instance)

    def on_phase_change(self, instance: Instance, seq: Sequence) -> None:
        if self.external_phase_decisions:
            instance.remove(seq)
            decision = Decision("phase", seq, instance.instance_id)
            if self._decision is None:
                self._decision = decision
            else:  # several requests of one instance finished reasoning at the same iteration
                self._decisions_behind.append(decision)
            return
        if self.phase_router is None:
            return
        target = self.phase_router(self, seq, instance)
        if target is not None and target != instance.instance_id:
            instance.remove(seq)
            self._transfer(seq, instance, self._instance(target))

    def _next_decision(self) -> None:
        """The current decision is answered: the next one waiting behind it (if any) is due."""
        self._decision = self._decisions_behind.pop(0) if self._decisions_behind else None

    def place_answering(self, seq: Sequence, instance_id: int) -> None:
        """Answer a ``"phase"`` decision: continue the answering phase on ``instance_id``
        (the same instance, or another one after a KV transfer)."""
        self.version += 1
        if self._decision is None or self._decision.seq is not seq:
            raise ValueError(f"request {seq.request_id} is not waiting for a phase decision")
        source = self._instance(self._decision.instance_id)
        self._next_decision()
        target = self._instance(instance_id)
        if target is source:
            if not target.accept_running(seq):
                target.accept_transferred(seq)
            return
        self._transfer(seq, source, target)

    def on_prefill_done(self, instance: Instance, seq: Sequence) -> None:
        assert self.decode_router is not None
        target = self._instance(self.decode_router(self, seq, instance))
        instance.remove(seq)
        seq.pd_handoff = False
        self._transfer(seq, instance, target)

    # ----------------------------------------------------------------- KV movement
    def link_gbps(self, source: Instance, target: Instance) -> float:
        """Bandwidth between two instances: the slower GPU's intra-node link for the same GPU
        type, else the slower host link (cross-node, Cauchy §3.4.2 uses TCP)."""
        if source.gpu.name == target.gpu.name:
            return min(source.gpu.intra_node_link_gbps, target.gpu.intra_node_link_gbps)
        return min(source.gpu.host_link_gbps, target.gpu.host_link_gbps)

    def _transfer(self, seq: Sequence, source: Instance, target: Instance) -> None:
        """Move a paused sequence's whole KV to ``target`` (PD hand-off, phase-change migration)."""
        seq.residency = Residency.MOVING
        seq.num_migrations += 1
        delay_s = kv_transfer_time_s(source.model, max(seq.kv_tokens, 1), self.link_gbps(source, target))
        self.events.schedule(self.events.now_s + delay_s, lambda s: target.accept_transferred(s), seq)

    def migrate(self, seq: Sequence, target_id: int) -> bool:
        """Live-migrate a request (Llumnix-K §3.5). Queued requests move at once;
        running decode requests move in stages while decoding. Returns False (nothing
        happens) when the target cannot take it now."""
        self.version += 1
        ends = self._migration_ends(seq, target_id)
        if ends is None:
            return False
        source, target = ends
        if seq.residency == Residency.QUEUED and seq in source.waiting:
            source.remove(seq)
            seq.num_migrations += 1
            self.migrations_started += 1
            self.migrations_done += 1
            target.enqueue(seq)
            return True
        if seq.residency != Residency.RUNNING or not seq.in_decode or seq.pd_handoff:
            raise ValueError(f"request {seq.request_id} is not a running decode request (it is {seq.residency.name})")
        source.sync()
        need = blocks_for_tokens(seq.kv_tokens + 1, target.kv.block_size)
        if not target.kv.can_admit(need):
            return False
        self.migrations_started += 1
        self._migration_stage(seq, source, target, copied_tokens=0, stage=1)
        return True

    def _migration_ends(self, seq: Sequence, target_id: int) -> tuple[Instance, Instance] | None:
        """The source and target instances of migrating ``seq`` to ``target_id``; None when the
        target cannot take it (not serving, another model); raises for its own instance."""
        target = self._instance(target_id)
        source = self._instance(seq.instance_id)
        if target is source:
            raise ValueError(f"request {seq.request_id} is already on instance {target_id}")
        if target.lifecycle != Lifecycle.SERVING or target.model.name != source.model.name:
            return None
        return source, target

    def _migration_stage(self, seq: Sequence, source: Instance, target: Instance, copied_tokens: int, stage: int) -> None:
        to_copy = seq.kv_tokens - copied_tokens
        delay_s = kv_transfer_time_s(source.model, max(to_copy, 1), self.link_gbps(source, target))

        def stage_done(_: Any) -> None:
            if seq.instance_id != source.instance_id or seq.residency != Residency.RUNNING:
                self.migrations_aborted += 1
                return
            source.sync()
            left_blocks = blocks_for_tokens(seq.kv_tokens - (copied_tokens + to_copy), target.kv.block_size)
            if left_blocks <= self.migration.last_stage_max_blocks or stage >= self.migration.max_stages:
                source.detach_at_boundary(
                    seq, lambda s: self._final_stage(s, source, target, copied_tokens + to_copy), self._migration_gone
                )
            else:
                self._migration_stage(seq, source, target, copied_tokens + to_copy, stage + 1)

        self.events.schedule(self.events.now_s + delay_s, stage_done, None)

    def _migration_gone(self, seq: Sequence) -> None:
        """The request completed (or left for a phase change) at the hand-off boundary."""
        self.migrations_aborted += 1

    def _final_stage(self, seq: Sequence, source: Instance, target: Instance, copied_tokens: int) -> None:
        seq.num_migrations += 1
        delay_s = kv_transfer_time_s(source.model, max(seq.kv_tokens - copied_tokens, 1), self.link_gbps(source, target))

        def hand_off(_: Any) -> None:
            self.migrations_done += 1
            target.accept_transferred(seq)

        self.events.schedule(self.events.now_s + delay_s, hand_off, None)

    # ----------------------------------------------------------------- running
    def every(self, interval_s: float, callback: Callable[[Cluster], None], start_s: float | None = None) -> None:
        """Call ``callback(cluster)`` every ``interval_s`` simulated seconds while requests remain."""
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")

        def tick(_: Any) -> None:
            if self.pending_requests() == 0:
                return
            callback(self)
            self.events.schedule(self.events.now_s + interval_s, tick, None)

        first = self.events.now_s + interval_s if start_s is None else start_s
        self.events.schedule(first, tick, None)

    @property
    def submitted_requests(self) -> SequenceOf[Request]:
        """The request list given to ``submit`` (arrived or not); a stream keeps none."""
        if self._requests is None:
            raise ValueError("submitted_requests needs a list of requests; this cluster was given a stream, which "
                             "keeps none (count arrivals with Cluster.arrived)")
        return self._requests

    def pending_requests(self) -> int:
        """Requests arrived or still to arrive that have not ended (of a stream, those read so far:
        the arrived ones and the next one)."""
        submitted = self._scheduled if self._requests is None else len(self._requests)
        return submitted - len(self.outcomes)

    def advance(self, until_s: float = float("inf")) -> Decision | None:
        """Run events up to ``until_s`` or until a decision is needed; return that decision."""
        self.version += 1
        if self._decision is not None:
            return self._decision
        events = self.events
        while events._heap and events.peek_time_s() <= until_s:
            events.pop_and_run()
            if self._decision is not None:
                return self._decision
        if until_s != float("inf") and until_s > events.now_s:
            events.now_s = until_s
        return None

    def run(self, requests: Iterable[Request] | None = None) -> list[RequestOutcome]:
        """Serve ``requests`` to the end with the configured routers; return every outcome."""
        if self.router is None or self.external_phase_decisions:
            raise ValueError("run() needs internal routers; use advance() with external decisions")
        if requests is not None:
            self.submit(requests)
        self.advance()
        if self.pending_requests() != 0:
            raise RuntimeError(f"{self.pending_requests()} requests neither completed nor rejected")
        return self.outcomes


def requests_valid_in_order(requests: SequenceOf[Request], columns: dict[str, list[Any]], arrival_s: list[Any],
                            latest_arrival_s: float) -> bool:
    """Whether every request of ``requests`` passes ``validate_request`` and arrives no earlier
    than the one before it (the first no earlier than ``latest_arrival_s``), decided column-wise
    over ``columns`` (``request_id``, ``prompt_tokens``, ``output_tokens``, ``reasoning_tokens``,
    ``tier``: each request's, in order) and ``arrival_s``: a generated workload's thousands of
    requests without a Python step each. False does not say which request fails: check them
    one by one (``validate_request``) for the error that names it."""
    if not requests:
        return True
    if any(set(map(type, values)) != {int} for values in columns.values()) or not set(map(type, arrival_s)) <= {float, int}:
        return False  # not plain ints and floats: the one-by-one checks decide
    try:
        prompt, output, reasoning, tier = (np.fromiter(columns[name], np.int64, len(requests))
                                           for name in ("prompt_tokens", "output_tokens", "reasoning_tokens", "tier"))
    except OverflowError:
        return False
    if not columns_valid_in_order(np.array(arrival_s, dtype=float), prompt, output, reasoning, tier, latest_arrival_s):
        return False
    if not set(map(type, map(attrgetter("session_id"), requests))) <= {int, type(None)}:
        return False
    hashes = list(map(attrgetter("block_hashes"), requests))
    try:
        for row in range(len(hashes)) if hashes.count(None) < len(hashes) else ():
            if hashes[row] is not None:
                check_block_hashes(requests[row])
    except ValueError:
        return False
    return True


def columns_valid_in_order(arrival_s: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray,
                           reasoning_tokens: np.ndarray, tier: np.ndarray, latest_arrival_s: float) -> bool:
    """The numeric part of ``requests_valid_in_order`` on columns (one value per request, in
    order): arrivals in [0, ``MAX_ARRIVAL_S``] and non-decreasing from ``latest_arrival_s``,
    prompt and output >= 1, 0 <= reasoning < output where there is reasoning, tier >= 0."""
    if arrival_s.size == 0:
        return True
    return bool(arrival_s[0] >= latest_arrival_s and np.all((arrival_s >= 0) & (arrival_s <= MAX_ARRIVAL_S))
                and np.all(arrival_s[1:] >= arrival_s[:-1]) and np.all(prompt_tokens > 0) and np.all(output_tokens > 0)
                and np.all(reasoning_tokens >= 0) and np.all((reasoning_tokens == 0) | (reasoning_tokens < output_tokens))
                and np.all(tier >= 0))


def validate_request(request: Request) -> None:
    if not (request.arrival_s >= 0):
        raise ValueError(f"request {request.request_id}: arrival_s must be >= 0, got {request.arrival_s}")
    for name in ("prompt_tokens", "output_tokens"):
        value = getattr(request, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"request {request.request_id}: {name} must be a positive integer, got {value!r}")
    if request.reasoning_tokens < 0 or (request.reasoning_tokens and request.reasoning_tokens >= request.output_tokens):
        raise ValueError(
            f"request {request.request_id}: reasoning_tokens must be in [0, output_tokens) "
            f"(at least one answer token), got {request.reasoning_tokens} of {request.output_tokens}"
        )
    if request.tier < 0:
        raise ValueError(f"request {request.request_id}: tier must be >= 0, got {request.tier}")
    if request.block_hashes is not None:
        check_block_hashes(request)
    session = request.session_id
    if session is not None and (isinstance(session, bool) or not isinstance(session, int)):
        raise ValueError(f"request {request.request_id}: session_id must be an integer or None, got {session!r}")
