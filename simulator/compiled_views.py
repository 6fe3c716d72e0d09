"""What Python sees of a compiled engine between its events (``simulator.compiled``): the
observation arrays as read-only numpy views of the engine's own tables, its instances, and the
handle of a request waiting for a decision.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np
from servegym_core import _core

from simulator.instance import Lifecycle
from simulator.queue_gate import check_gate
from simulator.request import Phase, Request
from simulator.sequence import Residency


class CoreArrays:
    """``simulator.instance_arrays.InstanceArrays``' read side over a compiled engine's tables:
    ``table`` (a row per instance, the same columns), ``tier_table``, ``tiers``, ``rows`` and
    ``layout_version``. The views are the engine's memory (no copy); they are fetched again only
    when a table grows (a new instance or tier)."""

    __slots__ = ("_engine", "_table", "_tier_table", "_shape")

    def __init__(self, engine: _core.Engine) -> None:
        self._engine = engine
        self._shape = (-1, -1)
        self._table = self._tier_table = np.zeros((0, 0), dtype=np.int64)

    def _views(self) -> None:
        """Fetch the views again when a table grew (an instance deployed, a new tier)."""
        engine = self._engine
        shape = (engine.num_instances, engine.arrays_tiers)
        if shape != self._shape:
            self._shape, self._table, self._tier_table = shape, engine.arrays_table, engine.arrays_tier_table

    @property
    def table(self) -> np.ndarray:
        self._views()
        return self._table

    @property
    def tier_table(self) -> np.ndarray:
        self._views()
        return self._tier_table

    @property
    def values(self) -> np.ndarray:
        """``table`` flat, row-major (``InstanceArrays.values``' layout, read-only)."""
        return self.table.reshape(-1)

    @property
    def tier_values(self) -> np.ndarray:
        """``tier_table`` flat, row-major (``InstanceArrays.tier_values``' layout, read-only)."""
        return self.tier_table.reshape(-1)

    @property
    def tiers(self) -> int:
        return self._engine.arrays_tiers

    @property
    def rows(self) -> int:
        return self._engine.num_instances

    @property
    def layout_version(self) -> int:
        return self._engine.arrays_layout_version


class CompiledClock:
    """``cluster.events`` of a compiled cluster: the engine's clock (``now_s``, brought up to it at
    every stop), and Python events scheduled in the engine (before the submit: at the submit, in
    the order they were scheduled), which stops for them."""

    __slots__ = ("now_s", "_schedule")

    def __init__(self, now_s: float, schedule: Callable[[float, Callable[[], None]], None]) -> None:
        self.now_s = now_s
        self._schedule = schedule

    def __len__(self) -> int:
        raise not_ported("the event queue's length")

    def schedule(self, time_s: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """``EventQueue.schedule``: the engine stops at ``time_s`` and Python runs ``callback(arg)``."""
        if time_s < self.now_s:
            raise ValueError(f"cannot schedule an event at {time_s} s, before the clock ({self.now_s} s)")
        self._schedule(time_s, lambda: callback(arg))


PYTHON_ENGINE_HINT = "not ported; the Python engine runs it: backend='python', or simulator.cluster.Cluster"


def not_ported(feature: str) -> ValueError:
    """The error for something the compiled engine does not run."""
    return ValueError(f"the compiled engine does not support {feature} ({PYTHON_ENGINE_HINT})")


class ArrivedSequences:
    """``Cluster.arrived_sequences`` of a compiled engine: a read-only list of the arrivals so far
    (rows are in arrival order), each read as a ``CompiledSequence`` when indexed."""

    __slots__ = ("_engine", "_sequence")

    def __init__(self, engine: _core.Engine, sequence: Callable[[int], CompiledSequence]) -> None:
        self._engine = engine
        self._sequence = sequence

    def __len__(self) -> int:
        return self._engine.arrived

    def __getitem__(self, index: int | slice) -> Any:
        rows = range(self._engine.arrived)[index]
        if isinstance(rows, int):
            return self._sequence(rows)
        return [self._sequence(row) for row in rows]

    def __iter__(self) -> Any:
        return iter(self[:])


class CompiledSequence:
    """A request inside a compiled engine, as a decision names it: its ``request`` and its row
    in the engine's request table."""

    __slots__ = ("_engine", "_outcome", "row", "request", "block_keys")

    def __init__(self, engine: _core.Engine, row: int, request: Request, block_keys: tuple[int, ...] | None,
                 outcome: Callable[[int, float], Any]) -> None:
        self._engine = engine
        self._outcome = outcome
        self.row = row
        self.request = request
        self.block_keys = block_keys
        """Its chained block keys (``PrefixKeys.of_request``; None without block hashes)."""

    @property
    def request_id(self) -> int:
        return self.request.request_id

    @property
    def tier(self) -> int:
        return self.request.tier

    @property
    def prompt_tokens(self) -> int:
        return self.request.prompt_tokens

    @property
    def prefill_target_tokens(self) -> int:
        return self.request.prompt_tokens + self.generated_tokens

    @property
    def residency(self) -> Residency:
        return RESIDENCIES[self._engine.request_state(self.row)[0]]

    @property
    def phase(self) -> Phase:
        return PHASES[self._engine.request_state(self.row)[1]]

    @property
    def instance_id(self) -> int:
        return self._engine.request_state(self.row)[2]

    @property
    def output_tokens(self) -> int:
        """As the context rule of its instance capped it."""
        return self._engine.request_state(self.row)[3]

    @property
    def reasoning_tokens(self) -> int:
        return self._engine.request_state(self.row)[4]

    @property
    def first_token_s(self) -> float:
        return self._engine.request_state(self.row)[5]

    @property
    def arrival_s(self) -> float:
        return self.request.arrival_s

    @property
    def in_decode(self) -> bool:
        """Running and between tokens: its next iteration is a decode step (``Sequence.in_decode``)."""
        generated, kv_tokens = self._engine.request_tokens(self.row)
        return generated > 0 and kv_tokens == self.request.prompt_tokens + generated - 1

    @property
    def pd_handoff(self) -> bool:
        return self._engine.request_state(self.row)[10]

    @property
    def demoted(self) -> bool:
        return self._engine.request_state(self.row)[11]

    @property
    def reasoning_end_s(self) -> float:
        return self._engine.request_state(self.row)[12]

    @property
    def first_answer_token_s(self) -> float:
        return self._engine.request_state(self.row)[13]

    @property
    def first_scheduled_s(self) -> float:
        return self._engine.request_state(self.row)[6]

    @property
    def preempted_s(self) -> float:
        return self._engine.request_state(self.row)[7]

    @property
    def num_preemptions(self) -> int:
        return self._engine.request_state(self.row)[8]

    @property
    def num_migrations(self) -> int:
        return self._engine.request_state(self.row)[9]

    def outcome(self, finish_s: float) -> Any:
        """``Sequence.outcome``: its ``RequestOutcome`` ending at ``finish_s``."""
        return self._outcome(self.row, finish_s)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"request {self.request.request_id} is in the compiled engine, which does not expose "
                             f"{name!r} of it ({PYTHON_ENGINE_HINT})")

    @property
    def generated_tokens(self) -> int:
        return self._engine.request_tokens(self.row)[0]

    @property
    def kv_tokens(self) -> int:
        return self._engine.request_tokens(self.row)[1]

    @property
    def block_tokens(self) -> int:
        """Tokens per hash block (0 without block hashes)."""
        return 0 if self.request.block_hashes is None else self.request.block_hashes.block_tokens

    def __repr__(self) -> str:
        return f"CompiledSequence(row={self.row}, request_id={self.request_id})"


RESIDENCIES = (Residency.QUEUED, Residency.RUNNING, Residency.SWAPPED, Residency.MOVING)
"""``Residency`` by the engine's code."""
PHASES = (Phase.WAITING, Phase.PREFILL, Phase.REASONING, Phase.ANSWERING, Phase.DONE, Phase.REJECTED)
"""``Phase`` by the engine's code."""
LIFECYCLES = (Lifecycle.STARTING, Lifecycle.SERVING, Lifecycle.DRAINING, Lifecycle.STOPPED)
"""``Lifecycle`` by the engine's code (``simulator.instance_arrays.LIFECYCLE_CODES``)."""


class CompiledKV:
    """An instance's KV pool in a compiled engine: its sizes, and the blocks in use and cached
    now (``simulator.kv_blocks.KVBlockManager``'s counters, read-only)."""

    __slots__ = ("_core", "total_blocks", "block_size", "watermark_blocks")

    def __init__(self, core_instance: Any, total_blocks: int, block_size: int, watermark_blocks: int) -> None:
        self._core = core_instance
        self.total_blocks, self.block_size, self.watermark_blocks = total_blocks, block_size, watermark_blocks

    @property
    def used_blocks(self) -> int:
        return self._core.kv_used_blocks

    @property
    def cached_blocks(self) -> int:
        return self._core.kv_cached_blocks

    @property
    def free_blocks(self) -> int:
        return self.total_blocks - self._core.kv_used_blocks

    @property
    def capacity_tokens(self) -> int:
        return self.total_blocks * self.block_size

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the compiled engine's KV pool does not expose {name!r} ({PYTHON_ENGINE_HINT})")

    def can_admit(self, blocks: int) -> bool:
        """``KVBlockManager.can_admit``: ``blocks`` more leave the watermark free."""
        return self.total_blocks - self._core.kv_used_blocks - blocks >= self.watermark_blocks


class CompiledPrefixCache:
    """An instance's prefix cache in a compiled engine: its counters (``query_tokens``,
    ``hit_tokens``, ``host_hit_tokens``, ``entry_blocks``, ...) and ``match`` of a request
    waiting for a decision (``simulator.prefix_cache.PrefixCache.match``), from the engine."""

    __slots__ = ("_core", "_counters")

    def __init__(self, core_instance: Any) -> None:
        self._core = core_instance
        self._counters = core_instance.prefix_cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._counters, name)

    def match(self, seq: CompiledSequence) -> tuple[int, int, int]:
        return self._core.prefix_match(seq.row)


class CompiledInstance:
    """An instance of a compiled engine as Python code reads it between events: what its config
    fixed (``STATIC``, from the ``Instance`` deployed in Python), and from the engine its
    lifecycle (set through it by ``drain``), counters, KV pool (``CompiledKV``), prefix cache
    (``CompiledPrefixCache``), the queries the observations ask (``num_requests``,
    ``unsynced_kv_blocks``, ``kv_used_blocks_now``, ``head_of_line_demand_blocks``,
    ``request_counts``, ``answering_behind_pace``, ``migration_candidate``) and its queues as lists
    of ``CompiledSequence`` handles made when read. Any other live attribute raises."""

    STATIC = frozenset({
        "instance_id", "config", "settings", "role", "gpu", "model", "latency", "scheduler",
        "preemption", "max_batch_size", "max_batched_tokens", "swap_s_per_token", "max_request_tokens",
    })
    """The attributes read from the deployed ``Instance``: fixed for the engine's run."""

    __slots__ = ("_instance", "_engine", "_sequence", "_core", "kv", "prefix_cache")

    def __init__(self, instance: Any, engine: _core.Engine, sequence: Callable[[int], CompiledSequence]) -> None:
        """``sequence(row)``: the handle of a request row (``CompiledCluster``'s)."""
        self._instance = instance
        self._engine = engine
        self._sequence = sequence
        self._core = core_instance = engine.instance(instance.instance_id)
        kv = instance.kv
        self.kv = CompiledKV(core_instance, kv.total_blocks, kv.block_size, kv.watermark_blocks)
        self.prefix_cache = None if core_instance.prefix_cache is None else CompiledPrefixCache(core_instance)
        """Its prefix cache (``CompiledPrefixCache``), or None without prefix caching."""

    def __getattr__(self, name: str) -> Any:
        if name in CompiledInstance.STATIC:
            return getattr(self._instance, name)
        raise AttributeError(f"instance {self._instance.instance_id} runs in the compiled engine, which does not "
                             f"expose {name!r} ({PYTHON_ENGINE_HINT})")

    @property
    def lifecycle(self) -> Lifecycle:
        return LIFECYCLES[self._core.lifecycle_code]

    @lifecycle.setter
    def lifecycle(self, value: Lifecycle) -> None:
        self._engine.set_lifecycle(self._instance.instance_id, LIFECYCLES.index(value))

    @property
    def busy_time_s(self) -> float:
        return self._core.busy_time_s

    @property
    def iterations(self) -> int:
        return self._core.iterations

    @property
    def context_truncated(self) -> int:
        return self._core.context_truncated

    @property
    def num_requests(self) -> int:
        return self._core.num_requests

    @property
    def busy(self) -> bool:
        return self._core.busy

    @property
    def min_queue_length(self) -> int:
        return self._core.min_queue_length

    def set_min_queue_length(self, length: int, max_wait_s: float) -> None:
        """``Instance.set_min_queue_length`` (CascadeServe's queue gate), in the engine."""
        check_gate(length, max_wait_s)
        self._engine.set_min_queue_length(self._instance.instance_id, length, float(max_wait_s))

    @property
    def waiting(self) -> list[CompiledSequence]:
        """Its waiting requests, in queue order, as handles (read-only: a list made now)."""
        return [self._sequence(row) for row in self._core.waiting]

    @property
    def running(self) -> list[CompiledSequence]:
        return [self._sequence(row) for row in self._core.running]

    @property
    def swapped(self) -> list[CompiledSequence]:
        return [self._sequence(row) for row in self._core.swapped]

    def sequences(self) -> list[CompiledSequence]:
        """``Instance.sequences``: running, then swapped, then waiting."""
        return self.running + self.swapped + self.waiting

    def sync(self) -> None:
        self._core.sync()

    def unsynced_kv_blocks(self) -> int:
        return self._core.unsynced_kv_blocks()

    def kv_used_blocks_now(self) -> int:
        return self._core.kv_used_blocks + self._core.unsynced_kv_blocks()

    def head_of_line_demand_blocks(self) -> int:
        return self._core.head_of_line_demand_blocks()

    def migration_candidate(self, excluded: Collection[int] = ()) -> CompiledSequence | None:
        row = self._core.migration_candidate(list(excluded))
        return None if row < 0 else self._sequence(row)

    def request_counts(self, overdue_before_s: float, fresh_tokens: int) -> tuple[int, int, int, int, int]:
        return self._core.request_counts(overdue_before_s, fresh_tokens)

    def answering_behind_pace(self, tpot_target_s: float) -> bool:
        return self._core.answering_behind_pace(tpot_target_s)
