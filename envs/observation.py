"""Per-instance observation features shared by every environment, built from the arrays the
simulator keeps (``simulator.instance_arrays``) with vector operations.

Each instance slot (``max_instances`` rows) gets one column per feature of
``instance_fields(num_tiers)``, all float32 in [-1, 1] (names, units and encodings in
``envs.schema`` terms; each env's docstring shows the table). Counts and sizes are encoded
with ``x / (x + scale)`` (bounded without clipping; 0.5 means "x equals scale"); freeness,
which can be negative or infinite, with ``x / (|x| + scale)``. An empty slot is all zeros. An
encoded count saturates under a burst (200 and 250 waiting requests are 0.926 and 0.940), so
the load is also given scale-free: each instance's share of the cluster's requests and of
each tier's requests.

On the compiled engine the matrix is written by the core (``servegym_core``'s
``InstanceObservation``, ``core/src/instance_observation.cpp``) in one call per step, the same
float32 values bit for bit; the numpy path below is the reference and serves the Python engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from servegym_core import _core

from envs.schema import IDENTITY, ColumnEncoder, Field, linear, ratio, signed_ratio
from simulator.cluster import Cluster
from simulator.headroom import default_headroom_fractions
from simulator.instance import Instance
from simulator.instance_arrays import (
    BLOCK_SIZE,
    KV_TOTAL_BLOCKS,
    KV_USED_BLOCKS,
    LIFECYCLE,
    LIFECYCLE_CODES,
    PENDING_PREFILL_TOKENS,
    RUNNING,
    SWAPPED,
    SWAPPED_KV_BLOCKS,
    WAITING,
    WAITING_PREFILL_BLOCKS,
    WATERMARK_BLOCKS,
    InstanceArrays,
)
from simulator.sequence import Sequence as SimSequence

COUNT_SCALE = 16.0  # requests
TOKEN_SCALE = 4096.0  # tokens
FREENESS_SCALE = 64.0  # blocks per request (Llumnix's migrate-out threshold is 3, scale-up 10)
SERVICE_TIME_SCALE_S = 10.0  # seconds
KV_BLOCKS_SCALE = 1000.0  # blocks (the encoding scale of ``kv_blocks_per_request``)
KV_TOKENS_SCALE = 1e6  # tokens (the encoding scale of ``kv_capacity`` and ``kv_footprint``)
SERVICE_TIME_EWMA_WEIGHT = 0.6  # weight of the newest completion (andersvestrum/llumnix_sim INFaaS config)
STARTING, SERVING, DRAINING, STOPPED = (LIFECYCLE_CODES[state] for state in ("starting", "serving", "draining", "stopped"))


def flag_field(name: str, description: str) -> Field:
    return Field(name, "flag", IDENTITY, description)


def count_field(name: str, description: str) -> Field:
    return Field(name, "requests", ratio(COUNT_SCALE), description, integer=True)


INSTANCE_FIELDS = (
    flag_field("present", "a live (not stopped) instance is in the slot"),
    flag_field("starting", "loading its weights"),
    flag_field("serving", "serving"),
    flag_field("draining", "draining: no new requests, stops when empty"),
    flag_field("role_aggregated", "runs prefill and decode"),
    flag_field("role_prefill", "prefill-only (disaggregated)"),
    flag_field("role_decode", "decode-only (disaggregated)"),
    Field("gpu_tflops", "TFLOP/s", ratio(1000.0), "fp16 TFLOP/s of the instance's GPUs"),
    Field("gpu_bandwidth", "GB/s", ratio(10000.0), "memory bandwidth of its GPUs"),
    Field("cost_rate", "USD/h", ratio(10.0), "price of its GPUs"),
    count_field("waiting", "requests queued, holding no KV"),
    count_field("running", "requests in the batch"),
    count_field("swapped", "requests preempted to host memory"),
    Field("kv_used_fraction", "fraction", IDENTITY, "KV blocks in use now over all blocks"),
    Field("kv_capacity", "tokens", ratio(KV_TOKENS_SCALE), "KV capacity"),
    Field("freeness", "blocks/request", signed_ratio(FREENESS_SCALE),
          "Llumnix dispatch freeness (``freeness``); +∞ when empty"),
    count_field("reasoning", "requests before ``</think>``"),
    count_field("answering", "requests past ``</think>`` (or any started request without reasoning)"),
    count_field("fresh_answering", "answering requests within their first 500 answer tokens"),
    flag_field("pacer_behind", "the token pacer's SLO flag (PASCAL Alg. 1); 0 without a TPOT target"),
    Field("pending_prefill_tokens", "tokens", ratio(TOKEN_SCALE), "prompt tokens the waiting requests still need"),
    Field("kv_footprint", "tokens", ratio(KV_TOKENS_SCALE),
          "KV on the GPU plus swapped requests' KV in host memory (PASCAL Alg. 1 m_i)"),
    count_field("demoted", "reasoning requests demoted to the low-priority queue (PASCAL §IV-C)"),
    Field("service_time_ewma", "s", ratio(SERVICE_TIME_SCALE_S),
          "EWMA of completed requests' service time here (INFaaS, Llumnix-K §3.7)"),
    count_field("answers_overdue", "requests past ``</think>``, queued or swapped, no answer token for over one TPOT target"),
    Field("freeness_full", "blocks/request", signed_ratio(FREENESS_SCALE),
          "K-tier F_full with the paper's default headroom (Llumnix-K eq. 1-4)"),
    Field("freeness_normal", "blocks/request", signed_ratio(FREENESS_SCALE), "F_normal: F without headroom (eq. 1)"),
    Field("kv_blocks_per_request", "blocks", ratio(KV_BLOCKS_SCALE), "M / B of eq. 1; +∞ (encoded 1) when B = 0"),
)
BASE_FEATURES = tuple(f.name for f in INSTANCE_FIELDS)
PREFIX_CACHE_FIELDS = (
    Field("cache_occupancy", "fraction", IDENTITY,
          "KV blocks holding cached prefixes (held by requests or free) over all blocks (``simulator.prefix_cache``)"),
    Field("prefix_hit_rate", "fraction", IDENTITY,
          "prompt tokens found cached (GPU or host tier) over those its admissions asked for so far; 0 before any"),
)
PREFIX_MATCH_FIELD = Field(
    "prefix_match_tokens", "tokens", ratio(TOKEN_SCALE),
    "the routed request's prompt tokens this instance holds cached, GPU then host tier (what admitting it now "
    "would not recompute, at most prompt - 1); 0 for no request or a phase change")


def arrived_field(episode_requests: int) -> Field:
    """Requests arrived so far, encoded as the episode's progress (arrived / E)."""
    return Field("arrived", "requests", linear(episode_requests), "requests arrived so far (episode progress)",
                 integer=True, scale_text="E")


def cost_rate_field() -> Field:
    return Field("cost_rate", "USD/h", ratio(100.0), "what the cluster's GPUs cost per hour now")


def instance_fields(num_tiers: int, prefix_caching: bool = False, prefix_match: bool = False) -> tuple[Field, ...]:
    """Every instance column: the base features, the per-tier request counts and the shares;
    with ``prefix_caching`` (a scenario whose instances cache prefixes) the cache's occupancy
    and hit rate, and with ``prefix_match`` too (Routing-v0) the routed request's cached prefix."""
    tiers = tuple(count_field(f"tier_{k}", f"requests of tier {k}" + (" or lower" if k == num_tiers - 1 and k else ""))
                  for k in range(num_tiers))
    shares = (Field("request_share", "fraction", IDENTITY, "this instance's share of the requests in the cluster"),) + tuple(
        Field(f"tier_{k}_share", "fraction", IDENTITY, f"its share of the tier-{k} requests") for k in range(num_tiers)
    )
    cache = (PREFIX_CACHE_FIELDS + ((PREFIX_MATCH_FIELD,) if prefix_match else ())) if prefix_caching else ()
    return INSTANCE_FIELDS + tiers + shares + cache


def instance_fields_doc(prefix_match: bool = False) -> tuple[Field, ...]:
    """The instance columns for documentation: one entry per group of K per-tier columns, then
    the prefix-cache columns of scenarios that cache prefixes."""
    cache = PREFIX_CACHE_FIELDS + ((PREFIX_MATCH_FIELD,) if prefix_match else ())
    cache = tuple(Field(f.name, f.unit, f.encoding, f.description + " (scenarios with prefix caching)",
                        integer=f.integer) for f in cache)
    return INSTANCE_FIELDS + (
        Field("tier_k", "requests", ratio(COUNT_SCALE), "requests of tier k, k < K (the last: that tier or lower)",
              integer=True, size_text="K"),
        Field("request_share", "fraction", IDENTITY, "this instance's share of the requests in the cluster"),
        Field("tier_k_share", "fraction", IDENTITY, "its share of the tier-k requests, k < K", size_text="K"),
    ) + cache


def squash(x: float, scale: float) -> float:
    """The ``ratio`` encoding of one value: x / (x + scale)."""
    return x / (x + scale)


def signed_squash(x: float, scale: float) -> float:
    """The ``signed_ratio`` encoding of one value: x / (|x| + scale), ±∞ → ±1."""
    if math.isinf(x):
        return 1.0 if x > 0 else -1.0
    return x / (abs(x) + scale)


def freeness(instance: Instance) -> float:
    """Llumnix dispatch freeness in KV blocks per request (AlibabaPAI/llumnix): (free blocks −
    watermark − blocks wanted by every waiting request) / number of requests; an empty
    instance is infinitely free. Free blocks are counted at this moment."""
    requests = instance.num_requests
    if requests == 0:
        return math.inf
    kv = instance.kv
    block_size = kv.block_size
    wanted = sum(-(-s.prefill_target_tokens // block_size) for s in instance.waiting)
    free = kv.total_blocks - instance.kv_used_blocks_now()
    return (free - kv.watermark_blocks - wanted) / requests


class InstanceLoad:
    """The load of some instances (``ids``) at this moment, from one gather of the cluster's
    arrays: queue lengths, KV in use (counting decode iterations finished but not applied yet),
    per-tier requests (the last tier counting every higher one), the batch B and head-of-line
    demand of eq. 1-2 (``simulator.headroom``), and the freeness they give."""

    def __init__(self, cluster: Cluster, ids: np.ndarray, num_tiers: int) -> None:
        arrays = cluster.arrays
        if arrays is None:
            raise ValueError("the cluster keeps no instance arrays: build it with track_arrays=True")
        instances = cluster.instances
        self.ids = ids
        self.table = table = arrays.table[ids]
        self.lifecycle = table[:, LIFECYCLE]
        self.total_blocks = table[:, KV_TOTAL_BLOCKS]
        self.block_size = table[:, BLOCK_SIZE]
        waiting, running, swapped = table[:, WAITING], table[:, RUNNING], table[:, SWAPPED]
        queued_requests = waiting + swapped
        self.requests = queued_requests + running
        self.batch = running + (queued_requests > 0)
        self.occupied = self.batch > 0  # B > 0 exactly when the instance holds a request
        id_list = ids.tolist()
        unsynced = cluster.unsynced_kv_blocks(id_list)
        self.used_blocks = table[:, KV_USED_BLOCKS] + unsynced if unsynced.any() else table[:, KV_USED_BLOCKS]
        self.head_of_line_blocks = np.zeros(len(id_list), dtype=np.int64)
        for row in np.flatnonzero(queued_requests).tolist():
            self.head_of_line_blocks[row] = instances[id_list[row]].head_of_line_demand_blocks()
        tiers = arrays.tier_table[ids]
        self.beyond_tiers = tiers.shape[1] > num_tiers and bool(tiers[:, num_tiers:].any())
        if tiers.shape[1] < num_tiers:
            tiers = np.pad(tiers, ((0, 0), (0, num_tiers - tiers.shape[1])))
        elif tiers.shape[1] > num_tiers:
            tiers = np.concatenate([tiers[:, :num_tiers - 1], tiers[:, num_tiers - 1:].sum(axis=1, keepdims=True)], axis=1)
        self.tier_requests = tiers

    @classmethod
    def from_kernel(cls, kernel: _core.InstanceObservation) -> InstanceLoad:
        """The load the core's ``InstanceObservation`` gathered at its last fill (the same numbers
        ``__init__`` gathers, taken before the fill synced any instance)."""
        load = cls.__new__(cls)
        load.ids = kernel.ids
        load.table = table = kernel.table
        load.lifecycle = table[:, LIFECYCLE]
        load.total_blocks = table[:, KV_TOTAL_BLOCKS]
        load.block_size = table[:, BLOCK_SIZE]
        queued_requests = table[:, WAITING] + table[:, SWAPPED]
        load.requests = queued_requests + table[:, RUNNING]
        load.batch = table[:, RUNNING] + (queued_requests > 0)
        load.occupied = load.batch > 0
        load.used_blocks = kernel.used_blocks
        load.head_of_line_blocks = kernel.head_of_line_blocks
        load.beyond_tiers = kernel.beyond_tiers
        load.tier_requests = kernel.tier_requests
        return load

    def freeness(self) -> np.ndarray:
        """Llumnix dispatch freeness (``freeness``): (free − watermark − Σ waiting blocks) /
        requests, +∞ with no request."""
        table = self.table
        spare = (self.total_blocks - self.used_blocks) - table[:, WATERMARK_BLOCKS] - table[:, WAITING_PREFILL_BLOCKS]
        return np.divide(spare, self.requests, out=np.full(len(self.ids), np.inf), where=self.occupied)

    def _present_fraction(self, headroom_fractions: np.ndarray) -> np.ndarray:
        """Σ h_p over the tiers present on each instance, added in tier order."""
        present = np.zeros(len(self.ids))
        for tier, fraction in enumerate(headroom_fractions.tolist()):
            present = present + np.where(self.tier_requests[:, tier] > 0, fraction, 0.0)
        return present

    def _freeness(self, usage: np.ndarray) -> np.ndarray:
        value = np.divide(self.total_blocks - usage, self.batch, out=np.full(len(self.ids), np.inf), where=self.occupied)
        value[self.lifecycle == DRAINING] = -np.inf
        return value

    def freeness_normal(self) -> np.ndarray:
        """F_normal (``simulator.headroom.freeness_normal``): −∞ draining, +∞ with B = 0."""
        return self._freeness((self.used_blocks + self.head_of_line_blocks).astype(np.float64))

    def freeness_full(self, headroom_fractions: np.ndarray) -> np.ndarray:
        """F_full (``simulator.headroom.freeness_full``) under ``headroom_fractions``: each tier
        present charges M · h_p once."""
        if self.beyond_tiers:
            raise ValueError(f"requests of a tier beyond the {len(headroom_fractions)} headroom fractions")
        usage = (self.used_blocks + self.head_of_line_blocks).astype(np.float64)
        if not any(headroom_fractions.tolist()):  # no budget: usage + M · 0 is usage
            return self._freeness(usage)
        return self._freeness(usage + self.total_blocks * self._present_fraction(headroom_fractions))

    def headroom_charge(self, freeness_normal: np.ndarray, headroom_fractions: np.ndarray) -> np.ndarray:
        """F_full from F_normal as the observation writes it: F_normal − M · Σ_present h_p / B
        where B > 0 and F_normal is finite."""
        if not any(headroom_fractions.tolist()):  # no budget: F_normal − 0
            return freeness_normal.copy()
        charged = np.isfinite(freeness_normal) & self.occupied
        charge = np.divide(self.total_blocks * self._present_fraction(headroom_fractions), self.batch,
                           out=np.zeros(len(self.ids)), where=charged)
        return np.subtract(freeness_normal, charge, out=freeness_normal.copy(), where=charged)


REQUEST_COUNT_FIELDS = ("reasoning", "answering", "fresh_answering", "demoted", "answers_overdue")
"""The per-request columns, in the order ``Instance.request_counts`` gives them."""


class InstanceFeatures:
    """Fills the ``(max_instances, n_features)`` matrix from a cluster's arrays: on a compiled
    cluster through the core's kernel (module docstring), on the Python engine with numpy."""

    def __init__(
        self,
        max_instances: int,
        num_tiers: int,
        tpot_target_s: float | None,
        reasoning: bool,
        fresh_quantum_tokens: int = 500,
        prefix_caching: bool = False,
        prefix_match: bool = False,
        use_kernel: bool = True,
    ) -> None:
        """``reasoning`` (or several tiers) turns on the per-request counts; without them
        ``answering`` is simply the running + swapped requests and ``tier_0`` all requests.
        ``prefix_caching`` / ``prefix_match`` add the prefix-cache columns (``instance_fields``).
        ``use_kernel=False`` fills with numpy on compiled clusters too (the reference the
        kernel is tested against)."""
        self.per_request_detail = reasoning or num_tiers > 1
        self.use_kernel = use_kernel
        self.max_instances = max_instances
        self.num_tiers = num_tiers
        self.prefix_caching = prefix_caching
        self.prefix_match = prefix_caching and prefix_match
        self.fields = instance_fields(num_tiers, prefix_caching, prefix_match)
        self.names = tuple(f.name for f in self.fields)
        self.column = {name: i for i, name in enumerate(self.names)}
        self.default_headroom = default_headroom_fractions(num_tiers)
        self.tpot_target_s = tpot_target_s
        self.fresh_quantum_tokens = fresh_quantum_tokens
        self.matrix = np.zeros((max_instances, len(self.names)), dtype=np.float32)
        self._encoder = ColumnEncoder([f.encoding for f in self.fields])
        self._load: InstanceLoad | None = None  # the last fill's load (``load``), made when read after a kernel fill
        self._slots: np.ndarray | None = np.zeros(0, dtype=np.int64)  # ``slots``; None: read it from the kernel
        self._kernel: _core.InstanceObservation | None = None  # the core's matrix, for the cluster in ``_cluster``
        self._kernel_filled = False  # the last fill was the kernel's: ``load`` comes from it
        self._kernel_owns = False  # the kernel holds ``_cluster``'s service-time EWMAs
        self._kernel_static = 0  # instances whose static features the kernel holds
        self._kernel_slots: tuple[tuple[int | None, ...], np.ndarray] | None = None  # slots and their int32 array
        self._cluster: Cluster | None = None  # the caches below belong to this cluster
        self._static = np.zeros((6, 0))
        self._service_seen = 0
        self._service_ewma_s = np.zeros(0)
        self._service_measured = np.zeros(0, dtype=bool)
        self._layout_key: tuple[int, tuple[int | None, ...]] | None = None  # layout version and slots of _layout
        self._layout: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # ``_slot_layout``'s answer

    @property
    def load(self) -> InstanceLoad | None:
        """The last fill's load, one row per live slot (``slots``); None before any fill."""
        if self._kernel_filled and self._load is None:
            self._load = InstanceLoad.from_kernel(self._kernel)
        return self._load

    @property
    def slots(self) -> np.ndarray:
        """The slots the last fill found a live instance in (read-only)."""
        if self._slots is None:
            self._slots = self._kernel.rows
            self._slots.flags.writeable = False
        return self._slots

    def freeness_full(self, headroom_fractions: np.ndarray) -> np.ndarray:
        """``load.freeness_full(headroom_fractions)``: F_full of the last fill's live slots (the
        kernel's numbers after a kernel fill, without building ``load``)."""
        if self._kernel_filled:
            return self._kernel.freeness_full(headroom_fractions.tolist())
        if self._load is None:
            raise ValueError("freeness_full() before any fill")
        return self._load.freeness_full(headroom_fractions)

    def observation_spec(self, spec: _core.ObservationSpec) -> _core.ObservationSpec:
        """Write what the core's kernel needs of these features into ``spec`` (an
        ``ObservationSpec``, or a ``RoutingSpec`` built on one) and return it."""
        spec.max_instances = self.max_instances
        spec.num_tiers = self.num_tiers
        spec.per_request_detail = self.per_request_detail
        spec.tpot_target_s = math.nan if self.tpot_target_s is None else float(self.tpot_target_s)
        spec.fresh_quantum_tokens = self.fresh_quantum_tokens
        spec.prefix_caching = self.prefix_caching
        spec.prefix_match = self.prefix_match
        spec.service_time_ewma_weight = SERVICE_TIME_EWMA_WEIGHT
        spec.headroom_fractions = self.default_headroom.tolist()
        spec.instance_k, spec.instance_c = (a.tolist() for a in self._encoder.coefficients)
        return spec

    @property
    def static_features(self) -> np.ndarray:
        """Role flags (aggregated, prefill, decode) and hardware (TFLOP/s, GB/s, USD/h) of every
        instance the last fill saw, 6 x instances (read them, do not write)."""
        return self._static

    def fill(self, cluster: Cluster, slots: Sequence[int | None] | None = None, request: SimSequence | None = None,
             ) -> np.ndarray:
        """Row k describes instance ``slots[k]`` (an instance id, or None for an empty slot);
        by default instance k of the cluster. Stopped instances leave their row empty.
        ``request`` is the one being routed (its cached prefix per instance, with ``prefix_match``)."""
        arrays = cluster.arrays
        if arrays is None:
            raise ValueError("the cluster keeps no instance arrays: build it with track_arrays=True")
        if slots is None:
            slots = list(cluster.instances)
        if len(slots) > self.max_instances:
            raise ValueError(f"{len(slots)} instance slots asked, more than the {self.max_instances} available")
        if cluster is not self._cluster:
            self._cluster, self._service_seen = cluster, 0
            self._static, self._service_ewma_s = np.zeros((6, 0)), np.zeros(0)
            self._service_measured = np.zeros(0, dtype=bool)
            self._layout_key = None
            if self._kernel is not None:
                self._kernel.reset()
            self._kernel_owns, self._kernel_static = False, 0
        self._grow_caches(cluster)
        engine = self._kernel_engine(cluster)
        if engine is not None:
            return self._kernel_fill(engine, slots, request)
        self._kernel_filled = False
        self._update_service_time(cluster)
        layout_key = (arrays.layout_version, tuple(slots))
        if self._layout is None or layout_key != self._layout_key:
            self._layout_key, self._layout = layout_key, self._slot_layout(arrays, slots)
        rows, ids, template = self._layout
        load = InstanceLoad(cluster, ids, self.num_tiers)
        table, column, k = load.table, self.column, self.num_tiers
        raw = template.copy()  # one row per feature, one column per live slot; the fixed rows filled
        raw[column["waiting"]:column["swapped"] + 1] = table[:, WAITING:SWAPPED + 1].T
        raw[column["kv_used_fraction"]] = load.used_blocks / load.total_blocks
        raw[column["freeness"]] = load.freeness()
        self._per_request(cluster, ids, raw, table)
        raw[column["pending_prefill_tokens"]] = table[:, PENDING_PREFILL_TOKENS]
        raw[column["kv_footprint"]] = load.block_size * (load.used_blocks + table[:, SWAPPED_KV_BLOCKS])
        raw[column["service_time_ewma"]] = self._service_ewma_s[ids]
        f_normal = load.freeness_normal()
        raw[column["freeness_full"]] = load.headroom_charge(f_normal, self.default_headroom)
        raw[column["freeness_normal"]] = f_normal
        np.divide(load.total_blocks, load.batch, out=raw[column["kv_blocks_per_request"]], where=load.occupied)
        tiers = column["tier_0"]
        raw[tiers:tiers + k] = load.tier_requests.T
        requests = raw[column["request_share"]:column["request_share"] + 1 + k]  # the shares: counts, then divided
        requests[0] = load.requests
        requests[1:] = load.tier_requests.T
        totals = np.add.reduce(requests, axis=1, keepdims=True)
        np.divide(requests, totals, out=requests, where=totals > 0)
        if self.prefix_caching:
            self._prefix_cache(cluster, ids, raw, load.total_blocks, request)
        self._load, self._slots = load, rows
        matrix = self.matrix
        matrix.fill(0.0)
        count = len(rows)
        if count and rows[-1] == count - 1:  # slots 0 .. m − 1, as in deployment order
            self._encoder.encode(raw.T, matrix[:count])
        elif count:
            matrix[rows] = self._encoder.encode(raw.T, np.empty((count, len(self.names)), dtype=np.float32))
        return matrix

    def _kernel_engine(self, cluster: Cluster) -> _core.Engine | None:
        """The compiled engine whose matrix the core's kernel writes, or None for the numpy path:
        a cluster on the Python engine (or not submitted yet), or one whose outcomes a Python
        completion hook records (the kernel folds the engine's outcome log into the EWMAs)."""
        engine = getattr(cluster, "engine", None) if self.use_kernel else None
        if engine is None or (not self._kernel_owns and (cluster.python_completion_hook() is not None or self._service_seen)):
            return None
        if cluster.python_completion_hook() is not None:
            raise ValueError("a Python completion hook was set after the observation kernel took over the cluster")
        if len(cluster.outcomes) != engine.num_outcomes:
            raise ValueError(f"{len(cluster.outcomes)} outcomes in the cluster, {engine.num_outcomes} in the engine's "
                             "log: the observation kernel's service-time EWMAs would differ")
        return engine

    def _kernel_fill(self, engine: _core.Engine, slots: Sequence[int | None], request: SimSequence | None,
                     ) -> np.ndarray:
        """``fill`` by the core's kernel, straight into ``matrix``."""
        kernel = self._kernel
        if kernel is None:
            kernel = self._kernel = _core.InstanceObservation(self.observation_spec(_core.ObservationSpec()))
        known = self._static.shape[1]
        if self._kernel_static != known:
            kernel.set_static(self._static.T.ravel().tolist())
            self._kernel_static = known
        key = tuple(slots)
        if self._kernel_slots is None or self._kernel_slots[0] != key:
            self._kernel_slots = key, np.array([-1 if i is None else i for i in key], dtype=np.int32)
        row = request.row if self.prefix_match and request is not None else -1
        kernel.fill(engine, self._kernel_slots[1], row, self.matrix)
        self._kernel_owns = self._kernel_filled = True
        self._load, self._slots = None, None
        return self.matrix

    def _prefix_cache(self, cluster: Cluster, ids: np.ndarray, raw: np.ndarray, total_blocks: np.ndarray,
                      request: SimSequence | None) -> None:
        """``cache_occupancy``, ``prefix_hit_rate`` and (with ``prefix_match``) ``prefix_match_tokens`` into ``raw``."""
        column = self.column
        id_list = ids.tolist()
        entry, query, hit, host_hit = cluster.prefix_cache_counters(id_list).T
        cached = entry >= 0
        np.divide(entry, total_blocks, out=raw[column["cache_occupancy"]], where=cached)
        np.divide(hit + host_hit, query, out=raw[column["prefix_hit_rate"]], where=cached & (query > 0))
        if self.prefix_match and request is not None and request.block_keys is not None and not request.kv_tokens:
            instances = cluster.instances
            for row in np.flatnonzero(cached).tolist():
                gpu, host, _ = instances[id_list[row]].prefix_cache.match(request)
                raw[column["prefix_match_tokens"], row] = (gpu + host) * request.block_tokens

    def _slot_layout(self, arrays: InstanceArrays, slots: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What stays fixed until an instance is added or changes lifecycle, or the slots change:
        the slots holding a live instance, their ids, the raw features that depend on nothing
        else (presence, lifecycle, role, hardware, KV capacity; ``kv_blocks_per_request`` +∞,
        its value with B = 0); the arrays are read-only, shared by every fill until then."""
        lifecycle = arrays.table[:, LIFECYCLE].tolist()
        rows = np.array([slot for slot, i in enumerate(slots) if i is not None and lifecycle[i] != STOPPED], dtype=np.int64)
        ids = np.array([slots[slot] for slot in rows.tolist()], dtype=np.int64)
        table, column = arrays.table[ids], self.column
        states = table[:, LIFECYCLE]
        template = np.zeros((len(self.names), len(ids)))
        template[column["present"]] = 1.0
        template[column["starting"]] = states == STARTING
        template[column["serving"]] = states == SERVING
        template[column["draining"]] = states == DRAINING
        template[column["role_aggregated"]:column["cost_rate"] + 1] = self._static[:, ids]
        template[column["kv_capacity"]] = table[:, KV_TOTAL_BLOCKS] * table[:, BLOCK_SIZE]
        template[column["kv_blocks_per_request"]] = np.inf
        rows.flags.writeable = ids.flags.writeable = template.flags.writeable = False
        return rows, ids, template

    def _grow_caches(self, cluster: Cluster) -> None:
        """Static features (role, hardware) and service-time EWMAs for instances new since the last fill."""
        known = self._static.shape[1]
        count = len(cluster.instances)
        if count == known:
            return
        static = np.zeros((6, count))
        static[:, :known] = self._static
        for instance_id in range(known, count):
            instance = cluster.instances[instance_id]
            gpu, n, role = instance.gpu, instance.config.num_gpus, instance.role.value
            static[:, instance_id] = [
                role == "aggregated", role == "prefill", role == "decode",
                gpu.fp16_tflops * n, gpu.mem_bandwidth_gbps * n, gpu.price_per_hour_usd * n,
            ]
        self._static = static
        self._service_ewma_s = np.concatenate([self._service_ewma_s, np.zeros(count - known)])
        self._service_measured = np.concatenate([self._service_measured, np.zeros(count - known, dtype=bool)])

    def _update_service_time(self, cluster: Cluster) -> None:
        """Fold the requests completed since the last call into each instance's EWMA of service
        time (first scheduled to finish, as INFaaS's latency monitor in andersvestrum/llumnix_sim
        measures it): ewma = w * newest + (1 - w) * ewma, the first completion taken as is."""
        ewma, measured = self._service_ewma_s, self._service_measured
        weight = SERVICE_TIME_EWMA_WEIGHT
        for outcome in cluster.outcomes[self._service_seen:]:
            if outcome.completed:
                service_s = outcome.finish_s - outcome.first_scheduled_s
                instance_id = outcome.instance_id
                if not measured[instance_id]:
                    ewma[instance_id] = service_s
                    measured[instance_id] = True
                else:
                    ewma[instance_id] = weight * service_s + (1.0 - weight) * ewma[instance_id]
        self._service_seen = len(cluster.outcomes)

    def _per_request(self, cluster: Cluster, ids: np.ndarray, raw: np.ndarray, table: np.ndarray) -> None:
        """``reasoning``, ``answering``, ``fresh_answering``, ``demoted``, ``answers_overdue`` and
        ``pacer_behind`` into ``raw`` (one row per feature): per-request counts where the
        scenario needs them (reasoning or several tiers), else ``answering`` = running + swapped."""
        column = self.column
        if not self.per_request_detail:
            raw[column["answering"]] = table[:, RUNNING] + table[:, SWAPPED]
        else:
            instances = cluster.instances
            now_s = cluster.events.now_s
            overdue_before_s = now_s - self.tpot_target_s if self.tpot_target_s is not None else -math.inf
            fresh_tokens = self.fresh_quantum_tokens
            for row, instance_id in enumerate(ids.tolist()):
                counts = instances[instance_id].request_counts(overdue_before_s, fresh_tokens)
                for name, count in zip(REQUEST_COUNT_FIELDS, counts):
                    raw[column[name], row] = count
        if self.tpot_target_s is not None:
            instances = cluster.instances
            for row, instance_id in enumerate(ids.tolist()):
                raw[column["pacer_behind"], row] = instances[instance_id].answering_behind_pace(self.tpot_target_s)
