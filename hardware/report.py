"""``python -m hardware``: what each GPU x model pairing can do under a serving engine, from the
latency model; ``--engines`` lists the engine profiles with their sources.

Per pairing: whether the weights fit at TP 1/2/4/8 (``y``/``n``, ``-`` where the TP degree
does not divide the model's heads), and at the smallest TP that fits (memory utilisation
0.9): KV capacity, prefill time of 1,024 tokens, time per output token at batch 1 and 32
(1,024 context tokens each) and Cauchy's cost-efficiency (Cauchy eq. 14) for a
ShareGPT-like request (R_in 290, R_out 207, B 32) with the GPU serving both phases.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from hardware.cost_efficiency import cost_efficiency_tokens_per_usd
from hardware.engines import DEFAULT_ENGINE, engine_names, get_engine
from hardware.gpus import GPUSpec, get_gpu, gpu_names
from hardware.kernel_sets import fit_measured
from hardware.latency import kv_capacity_tokens, latency_model
from hardware.models import ModelSpec, check_fits, get_model, model_names, weights_per_gpu_bytes
from hardware.profiles import PROFILE_FAMILIES, fit_compute, fit_links

TP_DEGREES = (1, 2, 4, 8)
MEMORY_UTILIZATION = 0.9
PREFILL_TOKENS = 1024
DECODE_CONTEXT_TOKENS = 1024
DECODE_BATCHES = (1, 32)
CE_INPUT_TOKENS, CE_OUTPUT_TOKENS, CE_BATCH = 290, 207, 32
DEFAULT_GPUS = ("H100-80GB", "A100-80GB", "A40", "L40S", "A10")
DEFAULT_MODELS = ("Llama-2-7B", "Llama-3-8B", "CodeLlama-34B", "Llama-2-70B")


@dataclass(frozen=True)
class PairingReport:
    """One table row; the fields after ``fits`` are None when no TP degree fits."""

    gpu: str
    model: str
    fits: tuple[str, ...]
    tp: int | None
    kv_capacity_tokens: int | None
    prefill_ms: float | None
    decode_ms: tuple[float, ...] | None
    cost_efficiency_tokens_per_usd: float | None


def _fit_flag(model: ModelSpec, gpu: GPUSpec, tp: int) -> str:
    try:
        weights_per_gpu_bytes(model, tp)
    except ValueError:
        return "-"
    try:
        check_fits(model, gpu, tp, memory_utilization=MEMORY_UTILIZATION)
    except ValueError:
        return "n"
    return "y"


def _cost_efficiency(model: ModelSpec, gpu: GPUSpec, tp: int) -> float | None:
    """Cauchy CE, or None for architectures its formulas exclude (MoE, MLA, non-gated, encoders)."""
    try:
        return cost_efficiency_tokens_per_usd(
            model, gpu, gpu, CE_INPUT_TOKENS, CE_OUTPUT_TOKENS, CE_BATCH, tp, tp
        )
    except ValueError:
        return None


def pairing_report(gpu: GPUSpec, model: ModelSpec, engine: str = DEFAULT_ENGINE) -> PairingReport:
    """Measure one GPU x model pairing under ``engine`` at the smallest TP degree whose weights and KV fit."""
    fits = tuple(_fit_flag(model, gpu, tp) for tp in TP_DEGREES)
    for tp, flag in zip(TP_DEGREES, fits):
        if flag != "y":
            continue
        try:
            capacity = kv_capacity_tokens(gpu, model, tp, memory_utilization=MEMORY_UTILIZATION)
        except ValueError:
            continue
        latency = latency_model(gpu, model, tp, engine=engine)
        decode_ms = tuple(
            latency.decode_time_s(batch, batch * DECODE_CONTEXT_TOKENS) * 1e3 for batch in DECODE_BATCHES
        )
        prefill_ms = latency.prefill_time_s(PREFILL_TOKENS) * 1e3
        return PairingReport(
            gpu.name, model.name, fits, tp, capacity, prefill_ms, decode_ms, _cost_efficiency(model, gpu, tp)
        )
    return PairingReport(gpu.name, model.name, fits, None, None, None, None, None)


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_table(rows: list[PairingReport]) -> str:
    """Aligned text table, a blank line between GPUs."""
    header = (
        "GPU", "model", "fits TP1/2/4/8", "TP", "KV tokens", f"prefill {PREFILL_TOKENS} ms",
        *(f"TPOT B={b} ms" for b in DECODE_BATCHES), "Cauchy CE tok/$",
    )
    table = [header]
    for row in rows:
        decode = row.decode_ms or (None,) * len(DECODE_BATCHES)
        table.append((
            row.gpu, row.model, " ".join(row.fits), _cell(row.tp, "d"), _cell(row.kv_capacity_tokens, ","),
            _cell(row.prefill_ms, ".1f"), *(_cell(value, ".2f") for value in decode),
            _cell(row.cost_efficiency_tokens_per_usd, ".3g"),
        ))
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    lines = []
    for index, line in enumerate(table):
        if index > 1 and line[0] != table[index - 1][0]:
            lines.append("")
        lines.append("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())
    return "\n".join(lines)


def format_engines() -> str:
    """Every engine profile: what it is, its kernels, CPU time, batching and sources."""
    blocks = []
    for name in engine_names():
        engine = get_engine(name)
        seqs, tokens = engine.max_num_seqs, engine.max_num_batched_tokens
        lines = [
            f"{name}{' (default)' if name == DEFAULT_ENGINE else ''}: {engine.summary}",
            f"  kernels {engine.kernels}; CPU {engine.cpu_fixed_s * 1e3:.3g} ms + "
            f"{engine.cpu_per_sequence_s * 1e3:.3g} ms per sequence per iteration; scheduler {engine.scheduler}, "
            f"max_num_seqs {seqs.default}/{seqs.large_gpu}, max_num_batched_tokens {tokens.default}/{tokens.large_gpu} "
            f"(other/large GPUs); prefix caching {'on' if engine.prefix_caching else 'off'}",
            f"  calibration: {engine.calibration}",
            *(f"  source: {source}" for source in engine.sources),
        ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def format_fit_summary() -> str:
    """One line per profiled family: fitted efficiencies and held-out error."""
    measured = fit_measured("h100")
    lines = [f"measured-2026 kernel set, fitted to the {measured.gpu} profile (held-out rows: whole models or head shapes):"]
    lines += [
        f"  {error.what}: train MAPE {error.train_mape:.1%} ({error.train_rows} rows), held-out MAPE "
        f"{error.held_out_mape:.1%} ({error.held_out_rows} rows, worst {error.held_out_worst:.0%})"
        for error in measured.errors
    ]
    lines.append("vidur-2024 kernel set, fitted to Vidur profiles (fraction of catalog peak; held-out MAPE of per-layer time):")
    for family in PROFILE_FAMILIES:
        fit, links = fit_compute(family), fit_links(family).efficiency
        eff = fit.efficiency
        lines.append(
            f"  {family}: compute {eff.compute_fraction:.3f}, memory {eff.memory_fraction:.3f}, "
            f"all-reduce link {links.all_reduce_bandwidth_fraction:.3f}; "
            f"held-out MAPE {fit.held_out_mape:.1%} ({fit.held_out_rows} rows)"
        )
    return "\n".join(lines)


def _names(requested: list[str] | None, default: tuple[str, ...], known: list[str]) -> list[str]:
    if not requested:
        return list(default)
    return known if "all" in requested else requested


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardware", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="append", help="GPU name (repeatable, or 'all'); default: a subset")
    parser.add_argument("--model", action="append", help="model name (repeatable, or 'all'); default: a subset")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, choices=engine_names(),
                        help=f"serving engine of the table (default {DEFAULT_ENGINE})")
    parser.add_argument("--engines", action="store_true", help="list the engine profiles with their sources and exit")
    args = parser.parse_args(argv)
    if args.engines:
        print(format_engines())
        return 0
    try:
        gpus = [get_gpu(name) for name in _names(args.gpu, DEFAULT_GPUS, gpu_names())]
        models = [get_model(name) for name in _names(args.model, DEFAULT_MODELS, model_names())]
    except ValueError as error:
        parser.error(str(error))
    print(format_fit_summary())
    print()
    print(f"engine {args.engine}:")
    print(format_table([pairing_report(gpu, model, args.engine) for gpu in gpus for model in models]))
    return 0
