"""Adaptive combo selection (Cauchy §3.3.1): CE of each combo by eq. 15, profiled goodput,
Pareto filtering of directional variants, ranking by CE."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from baselines.cauchy.workloads import MODEL, CauchyWorkload
from hardware.cost_efficiency import cost_efficiency_tokens_per_usd
from hardware.gpus import get_gpu
from hardware.models import get_model
from simulator.combos import Combo

# Batch size B of eq. 13, the decode pattern A2; the value hardware.report uses for its CE column.
CE_BATCH_SIZE = 32


@dataclass(frozen=True)
class Candidate:
    """A combo with its eq. 15 CE (tokens/USD) and its profiled goodput (req/s) for a workload."""

    combo: Combo
    ce_tokens_per_usd: float
    goodput_rps: float

    @property
    def price_per_hour_usd(self) -> float:
        return self.combo.price_per_hour_usd()

    @property
    def goodput_rps_per_usd_hour(self) -> float:
        """Goodput bought per dollar-hour: the cost side of the Pareto filter."""
        return self.goodput_rps / self.price_per_hour_usd


def combo_ce_tokens_per_usd(
    combo: Combo, workload: CauchyWorkload, model: str = MODEL, batch_size: int = CE_BATCH_SIZE
) -> float:
    """Eq. 15, ``A1 f_p / p_p + A2 b_d / p_d``, with the workload's mean lengths (eqs. 12-13);
    an aggregated combo is its GPU in both roles."""
    return cost_efficiency_tokens_per_usd(
        get_model(model),
        get_gpu(combo.prefill_gpu),
        get_gpu(combo.decode_side_gpu),
        workload.mean_prompt_tokens,
        workload.mean_output_tokens,
        batch_size,
        combo.prefill_gpus,
        combo.decode_gpus or combo.prefill_gpus,
    )


def build_candidates(
    combos: Iterable[Combo], workload: CauchyWorkload, goodput_rps: Mapping[str, float], model: str = MODEL
) -> list[Candidate]:
    """Candidates of the combos with a positive profiled goodput (``goodput_rps`` keyed by
    ``Combo.name``); a combo that cannot meet the SLO at any rate (goodput 0) is no candidate.
    A combo absent from ``goodput_rps`` raises: it was never profiled."""
    candidates = []
    for combo in combos:
        if combo.name not in goodput_rps:
            raise ValueError(f"no profiled goodput for {combo.name} on {workload.lengths}; known: {sorted(goodput_rps)}")
        goodput = goodput_rps[combo.name]
        if goodput > 0:
            candidates.append(Candidate(combo, combo_ce_tokens_per_usd(combo, workload, model), goodput))
    return candidates


def _pair_key(combo: Combo) -> tuple:
    """Directional variants share a key: the unordered GPU pair (aggregated combos apart)."""
    if combo.aggregated:
        return ("aggregated", combo.prefill_gpu)
    return ("disaggregated", frozenset((combo.prefill_gpu, combo.decode_gpu)))


def _dominates(a: Candidate, b: Candidate) -> bool:
    ge = a.ce_tokens_per_usd >= b.ce_tokens_per_usd and a.goodput_rps_per_usd_hour >= b.goodput_rps_per_usd_hour
    gt = a.ce_tokens_per_usd > b.ce_tokens_per_usd or a.goodput_rps_per_usd_hour > b.goodput_rps_per_usd_hour
    return ge and gt


def pareto_filter(candidates: Iterable[Candidate]) -> list[Candidate]:
    """§3.3.1 Pareto filtering: within each unique GPU pair (both directions, every count
    shape) keep the candidates no other one dominates in (eq. 15 CE, goodput per dollar-hour).
    The reverse direction of a pair with lower CE and no more goodput per dollar is dropped
    ("keeping H800-H20 while discarding H20-H800"); within one direction, where eq. 15's CE
    does not depend on the counts, the count shape with the most goodput per dollar stays."""
    pool = list(candidates)
    return [c for c in pool if not any(_dominates(o, c) for o in pool if _pair_key(o.combo) == _pair_key(c.combo))]


def rank_by_ce(candidates: Iterable[Candidate]) -> list[Candidate]:
    """§3.3.1 candidate ranking: descending eq. 15 CE; ties by goodput per dollar-hour, then name."""
    return sorted(candidates, key=lambda c: (-c.ce_tokens_per_usd, -c.goodput_rps_per_usd_hour, c.combo.name))
