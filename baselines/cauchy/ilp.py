"""Combo deployment optimisation (Cauchy §3.3.2, eq. 16) and its two §4.3 variants, with
PuLP + CBC.

``x[m, n]`` (integer >= 0) is how many combos n serve model / service m. Constraints of eq. 16:
goodput ``Σ_n G_mn x_mn >= D_m`` for every service (the goodput function is taken as the sum
of the profiled combo goodputs) and GPUs ``Σ_m Σ_n gpus_g(n) x_mn <= G_g`` for every type.
Objectives (``C_n`` eq. 15 CE in M tokens/USD, ``P_n`` $/hour):

* ``"co"`` CO-LP, Cauchy's: minimise ``Σ P_n / C_n x_mn`` (eq. 16);
* ``"mce"`` MCE-LP: maximise the deployment's overall cost-efficiency, its tokens per dollar
  at the combos' eq. 15 CE, ``Σ C_n P_n x_mn / Σ P_n x_mn`` (§4.3: "maximizing overall
  cost-efficiency" under the goodput constraints; the paper gives no formula). A ratio of
  linear forms: Dinkelbach's method, an ILP per step, then the cheapest plan of that CE. It
  fills the demand with the highest-CE combos whatever their size, the over-provisioning of
  high-end GPUs §4.3 describes. (A sum ``Σ C_n x_mn`` is no cost-efficiency and grows with
  every combo added: it would deploy the whole inventory.)
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pulp

from baselines.cauchy.selection import Candidate, pareto_filter, rank_by_ce
from simulator.combos import Combo

OBJECTIVES = ("co", "mce", "mc")
_CE_UNIT = 1e6  # C_n in M tokens/USD keeps CBC's coefficients near 1
_CE_RTOL = 1e-9  # overall CEs this close are equal (CBC's integer solutions are exact; the ratio is not)


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


Counts = dict[tuple[str, int], int]


def _solve(services: Mapping[str, ServiceDemand], inventory: Mapping[str, int], sense: int,
           coefficient: Callable[[Candidate], float], min_ce: float | None = None) -> Counts | None:
    """Optimise ``Σ coefficient(c) x`` under eq. 16's goodput and GPU constraints (and, with
    ``min_ce``, an overall CE of at least that many M tokens/USD); the counts, or None if infeasible."""
    problem = pulp.LpProblem("cauchy_allocation", sense)
    x = _variables(problem, services)
    terms = [(c, x[m, n]) for m, s in services.items() for n, c in enumerate(s.candidates)]
    problem += pulp.lpSum(coefficient(c) * var for c, var in terms)
    for m, s in services.items():
        problem += pulp.lpSum(c.goodput_rps * x[m, n] for n, c in enumerate(s.candidates)) >= s.demand_rps
    if min_ce is not None:
        problem += pulp.lpSum((c.ce_tokens_per_usd / _CE_UNIT - min_ce) * c.price_per_hour_usd * var for c, var in terms) >= 0
    _inventory_constraints(problem, x, services, inventory)
    if pulp.LpStatus[problem.solve(pulp.PULP_CBC_CMD(msg=False))] != "Optimal":
        return None
    return {key: int(round(var.value() or 0)) for key, var in x.items()}


def overall_ce(services: Mapping[str, ServiceDemand], counts: Counts) -> float:
    """A deployment's tokens per dollar at its combos' eq. 15 CE: Σ C_n P_n x_n / Σ P_n x_n (M tokens/USD)."""
    deployed = [(services[m].candidates[n], k) for (m, n), k in counts.items() if k]
    dollars = sum(c.price_per_hour_usd * k for c, k in deployed)
    return sum(c.ce_tokens_per_usd / _CE_UNIT * c.price_per_hour_usd * k for c, k in deployed) / dollars


def _max_ce_counts(services: Mapping[str, ServiceDemand], inventory: Mapping[str, int]) -> Counts | None:
    """MCE-LP: Dinkelbach's iteration λ ← overall_ce(argmax Σ (C_n − λ) P_n x_n) from λ = 0 until it
    stops rising (finitely many plans, so it ends at the highest overall CE), then the cheapest
    plan of that CE (many plans tie: more of the best combo keeps the ratio)."""
    best = 0.0
    while True:
        counts = _solve(services, inventory, pulp.LpMaximize,
                        lambda c: (c.ce_tokens_per_usd / _CE_UNIT - best) * c.price_per_hour_usd)
        if counts is None:
            return None
        ce = overall_ce(services, counts)
        if ce <= best * (1.0 + _CE_RTOL):
            break
        best = ce
    return _solve(services, inventory, pulp.LpMinimize, lambda c: c.price_per_hour_usd, min_ce=best * (1.0 - _CE_RTOL))


def solve_allocation(
    services: Mapping[str, ServiceDemand], inventory: Mapping[str, int], objective: str = "co"
) -> dict[str, ComboPlan]:
    """Eq. 16 (or a §4.3 variant) for every service at once; raises ``InfeasibleDemandError``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {list(OBJECTIVES)}")
    if not services:
        raise ValueError("no service to allocate")
    _check_inventory(inventory)
    started = time.perf_counter()
    if objective == "mce":
        counts = _max_ce_counts(services, inventory)
    elif objective == "co":
        counts = _solve(services, inventory, pulp.LpMinimize, lambda c: c.price_per_hour_usd / (c.ce_tokens_per_usd / _CE_UNIT))
    else:
        counts = _solve(services, inventory, pulp.LpMinimize, lambda c: c.price_per_hour_usd)
    solve_time_s = time.perf_counter() - started
    if counts is None:
        raise _infeasible(services, inventory)
    return {
        m: ComboPlan(tuple((c, counts[m, n]) for n, c in enumerate(s.candidates) if counts[m, n] > 0), objective,
                     s.demand_rps, solve_time_s)
        for m, s in services.items()
    }


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
