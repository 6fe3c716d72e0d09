"""servegym/Tier-v0: set the per-tier headroom budgets of K-tier Llumnix dispatch."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv, boolean
from envs.observation import COUNT_SCALE, arrived_field, count_field, instance_fields_doc
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
from simulator.headroom import check_headroom_fractions, default_headroom_fractions
from simulator.outcome import RequestOutcome
from simulator.routers.freeness import FreestInstanceRouter

HEADROOM_LEVELS = 5  # L: discrete levels per tier
HEADROOM_CAP_FRACTION = 0.4  # h_cap: twice the paper's h_max = 0.2, so tier 0 may reserve more


def tier_context(num_tiers: int, ttft_targets_s: tuple[float, ...], episode_requests: int) -> tuple[Entry, ...]:
    """Tier-v0's context fields (``envs.schema``): per tier, then the cluster's arrivals."""
    per_tier = (
        Field("headroom_fraction", "fraction of M", linear(HEADROOM_CAP_FRACTION), "h_p in force"),
        Field("arrivals_per_s", "req/s", ratio(COUNT_SCALE), "the tier's arrivals in the last interval per second"),
        count_field("finished", "the tier's requests finished in the last interval"),
        Field("slo_attainment", "fraction", IDENTITY, "their SLO attainment (0 when none finished)"),
        Field("mean_ttft_s", "s", ratio(1.0), "mean TTFT of those completed (0 when none)",
              scales=ttft_targets_s, scale_text="the tier's TTFT target (1 s without one)"),
    )
    return (
        Block("tier", num_tiers, per_tier, count_text="K"),
        Field("recent_qps", "req/s", ratio(COUNT_SCALE), "arrivals per second over the last 10 s"),
        arrived_field(episode_requests),
    )


def tier_mask(num_tiers: int, continuous: bool) -> tuple[MaskPart, ...]:
    if continuous:
        return (MaskPart("tier", (num_tiers,), "each tier's budget (always valid; continuous=True)", shape_text="K"),)
    return (MaskPart("level", (num_tiers, HEADROOM_LEVELS), "each tier's levels (always valid)", shape_text="K x 5"),)


class TierEnv(ServingEnv):
    """Tune the per-tier headroom budgets that K-tier Llumnix dispatch charges.

    ## Description
    Requests carry a priority tier (0 highest). Every arrival is dispatched inside the env by
    the K-tier Llumnix rule (Llumnix-K §3.4): to the serving instance with the
    highest full freeness F_full (``simulator.headroom``, eq. 1–4), where each tier p present on
    an instance charges a headroom budget H_p = M · h_p. The paper fixes h_p = 0.2 · e^(−λp);
    here the agent sets h_p. A step is one control interval (``scenario.control_interval_s``
    simulated seconds): the action sets the budgets, the simulation runs the interval. The
    first decision is at t = 0, before any arrival. Arrivals are dispatched at their arrival
    instant, so the paper's global pending queue (tier 0 first, FCFS within a tier) never
    holds more than the request being dispatched; inside an instance the scenario's local
    scheduler orders requests (``priority`` in multi-tier scenarios).

    ## Action space
    ``MultiDiscrete([5] * K)``: level l of tier p sets h_p = l / 4 · 0.4 (levels 0, 0.1, 0.2,
    0.3, 0.4 of M). ``continuous=True``: ``Box(0, 0.4, (K,))``, h_p directly. Every action
    is valid: the mask (all ones; 5K entries, or K for the Box) exists for API uniformity, so
    the fallback (keep the current budgets) and ``strict`` never trigger. An action outside
    the space raises ``ValueError``.

    ## Observation space
    ``Dict``: ``instances`` (``envs.observation``), ``context`` (per tier: its budget and the
    last interval's arrivals, completions, SLO attainment and TTFT; then the cluster's
    arrivals) and ``action_mask``; the tables at the end (from ``self.schema``) give every
    entry, its unit and encoding.

    ## Rewards
    ``reward="slo"`` (default; tier-weighted by ``scenario.tier_weights``), ``"latency"`` or
    ``"cost"``: see ``envs.rewards``, over the requests that finished during the step.

    ## Episode end
    Truncated once every request of the episode has arrived and finished; never terminated.
    The last step's ``info["episode_metrics"]`` holds the episode summary and
    ``info["episode_outcomes"]`` every request's outcome. ``info`` also
    carries ``headroom_fractions`` (the budgets in force).

    ## Arguments
    ``scenario`` (name or ``Scenario``), ``continuous``, ``reward``, ``strict``,
    ``invalid_action_penalty``, ``render_mode`` ("ansi" or "rgb_array", ``envs.frame``), ``backend``
    (``"compiled"``, the default: the compiled simulator core; or ``"python"``, the reference engine), scenario / workload
    overrides as keywords (e.g. ``num_tiers=3, priorities="uniform", tier_weights=(4, 2, 1)``).

    ## Scenarios
    Any; meaningful with several tiers (``multitier``, or ``default`` with the overrides
    above). With one tier the budget only shifts the freeness of busy instances.
    """

    env_id = "servegym/Tier-v0"

    def __init__(self, scenario: Any = "default", *, continuous: bool = False, **kwargs: Any) -> None:
        self.continuous = boolean("continuous", continuous)
        super().__init__(scenario, **kwargs)
        tiers = self.scenario.num_tiers
        if self.continuous:
            self.action_space = spaces.Box(0.0, HEADROOM_CAP_FRACTION, (tiers,), dtype=np.float32)
        else:
            self.action_space = spaces.MultiDiscrete([HEADROOM_LEVELS] * tiers)
        self.router = FreestInstanceRouter(default_headroom_fractions(tiers))
        """The cluster's router (``simulator.routers.freeness``) under the budgets in force."""
        self.headroom_fractions = default_headroom_fractions(tiers)
        self._next_control_s = 0.0
        self._arrived_before = 0
        self._outcomes_before = 0
        self._interval_stats = np.zeros((tiers, 5))

    # ----------------------------------------------------------------- ServingEnv interface
    def context_entries(self) -> tuple[Entry, ...]:
        tiers = self.scenario.num_tiers
        targets = tuple(self.scenario.workload.slo(tier).ttft_s or 1.0 for tier in range(tiers))
        return tier_context(tiers, targets, self.scenario.episode_requests)

    def mask_parts(self) -> tuple[MaskPart, ...]:
        return tier_mask(self.scenario.num_tiers, self.continuous)

    def cluster_options(self) -> dict[str, Any]:
        return {"router": self.router}

    @property
    def headroom_fractions(self) -> np.ndarray:
        """The budgets h_p in force, one per tier (read-only; each in [0, 1], checked when set)."""
        return self._headroom_fractions

    @headroom_fractions.setter
    def headroom_fractions(self, fractions: np.ndarray) -> None:
        checked = check_headroom_fractions(fractions).copy()
        if checked.size != self.scenario.num_tiers:
            raise ValueError(f"{checked.size} headroom fractions for {self.scenario.num_tiers} tiers")
        checked.flags.writeable = False
        self._headroom_fractions = checked
        self.router.set_headroom(checked)

    def on_reset(self) -> None:
        self.headroom_fractions = default_headroom_fractions(self.scenario.num_tiers)
        self._next_control_s = 0.0
        self._arrived_before = 0
        self._outcomes_before = 0
        self._interval_stats.fill(0.0)

    def compute_action_mask(self) -> np.ndarray:
        return np.ones(self.mask_size(), dtype=bool)

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        return True

    def fallback_action(self) -> None:
        """Keep the current budgets (never needed: every action is valid)."""
        return None

    def action_to_fractions(self, action: Any) -> np.ndarray:
        """Headroom fractions h_p an action sets (levels l → l / (L − 1) · h_cap)."""
        if self.continuous:
            return check_headroom_fractions(np.asarray(action, dtype=float))
        levels = np.asarray(action, dtype=float)
        return levels / (HEADROOM_LEVELS - 1) * HEADROOM_CAP_FRACTION

    def apply(self, action: Any, valid: bool) -> None:
        if action is not None:
            self.headroom_fractions = self.action_to_fractions(action)

    def advance(self) -> bool:
        assert self.cluster is not None
        cluster = self.cluster
        cluster.advance(until_s=self._next_control_s)
        self._next_control_s += self.scenario.control_interval_s
        self._record_interval()
        return cluster.pending_requests() == 0

    def _record_interval(self) -> None:
        """Per-tier [arrivals, finished, SLO met, completed, Σ TTFT of completed] since the last decision."""
        assert self.cluster is not None
        cluster = self.cluster
        stats = self._interval_stats
        stats.fill(0.0)
        last_tier = self.scenario.num_tiers - 1
        for request in cluster.submitted_requests[self._arrived_before:cluster.arrived]:
            stats[min(request.tier, last_tier), 0] += 1
        self._arrived_before = cluster.arrived
        finished: list[RequestOutcome] = cluster.outcomes[self._outcomes_before:]
        self._outcomes_before = len(cluster.outcomes)
        for outcome in finished:
            tier = min(outcome.tier, last_tier)
            stats[tier, 1] += 1
            if outcome.completed:
                stats[tier, 2] += self.reward_fn.met(outcome)
                stats[tier, 3] += 1
                stats[tier, 4] += outcome.ttft_s

    def context(self) -> np.ndarray:
        assert self.cluster is not None
        arrivals, finished, met, completed, ttft_sum_s = self._interval_stats.T
        with np.errstate(divide="ignore", invalid="ignore"):
            attainment = np.where(finished > 0, met / finished, 0.0)
            mean_ttft_s = np.where(completed > 0, ttft_sum_s / completed, 0.0)
        return self.schema.encode_context({
            "headroom_fraction": self.headroom_fractions,
            "arrivals_per_s": arrivals / self.scenario.control_interval_s,
            "finished": finished,
            "slo_attainment": attainment,
            "mean_ttft_s": mean_ttft_s,
            "recent_qps": self.recent_qps(),
            "arrived": self.cluster.arrived,
        })

    def step_info(self, finished: list[RequestOutcome] | None = None) -> dict[str, Any]:
        info = super().step_info(finished)
        info["headroom_fractions"] = self.headroom_fractions.tolist()
        return info


TierEnv.__doc__ = with_observation_tables(
    TierEnv.__doc__,
    observation_tables(instance_fields_doc(), tier_context(1, (1.0,), 1), tier_mask(1, False) + tier_mask(1, True)),
)
