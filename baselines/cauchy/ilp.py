"""Combo deployment optimisation (cauchy.txt §3.3.2, eq. 16) and its two §4.3 variants, with
PuLP + CBC.

``x[m, n]`` (integer >= 0) is how many combos n serve model / service m. Constraints of eq. 16:
goodput ``Σ_n G_mn x_mn >= D_m`` for every service (the goodput function is taken as the sum
of the profiled combo goodputs) and GPUs ``Σ_m Σ_n gpus_g(n) x_mn <= G_g`` for every type.
Objectives (``C_n`` eq. 15 CE in M tokens/USD, ``P_n`` $/hour):

* ``"co"`` CO-LP, Cauchy's: minimise ``Σ P_n / C_n x_mn`` (eq. 16);
* ``"mce"`` MCE-LP: maximise ``Σ C_n x_mn`` (most cost-efficiency; §4.3 notes it
  over-provisions high-end GPUs);
* ``"mc"`` MC-LP: minimise ``Σ P_n x_mn`` (cheapest plan meeting the goodput).

``plan_combos`` is the single-service planner of §3.3: Pareto filter and CE ranking (§3.3.1),
an optional shortlist of the top candidates, the ILP, and the §3.3.2 fallback: when the
shortlist cannot meet the demand, the CE objective is relaxed, i.e. every candidate (filtered
out or not) is allowed and the plan is the cheapest one (MC-LP). If even that is infeasible,
``InfeasibleDemandError`` names the unmet goodput. Solve time is reported (§3.3.2: 20-50 ms).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulp

from baselines.cauchy.selection import Candidate, pareto_filter, rank_by_ce
from simulator.combos import Combo

OBJECTIVES = ("co", "mce", "mc")
_CE_UNIT = 1e6  # C_n in M tokens/USD keeps CBC's coefficients near 1


class InfeasibleDemandError(ValueError):
    """The inventory cannot deliver the goodput demand; ``unmet_rps[service]`` says how much is missing."""

    def __init__(self, message: str, unmet_rps: dict[str, float]) -> None:
        super().__init__(message)
        self.unmet_rps = unmet_rps


@dataclass(frozen=True)
class ServiceDemand:
    """One model / workload of eq. 16: its candidates and its goodput demand ``D_m`` (req/s)."""

    candidates: tuple[Candidate, ...]
    demand_rps: float

    def __post_init__(self) -> None:
        if isinstance(self.demand_rps, bool) or not isinstance(self.demand_rps, (int, float)) or not (
            math.isfinite(self.demand_rps) and self.demand_rps > 0
        ):
            raise ValueError(f"goodput demand must be a positive finite req/s, got {self.demand_rps!r}")
        if not self.candidates:
            raise ValueError("a service needs at least one candidate combo")


@dataclass(frozen=True)
class ComboPlan:
    """How many of each combo one service deploys (only combos with a positive count)."""

    entries: tuple[tuple[Candidate, int], ...]
    objective: str
    demand_rps: float
    solve_time_s: float
    fallback: bool = False

    @property
    def goodput_rps(self) -> float:
        return sum(c.goodput_rps * n for c, n in self.entries)

    @property
    def cost_per_hour_usd(self) -> float:
        return sum(c.price_per_hour_usd * n for c, n in self.entries)

    def gpu_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for candidate, n in self.entries:
            for gpu, k in candidate.combo.gpu_counts().items():
                counts[gpu] = counts.get(gpu, 0) + k * n
        return counts

    def combos(self) -> list[tuple[Combo, float]]:
        """Every deployed combo with its goodput, one entry per copy, in plan order."""
        return [(c.combo, c.goodput_rps) for c, n in self.entries for _ in range(n)]

    def describe(self) -> str:
        return ", ".join(f"{n} x {c.combo.name}" for c, n in self.entries)


def _check_inventory(inventory: Mapping[str, int]) -> None:
    for gpu, count in inventory.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"inventory of {gpu} must be a non-negative integer, got {count!r}")


def _variables(problem: pulp.LpProblem, services: Mapping[str, ServiceDemand]) -> dict[tuple[str, int], pulp.LpVariable]:
    return {
        (m, n): problem.add_variable(f"x_{mi}_{n}", lowBound=0, cat="Integer")
        for mi, (m, s) in enumerate(services.items()) for n in range(len(s.candidates))
    }


def _inventory_constraints(problem, x, services, inventory) -> None:
    gpus = {g for s in services.values() for c in s.candidates for g in c.combo.gpu_counts()}
    for gpu in sorted(gpus):
        used = pulp.lpSum(
            c.combo.gpu_counts().get(gpu, 0) * x[m, n]
            for m, s in services.items() for n, c in enumerate(s.candidates) if gpu in c.combo.gpu_counts()
        )
        problem += used <= inventory.get(gpu, 0)


def solve_allocation(
    services: Mapping[str, ServiceDemand], inventory: Mapping[str, int], objective: str = "co"
) -> dict[str, ComboPlan]:
    """Eq. 16 (or a §4.3 variant) for every service at once; raises ``InfeasibleDemandError``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {list(OBJECTIVES)}")
    if not services:
        raise ValueError("no service to allocate")
    _check_inventory(inventory)
    sense = pulp.LpMaximize if objective == "mce" else pulp.LpMinimize
    problem = pulp.LpProblem(f"cauchy_{objective}", sense)
    x = _variables(problem, services)

    def coefficient(c: Candidate) -> float:
        if objective == "co":
            return c.price_per_hour_usd / (c.ce_tokens_per_usd / _CE_UNIT)
        if objective == "mce":
            return c.ce_tokens_per_usd / _CE_UNIT
        return c.price_per_hour_usd

    problem += pulp.lpSum(coefficient(c) * x[m, n] for m, s in services.items() for n, c in enumerate(s.candidates))
    for m, s in services.items():
        problem += pulp.lpSum(c.goodput_rps * x[m, n] for n, c in enumerate(s.candidates)) >= s.demand_rps
    _inventory_constraints(problem, x, services, inventory)
    started = time.perf_counter()
    status = problem.solve(pulp.PULP_CBC_CMD(msg=False))
    solve_time_s = time.perf_counter() - started
    if pulp.LpStatus[status] != "Optimal":
        raise _infeasible(services, inventory)
    plans = {}
    for m, s in services.items():
        entries = tuple(
            (c, int(round(x[m, n].value()))) for n, c in enumerate(s.candidates) if round(x[m, n].value() or 0) > 0
        )
        plans[m] = ComboPlan(entries, objective, s.demand_rps, solve_time_s)
    return plans


def max_goodputs_rps(services: Mapping[str, ServiceDemand], inventory: Mapping[str, int]) -> dict[str, float]:
    """Goodput each service can get at most, up to its demand, maximising the total served."""
    problem = pulp.LpProblem("cauchy_max_goodput", pulp.LpMaximize)
    x = _variables(problem, services)
    served = {m: problem.add_variable(f"served_{i}", lowBound=0, upBound=s.demand_rps) for i, (m, s) in enumerate(services.items())}
    problem += pulp.lpSum(served.values())
    for m, s in services.items():
        problem += served[m] <= pulp.lpSum(c.goodput_rps * x[m, n] for n, c in enumerate(s.candidates))
    _inventory_constraints(problem, x, services, inventory)
    problem.solve(pulp.PULP_CBC_CMD(msg=False))
    return {m: float(v.value() or 0.0) for m, v in served.items()}


def _infeasible(services: Mapping[str, ServiceDemand], inventory: Mapping[str, int]) -> InfeasibleDemandError:
    reachable = max_goodputs_rps(services, inventory)
    unmet = {m: s.demand_rps - reachable[m] for m, s in services.items()}
    parts = [
        f"{m!r} needs {s.demand_rps:g} req/s, at most {reachable[m]:.4g} req/s reachable (unmet {unmet[m]:.4g} req/s)"
        for m, s in services.items() if unmet[m] > 1e-9
    ] or [f"{m!r} needs {s.demand_rps:g} req/s" for m, s in services.items()]
    return InfeasibleDemandError(f"goodput demand cannot be met with inventory {dict(inventory)}: " + "; ".join(parts), unmet)


def plan_combos(
    candidates: Sequence[Candidate],
    demand_rps: float,
    inventory: Mapping[str, int],
    objective: str = "co",
    shortlist: int | None = None,
) -> ComboPlan:
    """§3.3 for one service: Pareto filter, CE ranking, the top ``shortlist`` candidates (all
    when None) into the ILP; on infeasibility the §3.3.2 fallback (every candidate, MC-LP)."""
    if shortlist is not None and (isinstance(shortlist, bool) or not isinstance(shortlist, int) or shortlist < 1):
        raise ValueError(f"shortlist must be a positive integer or None, got {shortlist!r}")
    ranked = rank_by_ce(pareto_filter(candidates))
    pool = tuple(ranked[:shortlist] if shortlist else ranked)
    try:
        return solve_allocation({"service": ServiceDemand(pool, demand_rps)}, inventory, objective)["service"]
    except InfeasibleDemandError:
        everything = tuple(rank_by_ce(candidates))
        plan = solve_allocation({"service": ServiceDemand(everything, demand_rps)}, inventory, "mc")["service"]
        return ComboPlan(plan.entries, plan.objective, demand_rps, plan.solve_time_s, fallback=True)
