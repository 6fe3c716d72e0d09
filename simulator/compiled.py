"""The compiled engine (``servegym_core``) behind the ``Cluster`` API.

``CompiledCluster`` takes ``Cluster``'s constructor, ``deploy`` and ``run`` and serves the
workload in C++ (``core/src/engine.cpp``): the same events in the same order, the same
floating-point operations, so its outcomes equal ``Cluster.run``'s field by field, bit for bit
(``tests/test_compiled_engine.py``). Python validates (``InstanceConfig.resolved``, the request
checks of ``Cluster``) and passes numbers; no Python runs during the simulation.

Ported: aggregated instances, prefill-only and decode-only ones (in GPU combos, with the prefill
hand-off: ``simulator.compiled_combos``; outside them the built-in routers skip decode-only
instances, as ``Cluster.routable_ids`` does), instances that start up after a delay, with one batch or several pipeline microbatches in flight
(``simulator.pipeline``), the ``fcfs``, ``priority``, ``sarathi``, ``rr`` and ``pascal`` schedulers, preemption
by recompute and by swap, automatic prefix caching over ``block_hashes`` with its host tier
(``simulator.prefix_cache``), coalesced decode segments and ``coalesce=False``, the context rule
and KV-capacity rejections, reasoning requests (and their phase routers), the engine's frontend
time, token curves, and the ``round_robin``, ``least_loaded``, ``session_affinity`` and ``llumnix``
routers (the last as a ``FreestInstanceRouter``, its headroom fractions read when ``run``
starts), Scaling-v0's ``WeightedUnitRouter`` (``simulator.routers.units``: its units read again
whenever they change), and a model cascade given as ``**CascadeRouter.cluster_options()`` (its router and judge:
``simulator.compiled_cascade``). Anything else raises a ``ValueError`` naming it, before anything runs.

Decisions: with ``router=None`` every arrival stops ``advance`` with a ``"route"`` decision, as in
``Cluster``, answered with ``dispatch``; with ``external_phase_decisions=True`` every request that
finishes reasoning stops it with a ``"phase"`` decision, answered with ``place_answering`` (the
same instance, or another after a KV transfer). With ``track_arrays=True`` ``cluster.arrays``
reads the engine's own observation tables (``simulator.compiled_views.CoreArrays``, numpy views,
no copy). Once the workload is submitted, ``instances`` holds ``CompiledInstance`` views: their
config and counters, and the engine's answers to the observations' queries; reading their
requests raises.

Differences from ``Cluster``: the workload is one list given to ``submit`` or ``run`` (a stream is
read whole first, so a bad request raises before any is served), after the first instances are
deployed (more may be deployed and drained later); no ``Sequence`` objects exist (a decision and
``arrived_sequences`` name requests by ``CompiledSequence`` handles, read from the engine).
Python runs where people extend the project: routers written in Python, ``every`` ticks, events
scheduled through ``events.schedule``, completion hooks and added arrivals (``add_arrival``) stop
the engine and run between its events, at the times ``Cluster`` runs them; a phase router
written in Python (``phase_router``) is called by the engine inside the iteration boundary, as
``Cluster`` calls it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Sequence as SequenceOf
from functools import partial
from operator import attrgetter
from typing import Any

import numpy as np
from servegym_core import _core

from simulator.cluster import Cluster, Decision, columns_valid_in_order, requests_valid_in_order, validate_request
from simulator.compiled_cascade import CascadeSync, compiled_cascade
from simulator.compiled_views import ArrivedSequences, CompiledClock, CompiledInstance, CompiledSequence, CoreArrays
from simulator.compiled_outcomes import RequestColumns, build_outcomes, engine_outcome_columns, engine_outcomes
from simulator.compiled_setup import check_instances, instance_settings, name_bad_integer
from simulator.compiled_views import not_ported as not_compiled
from simulator.instance import InstanceConfig, Lifecycle
from simulator.metrics.columns import LazyOutcomes, slo_targets
from simulator.pipeline import create_instance
from simulator.outcome import RequestOutcome
from simulator.request import Request
from simulator.request_table import RequestTable
from simulator.sequence import Sequence
from simulator.routers import Router, make_router
from simulator.routers.freeness import FreestInstanceRouter
from simulator.routers.units import WeightedUnitRouter
from simulator.schedulers import SCHEDULERS
from simulator.schedulers.fcfs import FCFSScheduler
from simulator.schedulers.pascal import PascalScheduler
from simulator.schedulers.priority import PriorityScheduler
from simulator.schedulers.round_robin import RoundRobinScheduler
from simulator.schedulers.sarathi import SarathiScheduler

COMPILED_SCHEDULERS = {"fcfs": FCFSScheduler, "priority": PriorityScheduler, "sarathi": SarathiScheduler,
                       "rr": RoundRobinScheduler, "pascal": PascalScheduler}
COMPILED_ROUTERS = ("round_robin", "least_loaded", "session_affinity")
NOT_COMPILED_OPTIONS = ("decode_router",)
"""``Cluster`` options the compiled engine refuses when set (not None, not False)."""
INTEGER_COLUMNS = ("request_id", "prompt_tokens", "output_tokens", "reasoning_tokens", "tier")


class CompiledCluster(Cluster):
    """A ``Cluster`` whose ``run`` serves the workload in the compiled engine (module docstring)."""

    def __init__(self, gpu_inventory: dict[str, int], *, router: Router | None | str = "round_robin",
                 **options: Any) -> None:
        """``Cluster``'s arguments; the router by a compiled name, a ``FreestInstanceRouter``, a
        Python callable ``router(cluster, seq)`` (``seq`` a ``CompiledSequence``; it reads the
        cluster through the instances' views and arrays), or ``None`` (route decisions through
        ``advance``), and none of the hooks (``NOT_COMPILED_OPTIONS``)."""
        spec = _core.RouterSpec()
        if isinstance(router, str) and router not in COMPILED_ROUTERS:
            router = make_router(router)  # a registered router by name (Llumnix's), or an error naming it
        cascade = compiled_cascade(router, options.get("completion_hook"))
        if cascade is not None:  # a CascadeRouter's route and judge: the engine runs both
            spec.name = "cascade"
        elif router is None:
            spec.name = "external"
        elif type(router) is FreestInstanceRouter:
            spec.name = "llumnix"
        elif type(router) is WeightedUnitRouter:  # its units are read again whenever they change
            spec.name = "units"
        elif isinstance(router, str) and router in COMPILED_ROUTERS:
            spec.name = router
        elif callable(router):  # written in Python: called at each arrival, between the engine's events
            spec.name = "external"
        else:
            raise not_compiled(f"router={router!r} (compiled routers: {', '.join(COMPILED_ROUTERS)}, a "
                               "FreestInstanceRouter for llumnix, a WeightedUnitRouter, or a Python callable)")
        for name in NOT_COMPILED_OPTIONS:
            if options.get(name) and not self._compiled_hook(name, options[name]):
                raise not_compiled(f"{name}={options[name]!r}")
        self._engine: _core.Engine | None = None
        self._engine_models: list[str] = []
        """The models the engine knows, by index (the instances' and the requests' at submit)."""
        self._gpu_index: dict[str, int] = {}
        """An index per GPU type (same type: KV transfers take the intra-node link)."""
        self._callbacks: list[Callable[[], None]] = []
        """The Python callbacks the engine stops for, by slot (``every``'s ticks)."""
        self._presubmit: list[tuple[str, float, int]] = []
        """What is due later, set before the workload was submitted, in call order: ``("tick", time,
        slot)`` for ``every``'s ticks, ``("start", time, instance id)`` for instances starting up."""
        self._engine_outcomes = 0
        """The engine's outcomes already in ``outcomes`` (a completion hook adds others)."""
        self._row_requests: list[Request] = []
        """The request of each engine row: the workload's, then those dispatched again."""
        self._row_of: dict[int, int] = {}
        """The first row of each submitted request (by ``id``), made when first needed."""
        self._row_slo_targets = np.empty((0, 4))
        """Each engine row's SLO targets (``row_slo_targets``), for as many rows as it has."""
        self._chained_keys: list[tuple[int, ...] | None] = []
        """Each submitted request's chained block keys, when an instance caches prefixes."""
        self._phase_router: Any = None
        """The phase router the engine calls (``phase_router`` at the submit)."""
        self._cascade_router = cascade
        self._cascade: CascadeSync | None = None
        """The engine's model cascade, kept equal to the router (once the workload is submitted)."""
        self._templates: dict[int, tuple[InstanceConfig, dict[str, Any], Any, _core.InstanceSettings]] = {}
        """By ``id`` of a config deployed after the submit: the config, its scheduler options then,
        the ``Instance`` made for it (read for its static attributes) and its engine settings."""
        self._units: list[tuple[tuple[int, ...], float]] | None = None
        """``units``: the units the engine routes to, as the router last gave them."""
        super().__init__(gpu_inventory, router=router, **options)
        self.events = CompiledClock(0.0, self._schedule_python)  # type: ignore[assignment]
        self._built_router = self.router
        self._built_hook = self.completion_hook
        self.router_spec = spec
        """The compiled router (Llumnix's headroom fractions are read again whenever they change)."""

    def deploy(self, config: InstanceConfig, *, ready_now: bool = False) -> int:
        """``Cluster.deploy`` for a config the engine ports: serving now (``ready_now=True``), or,
        once the workload is submitted, after its start-up time (scaling)."""
        if self._engine is not None and self.router_spec.name == "session_affinity":
            raise not_compiled("deploy() after the workload was submitted with session_affinity (its ring is read once)")
        return super().deploy(config, ready_now=ready_now)

    def _check_config(self, config: InstanceConfig) -> None:
        """``Cluster._check_config``, and a scheduler the engine runs; a config deployed before
        after the submit (``_deployed_template``) was checked then."""
        if self._deployed_template(config) is not None:
            return
        scheduler = config.resolved().scheduler
        if scheduler not in COMPILED_SCHEDULERS or SCHEDULERS.get(scheduler) is not COMPILED_SCHEDULERS[scheduler]:
            raise not_compiled(f"scheduler={scheduler!r} (compiled schedulers: {', '.join(COMPILED_SCHEDULERS)})")

    def _deployed_template(self, config: InstanceConfig) -> tuple[Any, _core.InstanceSettings] | None:
        """The instance deployed after the submit from this very ``config`` before, and its engine
        settings; None if there is none, or if the config's scheduler options (the one part of a
        frozen config that could change in place) differ from then."""
        cached = self._templates.get(id(config))
        if cached is None or cached[0] is not config or cached[1] != config.scheduler_options:
            return None
        return cached[2], cached[3]

    def drain(self, instance_id: int) -> None:
        """``Cluster.drain``: the instance stops taking requests and stops once they are done."""
        if self._engine is not None and self.router_spec.name == "session_affinity":
            raise not_compiled("drain() with session_affinity (its ring is read once)")
        super().drain(instance_id)

    def _add_instance(self, instance_id: int, config: InstanceConfig) -> Any:
        """Before the submit, a Python ``Instance``; after it, one more instance in the engine,
        seen through its ``CompiledInstance`` view."""
        if self._engine is None:
            return super()._add_instance(instance_id, config)
        template, settings = self.instance_template(config)
        if self._engine.add_instance(settings, template.latency._evaluator) != instance_id:
            raise RuntimeError(f"the engine numbered instance {instance_id} differently")
        return self._view(instance_id, template)

    def instance_template(self, config: InstanceConfig) -> tuple[Any, _core.InstanceSettings]:
        """The ``Instance`` (read for its static attributes) and the engine settings of ``config``
        deployed after the submit; made once per config (scaling deploys the same configs again)."""
        template = self._deployed_template(config)
        if template is not None:
            return template
        instance = create_instance(self._next_id, config, self.events, self, coalesce=self.coalesce)
        model_index, gpu_index = self.engine_indexes(instance.model.name, instance.gpu.name)
        settings = instance_settings(instance, model_index)
        settings.gpu_index = gpu_index
        self._templates[id(config)] = (config, dict(config.scheduler_options), instance, settings)
        return instance, settings

    def engine_indexes(self, model_name: str, gpu_name: str) -> tuple[int, int]:
        """The model index and GPU index the engine gives an instance of ``model_name`` on
        ``gpu_name`` deployed after the submit (``not_compiled`` for a model the engine does not serve)."""
        if model_name not in self._engine_models:
            raise not_compiled(f"deploying {model_name} after the workload was submitted (the engine serves "
                               f"{', '.join(self._engine_models)})")
        return self._engine_models.index(model_name), self._gpu_index.setdefault(gpu_name, len(self._gpu_index))

    def _view(self, instance_id: int, template: Any) -> CompiledInstance:
        """The view of the engine's instance ``instance_id``, deployed from ``template``'s config."""
        instance = copy.copy(template)
        instance.instance_id = instance_id
        view = self.instances[instance_id] = CompiledInstance(instance, self._engine, self._sequence)
        return view

    def adopt(self, config: InstanceConfig, since_s: float) -> int:
        """``deploy`` of ``config`` at ``since_s`` that a native vector env's kernel made in the
        engine itself (``envs.scaling_vector``): the instance's view and its GPUs held, as
        ``deploy`` keeps them (the engine already starts it). Returns its id."""
        instance_id = self._next_id
        if self._engine is None or instance_id >= self._engine.num_instances:
            raise ValueError(f"the engine holds no instance {instance_id} to adopt")
        self.version += 1
        self._next_id += 1
        instance = self._view(instance_id, self.instance_template(config)[0])
        self.gpus_in_use[config.gpu] = self.gpus_in_use.get(config.gpu, 0) + config.num_gpus
        self._held[instance_id] = (since_s, config.num_gpus, instance.gpu.price_per_second_usd)
        self._cost_rate_usd_per_s = None
        return instance_id

    def adopt_release(self, instance_id: int, stopped_s: float) -> None:
        """``_release`` of an instance that a native vector env's kernel stopped at ``stopped_s``:
        its GPUs are free and no longer paid."""
        if instance_id not in self._held:
            raise ValueError(f"instance {instance_id} holds no GPUs to release")
        self.version += 1
        self._release(self.instances[instance_id], stopped_s)

    def _start_at(self, instance: Any, time_s: float) -> None:
        if self._engine is None:  # the engine schedules it at submit, in the order Cluster's events hold
            instance.lifecycle = Lifecycle.STARTING
            self._presubmit.append(("start", time_s, instance.instance_id))
        else:
            self._engine.start_at(instance.instance_id, time_s)

    def submit(self, requests: Iterable[Request]) -> None:
        """Give the engine its one workload, checked whole now (a stream is read whole), on the
        instances deployed so far; then ``run`` it, or ``advance`` it decision by decision."""
        if self._engine is not None:
            raise ValueError("CompiledCluster serves one workload; this cluster already has one")
        self._check_unchanged()
        stream = not isinstance(requests, SequenceOf)
        requests = list(requests) if stream else requests
        table = requests if isinstance(requests, RequestTable) and requests.untouched else None
        self._latest_arrival_s = -1.0
        if table is not None:  # the columns are the requests: no object is made
            columns = {name: getattr(table, name).tolist() for name in INTEGER_COLUMNS}
            arrival_s = table.arrival_s.tolist()
            valid = columns_valid_in_order(table.arrival_s, table.prompt_tokens, table.output_tokens,
                                           table.reasoning_tokens, table.tier, self._latest_arrival_s)
        else:
            columns = {name: list(map(attrgetter(name), requests)) for name in INTEGER_COLUMNS}
            arrival_s = list(map(attrgetter("arrival_s"), requests))
            valid = requests_valid_in_order(requests, columns, arrival_s, self._latest_arrival_s)
        if valid:
            self._latest_arrival_s = arrival_s[-1] if arrival_s else -1.0
        else:  # find the first bad request, and name it
            for request in requests:
                self._check_next(request)
        deployed = dict(self.instances)
        instances = list(deployed.values())
        check_instances(instances)
        cascade = self._cascade_router if self.router_spec.name == "cascade" else None
        models = [None] * len(requests) if table is not None else list(map(attrgetter("model"), requests))
        model_names = list(dict.fromkeys([i.model.name for i in instances] + [m for m in dict.fromkeys(models) if m]
                                         + list(cascade.models if cascade is not None else ())))
        model_index = {name: index for index, name in enumerate(model_names)}
        if isinstance(self.router, FreestInstanceRouter):
            self.router_spec.headroom_fractions = self.router.headroom_fractions.tolist()
        engine = _core.Engine(self.router_spec, self.record_token_curves, model_names, self.arrays is not None,
                              self.external_phase_decisions)
        self._engine_models = model_names
        if cascade is not None:
            self._cascade = CascadeSync(cascade, engine, model_names)
        for instance in instances:
            settings = instance_settings(instance, model_index[instance.model.name])
            settings.gpu_index = self._gpu_index.setdefault(instance.gpu.name, len(self._gpu_index))
            # The instance's latency model's own evaluator (hardware.latency), copied into the engine.
            engine.add_instance(settings, instance.latency._evaluator)
            if instance.gate.min_length > 1:
                engine.set_min_queue_length(instance.instance_id, instance.gate.min_length, instance.gate.max_wait_s)
        for kind, time_s, number in self._presubmit:
            if kind == "tick":
                engine.schedule_callback(time_s, number)
            else:
                engine.start_at(number, time_s)
        model_column = [-1] * len(models) if set(models) <= {None} else [-1 if m is None else model_index[m] for m in models]
        try:
            engine.submit(columns["request_id"], list(map(float, arrival_s)), columns["prompt_tokens"],
                          columns["output_tokens"], columns["reasoning_tokens"], columns["tier"], model_column,
                          self._session_targets(requests))
        except TypeError:  # an integer column holds a value outside int64 (or not an integer)
            name_bad_integer(columns, requests)
            raise
        if any(instance.prefix_cache is not None for instance in instances):
            engine.set_block_keys(*self._block_keys(requests))
        self._phase_router = self.phase_router
        if self.phase_router is not None:
            engine.set_phase_router(self._route_phase)
        engine.set_migration(self.migration.last_stage_max_blocks, self.migration.max_stages)
        self._engine = engine
        self._requests = None if stream else requests  # a stream keeps no list, as in Cluster (add_arrival)
        self._scheduled = len(requests)
        if self.arrays is not None:
            self.arrays = CoreArrays(engine)  # type: ignore[assignment]
        self.instances = {i: CompiledInstance(instance, engine, self._sequence)  # type: ignore[misc]
                          for i, instance in deployed.items()}
        self.events.now_s = engine.now_s
        self._row_requests = requests if table is not None else list(requests)

    def _route_phase(self, row: int, instance_id: int) -> int:
        """The engine's call of ``phase_router(cluster, seq, instance)`` where a request finishes
        reasoning, inside the iteration boundary as ``Cluster`` calls it: the instance to answer
        on, -1 to stay."""
        if self.phase_router is not self._phase_router:
            raise not_compiled(f"a phase router replaced after the submit ({self.phase_router!r})")
        self.events.now_s = self._engine.now_s
        target = self._phase_router(self, self._sequence(row), self.instances[instance_id])
        return -1 if target is None else int(target)

    def _compiled_hook(self, name: str, hook: Any) -> bool:
        """Whether the engine runs ``hook`` itself (``CompiledComboCluster``'s decode routing)."""
        return False

    def _check_unchanged(self) -> None:
        """Nothing the engine would not see was set since construction: a hook, another router."""
        for name in NOT_COMPILED_OPTIONS:
            if getattr(self, name) and not self._compiled_hook(name, getattr(self, name)):
                raise not_compiled(f"{name}={getattr(self, name)!r}")
        if self.router is not self._built_router:
            raise not_compiled(f"a router replaced after construction ({self.router!r})")
        if self.router_spec.name == "cascade" and self.completion_hook != self._built_hook:
            raise not_compiled(f"a completion hook replaced after construction ({self.completion_hook!r}) with the "
                               "cascade's router")

    @property
    def arrived_sequences(self) -> Any:
        """Every arrival so far, in arrival order, as ``CompiledSequence`` handles read from the
        engine (``ArrivedSequences``); empty before the workload is submitted or with
        ``keep_sequences=False``."""
        if self._engine is None or not self.keep_sequences:
            return []
        return ArrivedSequences(self._engine, self._sequence)

    @arrived_sequences.setter
    def arrived_sequences(self, value: list[Any]) -> None:
        if value:
            raise not_compiled("arrived_sequences")

    def run(self, requests: Iterable[Request] | None = None) -> list[RequestOutcome]:
        """Serve ``requests`` (or the submitted ones) to the end in the compiled engine; return
        every outcome (as ``Cluster.run`` does). A stream is read whole first."""
        if self.router is None or self.external_phase_decisions:
            raise ValueError("run() needs internal routers; use advance() with external decisions")
        if requests is not None:
            self.submit(requests)
        elif self._engine is None:
            raise ValueError("CompiledCluster.run needs the requests (give them to run() or submit())")
        self._push_router()
        if self.router_spec.name == "external" or self._callbacks or self.python_completion_hook() is not None:
            # Python runs at some events
            self.advance()
            if self.pending_requests():
                raise RuntimeError(f"{self.pending_requests()} requests neither completed nor rejected")
        else:
            if not self.keep_sequences and self._cascade is None:  # nothing reads a request until the outcomes
                self._row_requests = RequestColumns(self._row_requests)  # type: ignore[assignment]
            self._engine.run()
            self._collect()
        return self.outcomes

    def advance(self, until_s: float = float("inf")) -> Decision | None:
        """``Cluster.advance``: run the engine up to ``until_s`` or until a decision is due
        (``router=None``, external phase decisions); return it. A router written in Python is
        called at each arrival, between the engine's events, as ``Cluster`` calls it."""
        self.version += 1
        if self._decision is not None:
            return self._decision
        if self._engine is None:
            return None
        self._push_router()
        engine = self._engine
        hook = self.python_completion_hook()
        engine.set_completion_hook(hook is not None)
        while True:
            kind, row, instance_id = engine.advance(until_s)
            if kind == 3:  # a timer or Python event: the callback sees the cluster as it is now
                self._collect()
                self._callbacks[row]()
                self._push_router()  # a tick may have changed the cascade's thresholds or the units
                continue
            if kind == 4:  # a completion the hook takes over, or records (Cluster.on_complete)
                self._collect()
                seq = self._sequence(row)
                if hook(self, self.instances[instance_id], seq):  # type: ignore[misc]
                    self.outcomes.append(seq.outcome(self.events.now_s))
                continue
            if kind != 1 or self.router is None:
                break
            self.events.now_s = engine.now_s
            seq = self._sequence(row)
            self._decision = Decision("route", seq)
            self.dispatch(seq, self.router(self, seq))  # as Cluster does: a subclass may place it otherwise
        self._collect()
        if kind == 0:
            return None
        seq = self._sequence(row)
        self._decision = Decision("route", seq) if kind == 1 else Decision("phase", seq, instance_id)
        return self._decision

    def dispatch(self, seq: Any, instance_id: int) -> None:
        """Answer the pending route decision: send its request to ``instance_id``; or send a
        ``Sequence`` made in Python for a request of the workload (a model cascade forwarding it
        to its next stage) as a new engine row."""
        self.version += 1
        if isinstance(seq, Sequence):
            self._redispatch(seq, instance_id)
            return
        if self._decision is None or self._decision.kind != "route" or self._decision.seq is not seq:
            raise not_compiled("dispatch() of a request that no route decision names")
        self._dispatch_now(seq, instance_id)
        self._decision = None

    def dispatch_in_place(self, seq: Any, instance_id: int) -> None:
        """``Cluster.dispatch_in_place``: answer the pending route decision by running the request
        wholly on ``instance_id`` whatever its role (Cauchy §3.4.2)."""
        self.version += 1
        instance = self._instance(instance_id)
        if instance.lifecycle != Lifecycle.SERVING:
            raise ValueError(f"instance {instance_id} is {instance.lifecycle.value}, not serving")
        if self._decision is None or self._decision.kind != "route" or self._decision.seq is not seq:
            raise not_compiled("dispatch_in_place() of a request that no route decision names")
        self._engine.dispatch_in_place(seq.row, instance_id)
        self._decision = None

    def _dispatch_now(self, seq: CompiledSequence, instance_id: int) -> None:
        refusal = self._refusal(self._instance(instance_id), seq)
        if refusal is not None:
            raise ValueError(refusal)
        self._engine.dispatch_decision(seq.row, instance_id)

    def _sync_rows(self) -> None:
        """A compiled cascade: the request of each row the engine added when forwarding."""
        if self._cascade is not None and self._engine.num_rows > len(self._row_requests):
            self._row_requests = self._extendable_rows()
            self._row_requests += map(self._row_requests.__getitem__, self._engine.row_origins(len(self._row_requests)))

    def _extendable_rows(self) -> list[Request]:
        """The rows' requests as a list, to add rows to (a ``RequestTable``'s objects made)."""
        return self._row_requests if isinstance(self._row_requests, list) else list(self._row_requests)

    def _sequence(self, row: int) -> CompiledSequence:
        self._check_requests_kept()
        if row >= len(self._row_requests):  # a forwarded row, seen mid-boundary (a phase router)
            self._sync_rows()
        keys = self._chained_keys[row] if self._chained_keys and row < len(self._chained_keys) else None
        return CompiledSequence(self._engine, row, self._row_requests[row], keys, self._outcome_of)

    def _check_requests_kept(self) -> None:
        """After a ``run`` with ``keep_sequences=False`` the engine keeps only what the outcomes
        copy from the requests (``RequestColumns``): no request to show or add to."""
        if isinstance(self._row_requests, RequestColumns):
            raise ValueError("this compiled cluster kept no requests after its run (keep_sequences=False); "
                             "build it with keep_sequences=True to read or add requests after run()")

    def _outcome_of(self, row: int, finish_s: float) -> RequestOutcome:
        """``Sequence.outcome`` of an engine row."""
        return build_outcomes(self._engine.outcome_of(row, finish_s), self._row_requests, self.record_token_curves)[0]

    def _redispatch(self, seq: Sequence, instance_id: int) -> None:
        refusal = self._refusal(self._instance(instance_id), seq)
        if refusal is not None:
            raise ValueError(refusal)
        if not self._row_of:
            self._row_of = {id(request): row for row, request in enumerate(self._row_requests)}
        row = self._row_of.get(id(seq.request))
        if row is None:
            raise not_compiled(f"dispatch() of request {seq.request_id}, which is not in the submitted workload")
        self._engine.redispatch(row, instance_id, seq.first_scheduled_s, seq.preempted_s, seq.num_preemptions,
                                seq.num_migrations)
        self._row_requests = self._extendable_rows()
        self._row_requests.append(seq.request)

    def _schedule_python(self, time_s: float, callback: Callable[[], None]) -> None:
        """A Python event (``events.schedule``): the engine stops at ``time_s`` and runs it."""
        self._callbacks.append(callback)
        self._schedule_callback(time_s, len(self._callbacks) - 1)

    def place_answering(self, seq: Any, instance_id: int) -> None:
        """Answer the pending phase decision: continue answering on ``instance_id`` (the same
        instance, or another one after a KV transfer)."""
        self.version += 1
        if self._decision is None or self._decision.kind != "phase" or self._decision.seq is not seq:
            raise ValueError(f"request {seq.request_id} is not waiting for a phase decision")
        self._instance(instance_id)
        self._engine.place_answering(seq.row, instance_id)
        self._decision = None

    def unsynced_kv_blocks(self, ids: list[int]) -> np.ndarray:
        if self._engine is None:
            return super().unsynced_kv_blocks(ids)
        return np.array(self._engine.unsynced_kv_blocks(ids), dtype=np.int64)

    def prefix_cache_counters(self, ids: list[int]) -> np.ndarray:
        if self._engine is None:
            return super().prefix_cache_counters(ids)
        return np.array(self._engine.prefix_cache_counters(ids), dtype=np.int64).reshape(len(ids), 4)

    def migration_candidates(self, ids: list[int], excluded: Collection[int] = ()) -> np.ndarray:
        if self._engine is None:
            return super().migration_candidates(ids, excluded)
        return np.array(self._engine.migration_candidates(ids, list(excluded)), dtype=np.int64).reshape(len(ids), 4)

    def migrate(self, seq: Any, target_id: int) -> bool:
        """``Cluster.migrate``: live-migrate a request (Llumnix-K §3.5) in the engine; False (nothing
        happens) when the target cannot take it now."""
        self.version += 1
        if self._engine is None:
            raise not_compiled("migrate() before the workload is submitted")
        if self._migration_ends(seq, target_id) is None:
            return False
        moved = self._engine.migrate(seq.row, target_id)
        self.migrations_started, self.migrations_done, self.migrations_aborted = self._engine.migrations
        return moved

    def every(self, interval_s: float, callback: Callable[[Cluster], None], start_s: float | None = None) -> None:
        """``Cluster.every``: call ``callback(cluster)`` every ``interval_s`` simulated seconds while
        requests remain; the engine stops at each tick and Python runs it."""
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        slot = len(self._callbacks)

        def tick() -> None:
            if self.pending_requests() == 0:
                return
            callback(self)
            self._schedule_callback(self.events.now_s + interval_s, slot)

        self._callbacks.append(tick)
        self._schedule_callback(self.events.now_s + interval_s if start_s is None else start_s, slot)

    def _schedule_callback(self, time_s: float, slot: int) -> None:
        if self._engine is None:
            self._presubmit.append(("tick", time_s, slot))  # scheduled at submit, before the first arrival, as Cluster does
        else:
            self._engine.schedule_callback(time_s, slot)

    @property
    def engine(self) -> _core.Engine | None:
        """The compiled engine running this cluster (None until the workload is submitted): what
        the envs' compiled observation kernel and native vector env read and step."""
        return self._engine

    def python_completion_hook(self) -> Callable[..., bool] | None:
        """The completion hook Python runs (None: none, or the engine runs the cascade's)."""
        return None if self._cascade is not None else self.completion_hook

    def _push_cascade(self) -> None:
        """A compiled cascade: give the engine the router's changes since it last ran."""
        if self._cascade is not None:
            self._cascade.push(self._row_requests)

    def _push_router(self) -> None:
        """Give the engine's router what changed on the Python one since it last ran."""
        self._push_headroom()
        self._push_cascade()
        self._push_units()

    def _push_units(self) -> None:
        """``units`` (Scaling-v0's ``WeightedUnitRouter``): give the engine the router's units
        when they changed since it last read them (the env adds and removes units between steps)."""
        if self.router_spec.name != "units":
            return
        units = [(tuple(ids), weight) for ids, weight in self.router.units()]  # type: ignore[union-attr]
        if units != self._units:
            offsets, members = [0], []
            for ids, _ in units:
                members += ids
                offsets.append(len(members))
            self._engine.set_units(offsets, members, [float(weight) for _, weight in units])
            self._units = units

    def _push_headroom(self) -> None:
        """Llumnix dispatch: give the engine the router's headroom fractions when they changed
        since it last read them (Tier-v0 sets them between steps)."""
        if self.router_spec.name == "llumnix":
            fractions = self.router.headroom_fractions.tolist()  # type: ignore[union-attr]
            if fractions != self.router_spec.headroom_fractions:
                self.router_spec.headroom_fractions = fractions
                self._engine.set_headroom_fractions(fractions)

    def _collect(self) -> None:
        """Bring the Python side up to the engine: the clock, arrivals and the outcomes recorded
        since the last call (the instances' views read the engine directly)."""
        self._collect_state()
        engine = self._engine
        if engine.num_outcomes > self._engine_outcomes:
            if type(self.outcomes) is not list:  # LazyOutcomes of an earlier end: a list again, to extend
                self.outcomes = list(self.outcomes)
            self.outcomes += engine_outcomes(engine, self._row_requests, self.record_token_curves, self._engine_outcomes)
            self._engine_outcomes = engine.num_outcomes

    def _collect_state(self) -> None:
        """``_collect`` but the outcomes: the clock, arrivals, rows, drained instances, migrations."""
        engine = self._engine
        self.events.now_s = engine.now_s
        self.arrived = engine.arrived
        self._sync_rows()
        for instance_id, stopped_s in engine.take_stops():  # drained instances that emptied
            self._release(self.instances[instance_id], stopped_s)
        self.migrations_started, self.migrations_done, self.migrations_aborted = engine.migrations

    def collect_columns(self) -> None:
        """``_collect`` at a run's end, with the outcomes as ``LazyOutcomes``: their columns read
        from the engine's; the ``RequestOutcome`` objects not built yet are built only when
        something reads them (a native vector env's episode end, whose summary reads only the
        columns). Where some outcomes are not the engine's own (a completion hook or a cascade
        recorded them), a plain ``_collect``."""
        engine = self._engine
        if engine is None or self._cascade is not None or len(self.outcomes) != self._engine_outcomes:
            self._collect()
            return
        self._collect_state()
        built, first = list(self.outcomes), self._engine_outcomes
        rest = partial(engine_outcomes, engine, self._row_requests, self.record_token_curves, first)
        self.outcomes = LazyOutcomes(engine_outcome_columns(engine, self.row_slo_targets()),
                                     (lambda: built + rest()) if built else rest)
        self._engine_outcomes = len(self.outcomes)

    def row_slo_targets(self) -> np.ndarray:
        """Each engine row's SLO targets (rows x 4: ``ttft_s``, ``tbt_s``, ``ttfat_s``, ``e2e_s``;
        NaN: none), read from its request once."""
        requests = self._row_requests
        if len(self._row_slo_targets) != len(requests):
            slos = requests.slo if isinstance(requests, (RequestColumns, RequestTable)) \
                else list(map(attrgetter("slo"), requests))
            self._row_slo_targets = slo_targets(slos)
        return self._row_slo_targets

    def _block_keys(self, requests: SequenceOf[Request]) -> tuple[list[int], list[int], list[int]]:
        """For prefix caching: each request's hash-block size (0: none), the offsets of its chained
        keys (``PrefixKeys.of_request``, interned as ``Cluster`` interns them; kept for the
        decisions) and the keys, flat."""
        if isinstance(requests, RequestTable) or set(map(attrgetter("block_hashes"), requests)) <= {None}:
            # a workload without hashes shares nothing
            self._chained_keys += [None] * len(requests)
            return [0] * len(requests), [0] * (len(requests) + 1), []
        sizes, offsets, keys = [], [0], []
        for request in requests:
            chained = self.prefix_keys.of_request(request)
            self._chained_keys.append(chained)
            if chained is not None:
                keys += chained
            sizes.append(0 if request.block_hashes is None else request.block_hashes.block_tokens)
            offsets.append(len(keys))
        return sizes, offsets, keys

    def _session_targets(self, requests: SequenceOf[Request]) -> list[int]:
        """For ``session_affinity``: the instance each request's session maps to (-1: none, the
        least loaded takes it). The routable instances cannot change during a compiled run, so
        the ring is read once."""
        if self.router_spec.name != "session_affinity":
            return []
        ids = self.routable_ids()
        owner: Callable[[int, list[int]], int] = self.router.owner  # type: ignore[union-attr]
        return [-1 if r.session_id is None or not ids else owner(r.session_id, ids) for r in requests]

    # ----------------------------------------------------------------- not compiled
    def add_arrival(self, request: Request) -> None:
        """``Cluster.add_arrival``: one more request on top of a submitted stream, arriving at
        ``request.arrival_s`` or now if that has passed (a closed-loop client's next request)."""
        if self._requests is not None:
            raise ValueError("add_arrival needs a stream of requests (submit an iterator, not a list)")
        validate_request(request)
        self._check_requests_kept()
        if request.block_hashes is not None and self._chained_keys:
            raise not_compiled(f"add_arrival() of request {request.request_id}, which carries block hashes")
        if request.model is not None and request.model not in self._engine_models:
            raise ValueError(f"request {request.request_id} needs {request.model}, which no instance serves")
        try:
            self._engine.add_arrival(request.request_id, float(request.arrival_s), request.prompt_tokens,
                                     request.output_tokens, request.reasoning_tokens, request.tier,
                                     -1 if request.model is None else self._engine_models.index(request.model))
        except TypeError:  # an integer field outside int64
            name_bad_integer({name: [getattr(request, name)] for name in INTEGER_COLUMNS}, [request])
            raise
        self._row_requests.append(request)
        if self._cascade is not None:
            self._cascade.add_row(len(self._row_requests) - 1, request)
        self._scheduled += 1

