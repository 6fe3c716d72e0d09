"""Profile today's GPU kernels at the catalog models' shapes, as Vidur's profiler does.

Run on a GPU machine (needs only PyTorch with CUDA)::

    python -m hardware.kernel_profiler --out DIR [--budget-s 420]

It writes, under ``DIR``:

* ``env.json``: GPU, driver, library versions, date, and a device-to-device copy curve
  (bytes -> seconds) that measures achieved memory bandwidth and launch cost;
* ``gemm_bf16.csv``: every linear op (QKV, O, MLP up+gate, MLP down, LM head) of the profiled
  models at TP 1/2/4/8 over a token grid, bf16, ``torch.nn.functional.linear`` (cuBLAS);
* ``gemm_quant.csv``: the same ops in FP8 (``torch._scaled_mm``, per-tensor scales, H100 FP8
  tensor cores) and weight-only int4 (``torch._weight_int4pack_mm``, group size 128);
* ``moe_grouped.csv``: routed-expert GEMMs of MoE models as one grouped GEMM
  (``torch._grouped_mm``) under uniform top-k routing;
* ``attn_prefill.csv`` / ``attn_decode.csv``: attention (``scaled_dot_product_attention``,
  flash and cuDNN back-ends) for prefill chunks after a cached context and for decode batches,
  GQA decode packed as flash-decoding does (the query heads of a KV head form its query rows);
* ``model_forward.csv``: whole forward passes (Llama-3.1-8B, and one GPU's share of a TP4
  Llama-3.1-70B; random weights; captured in CUDA graphs as vLLM captures decode): the
  end-to-end check of the per-op sum;
* ``log.txt``: what ran, what was skipped and why.

Each time is the median of three measurements; small ops run inside CUDA graphs that cycle
through enough weight copies to leave the L2 cache (a real forward pass reads every layer's
weights from HBM). Sections stop when their share of ``--budget-s`` is spent, keeping what they
measured. ``--smoke`` runs a tiny grid on the CPU to check the script itself.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

L2_FLUSH_BYTES = 128 * 2**20
"""Weight bytes cycled through per measurement (H100: 50 MB of L2)."""

TARGET_GPU_S = 4e-3
"""GPU time aimed at per timed replay batch."""

TOKENS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
TP_DEGREES = (1, 2, 4, 8)


@dataclass(frozen=True)
class DenseShape:
    """Shape of a dense decoder (HF config names) for the linear ops."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    def linear_ops(self, tp: int) -> list[tuple[str, int, int]]:
        """(op, out_features, in_features) per GPU under ``tp``-way tensor parallelism."""
        kv_per_gpu = max(self.kv_heads // tp, 1)
        q_per_gpu = self.heads // tp
        return [
            ("qkv", (q_per_gpu + 2 * kv_per_gpu) * self.head_dim, self.hidden),
            ("o", self.hidden, q_per_gpu * self.head_dim),
            ("gate_up", 2 * self.intermediate // tp, self.hidden),
            ("down", self.hidden, self.intermediate // tp),
            ("lm_head", self.vocab // tp, self.hidden),
        ]


DENSE_MODELS = (
    DenseShape("Llama-3.1-8B", 4096, 32, 8, 128, 14336, 128256),
    DenseShape("Llama-3.1-70B", 8192, 64, 8, 128, 28672, 128256),
    DenseShape("Llama-2-7B", 4096, 32, 32, 128, 11008, 32000),
    DenseShape("CodeLlama-34B", 8192, 64, 8, 128, 22016, 32000),
    DenseShape("Qwen2.5-7B", 3584, 28, 4, 128, 18944, 152064),
    DenseShape("Qwen2.5-32B", 5120, 40, 8, 128, 27648, 152064),
    DenseShape("Qwen3-32B", 5120, 64, 8, 128, 25600, 151936),
    DenseShape("Llama-2-13B", 5120, 40, 40, 128, 13824, 32000),
)

QUANT_MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-32B")


@dataclass(frozen=True)
class MoEShape:
    """Routed experts of one MoE layer as one GPU holds them."""

    name: str
    layout: str
    hidden: int
    expert_intermediate: int
    local_experts: int
    total_experts: int
    top_k: int


MOE_MODELS = (
    MoEShape("DeepSeek-R1-671B", "ep8", 7168, 2048, 32, 256, 8),
    MoEShape("DeepSeek-R1-671B", "tp8", 7168, 256, 256, 256, 8),
    MoEShape("Qwen3-30B-A3B", "tp1", 2048, 768, 128, 128, 8),
    MoEShape("Qwen3-30B-A3B", "ep2", 2048, 768, 64, 128, 8),
    MoEShape("Mixtral-8x7B", "tp1", 4096, 14336, 8, 8, 2),
    MoEShape("Mixtral-8x7B", "tp2", 4096, 7168, 8, 8, 2),
)

PREFILL_HEADS = ((32, 8), (32, 32), (64, 8), (28, 4), (40, 8), (16, 2), (8, 1))
PREFILL_CHUNKS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREFILL_CONTEXTS = (1024, 4096, 16384)
DECODE_HEADS = ((8, 4), (32, 1), (2, 8), (1, 8), (4, 7), (8, 8), (40, 1))
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_CONTEXTS = (128, 512, 2048, 8192, 32768)
DECODE_KV_BYTES_CAP = 12 * 2**30


class Budget:
    """Wall-clock shares of the whole run, one per section."""

    def __init__(self, total_s: float, shares: dict[str, float]) -> None:
        scale = total_s / sum(shares.values())
        self.seconds = {name: share * scale for name, share in shares.items()}
        self.started_s = 0.0
        self.section = ""

    def start(self, section: str) -> None:
        self.section, self.started_s = section, time.perf_counter()

    def spent(self) -> bool:
        return time.perf_counter() - self.started_s > self.seconds[self.section]


class Profiler:
    """Times callables on one device and writes the CSVs."""

    def __init__(self, out: Path, device: str, smoke: bool, budget: Budget) -> None:
        self.out, self.device, self.smoke, self.budget = out, device, smoke, budget
        self.cuda = device == "cuda"
        self.log_lines: list[str] = []

    def log(self, line: str) -> None:
        print(line, flush=True)
        self.log_lines.append(line)

    def time_s(self, make_step: Callable[[int], Callable[[], None]], copies: int) -> float:
        """Seconds of one call of the step, the median of three timed batches.

        ``make_step(i)`` returns a closure doing one op on the i-th of ``copies`` input sets;
        on CUDA the ``copies`` calls are captured in one graph and replayed.
        """
        steps = [make_step(i) for i in range(copies)]
        if not self.cuda:
            for step in steps:
                step()
            samples = []
            for _ in range(3):
                start = time.perf_counter()
                for step in steps:
                    step()
                samples.append((time.perf_counter() - start) / copies)
            return statistics.median(samples)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for step in steps:
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for step in steps:
                step()
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        once_s = start.elapsed_time(end) * 1e-3
        replays = max(1, min(50, int(TARGET_GPU_S / max(once_s, 1e-7))))
        samples = []
        for _ in range(3):
            start.record()
            for _ in range(replays):
                graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3 / (replays * copies))
        del graph
        return statistics.median(samples)

    def write(self, name: str, header: list[str], rows: list[list[object]]) -> None:
        with open(self.out / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
        self.log(f"wrote {name}: {len(rows)} rows")


def copies_for(bytes_per_copy: int) -> int:
    return max(1, min(64, math.ceil(L2_FLUSH_BYTES / max(bytes_per_copy, 1))))


def token_grid(smoke: bool) -> tuple[int, ...]:
    return (1, 16, 128) if smoke else TOKENS


# --- sections --------------------------------------------------------------------------------


def profile_copy(p: Profiler) -> list[list[float]]:
    rows = []
    sizes = [2**e for e in (range(12, 20, 4) if p.smoke else range(10, 31))]
    for size in sizes:
        numel = size // 2
        buffers = [(torch.empty(numel, dtype=torch.bfloat16, device=p.device).normal_(),
                    torch.empty(numel, dtype=torch.bfloat16, device=p.device)) for _ in range(copies_for(size))]

        def make(i: int, buffers=buffers) -> Callable[[], None]:
            source, target = buffers[i]
            return lambda: target.copy_(source)

        rows.append([size, p.time_s(make, len(buffers))])
        del buffers
    return rows


def gemm_bf16(p: Profiler) -> list[list[object]]:
    rows: list[list[object]] = []
    models = DENSE_MODELS[:1] if p.smoke else DENSE_MODELS
    tps = (1, 2) if p.smoke else TP_DEGREES
    seen: dict[tuple[int, int, int], float] = {}
    for model in models:
        for tp in tps:
            for op, n, k in model.linear_ops(tp):
                if p.smoke:
                    n, k = n // 16, k // 16
                weights = [torch.randn(n, k, dtype=torch.bfloat16, device=p.device) for _ in range(copies_for(n * k * 2))]
                for m in token_grid(p.smoke):
                    if p.budget.spent():
                        p.log(f"gemm_bf16: budget spent at {model.name} tp={tp} {op} m={m}")
                        return rows
                    if (m, n, k) not in seen:
                        x = torch.randn(m, k, dtype=torch.bfloat16, device=p.device)

                        def make(i: int, x=x) -> Callable[[], None]:
                            w = weights[i]
                            return lambda: F.linear(x, w)

                        seen[m, n, k] = p.time_s(make, len(weights))
                    rows.append([model.name, tp, op, m, n, k, seen[m, n, k]])
                del weights
    return rows


class Fp8Gemm:
    """``torch._scaled_mm`` with per-tensor scales; the weight is column-major as cuBLASLt wants."""

    def __init__(self, p: Profiler, n: int, k: int) -> None:
        self.p, self.n, self.k = p, n, k
        self.weights = [torch.randn(n, k, device=p.device).to(torch.float8_e4m3fn) for _ in range(copies_for(n * k))]
        self.scale = torch.ones((), device=p.device)

    def run_rows(self, m: int) -> int:
        """Rows the kernel is run with: ``m``, or ``m`` padded to 16 if cuBLASLt refuses it."""
        for m_run in (m, -(-m // 16) * 16):
            x = torch.randn(m_run, self.k, device=self.p.device).to(torch.float8_e4m3fn)
            try:
                torch._scaled_mm(x, self.weights[0].t(), scale_a=self.scale, scale_b=self.scale,
                                 out_dtype=torch.bfloat16)
            except RuntimeError:
                continue
            return m_run
        raise RuntimeError(f"_scaled_mm refused m={m}, n={self.n}, k={self.k}")

    def step(self, m_run: int) -> Callable[[int], Callable[[], None]]:
        x = torch.randn(m_run, self.k, device=self.p.device).to(torch.float8_e4m3fn)

        def make(i: int) -> Callable[[], None]:
            w = self.weights[i].t()
            return lambda: torch._scaled_mm(x, w, scale_a=self.scale, scale_b=self.scale, out_dtype=torch.bfloat16)

        return make


class Int4Gemm:
    """Weight-only int4 (group size 128) times bf16 activations: ``torch._weight_int4pack_mm``."""

    group = 128

    def __init__(self, p: Profiler, n: int, k: int) -> None:
        self.p, self.n, self.k = p, n, k
        self.weights = [
            torch._convert_weight_to_int4pack(torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=p.device), 8)
            for _ in range(copies_for(n * k // 2))
        ]
        self.scales = torch.rand(k // self.group, n, 2, dtype=torch.bfloat16, device=p.device)

    def run_rows(self, m: int) -> int:
        return m

    def step(self, m_run: int) -> Callable[[int], Callable[[], None]]:
        x = torch.randn(m_run, self.k, dtype=torch.bfloat16, device=self.p.device)

        def make(i: int) -> Callable[[], None]:
            w = self.weights[i]
            return lambda: torch._weight_int4pack_mm(x, w, self.group, self.scales)

        return make


def gemm_quant(p: Profiler) -> list[list[object]]:
    rows: list[list[object]] = []
    if not p.cuda:
        p.log("gemm_quant: skipped (needs CUDA)")
        return rows
    for kind, kernel in (("fp8", Fp8Gemm), ("int4_w4a16", Int4Gemm)):
        try:
            for model in (m for m in DENSE_MODELS if m.name in QUANT_MODELS):
                for tp in TP_DEGREES:
                    for op, n, k in model.linear_ops(tp)[:4]:
                        gemm = kernel(p, n, k)
                        for m in TOKENS:
                            if kind == "int4_w4a16" and m > 1024:
                                break
                            if p.budget.spent():
                                p.log(f"gemm_quant: budget spent at {kind} {model.name} tp={tp} {op} m={m}")
                                return rows
                            m_run = gemm.run_rows(m)
                            rows.append([kind, model.name, tp, op, m, m_run, n, k, p.time_s(gemm.step(m_run), len(gemm.weights))])
                        del gemm
        except (RuntimeError, TypeError, AttributeError) as error:
            p.log(f"gemm_quant: {kind} failed ({type(error).__name__}: {str(error).splitlines()[0][:200]}); next kind")
    return rows


def _expert_counts(tokens: int, shape: MoEShape, generator: torch.Generator) -> list[int]:
    """Tokens each local expert receives when ``tokens`` tokens pick top-k of all experts uniformly."""
    scores = torch.rand(tokens, shape.total_experts, generator=generator)
    chosen = scores.topk(shape.top_k, dim=1).indices.flatten()
    return torch.bincount(chosen, minlength=shape.total_experts)[: shape.local_experts].tolist()


def moe_grouped(p: Profiler) -> list[list[object]]:
    rows: list[list[object]] = []
    if not p.cuda or not hasattr(torch, "_grouped_mm"):
        p.log("moe_grouped: skipped (needs CUDA and torch._grouped_mm)")
        return rows
    generator = torch.Generator().manual_seed(0)
    for shape in MOE_MODELS:
        counts_by_tokens = {tokens: _expert_counts(tokens, shape, generator) for tokens in TOKENS}
        for op, k, n in (("gate_up", shape.hidden, 2 * shape.expert_intermediate),
                         ("down", shape.expert_intermediate, shape.hidden)):
            copies = copies_for(shape.local_experts * n * k * 2)
            weights = [torch.randn(shape.local_experts, n, k, dtype=torch.bfloat16, device=p.device).transpose(-2, -1)
                       for _ in range(copies)]
            for tokens, counts in counts_by_tokens.items():
                if p.budget.spent():
                    p.log(f"moe_grouped: budget spent at {shape.name} {shape.layout} {op} tokens={tokens}")
                    return rows
                routed = sum(counts)
                if routed == 0:
                    continue
                x = torch.randn(routed, k, dtype=torch.bfloat16, device=p.device)
                offsets = torch.tensor(counts, device=p.device, dtype=torch.int32).cumsum(0, dtype=torch.int32)

                def make(i: int, x=x, offsets=offsets) -> Callable[[], None]:
                    w = weights[i]
                    return lambda: torch._grouped_mm(x, w, offs=offsets)

                try:
                    seconds = p.time_s(make, copies)
                except RuntimeError as error:
                    p.log(f"moe_grouped: {shape.name} {op} tokens={tokens} failed: {str(error).splitlines()[0][:200]}")
                    return rows
                rows.append([shape.name, shape.layout, shape.local_experts, shape.total_experts, shape.top_k,
                             tokens, routed, max(counts), sum(c > 0 for c in counts), op, n, k, seconds])
            del weights
    return rows


def _backends() -> list[tuple[str, list]]:
    from torch.nn.attention import SDPBackend

    return [("flash", [SDPBackend.FLASH_ATTENTION]), ("cudnn", [SDPBackend.CUDNN_ATTENTION])]


def attn_prefill(p: Profiler) -> list[list[object]]:
    """A chunk of ``chunk`` new tokens: its causal square, and its full rectangle over a cached
    context of ``kv_len`` tokens (a chunk after a context costs the sum of the two)."""
    from torch.nn.attention import sdpa_kernel

    rows: list[list[object]] = []
    backends = [("math", None)] if not p.cuda else _backends()
    heads = PREFILL_HEADS[:2] if p.smoke else PREFILL_HEADS
    chunks = (64, 128) if p.smoke else PREFILL_CHUNKS
    contexts = (64,) if p.smoke else PREFILL_CONTEXTS
    for backend, kernels in backends:
        for q_heads, kv_heads in heads:
            for chunk in chunks:
                for causal, kv_len in [(True, chunk)] + [(False, context) for context in contexts]:
                    if p.budget.spent():
                        p.log(f"attn_prefill: budget spent at {backend} {q_heads}/{kv_heads} {chunk}x{kv_len}")
                        return rows
                    q = torch.randn(1, q_heads, chunk, 128, dtype=torch.bfloat16, device=p.device)
                    kv = [torch.randn(1, kv_heads, kv_len, 128, dtype=torch.bfloat16, device=p.device)
                          for _ in range(2)]

                    def make(i: int, q=q, kv=kv, causal=causal) -> Callable[[], None]:
                        return lambda: F.scaled_dot_product_attention(q, kv[0], kv[1], is_causal=causal,
                                                                      enable_gqa=True)

                    try:
                        if kernels is None:
                            seconds = p.time_s(make, 1)
                        else:
                            with sdpa_kernel(kernels):
                                seconds = p.time_s(make, 1)
                    except RuntimeError as error:
                        p.log(f"attn_prefill: {backend} {q_heads}/{kv_heads} {chunk}x{kv_len}: "
                              f"{str(error).splitlines()[0][:160]}")
                        break
                    rows.append([backend, q_heads, kv_heads, 128, chunk, kv_len, int(causal), seconds])
    return rows


def attn_decode(p: Profiler) -> list[list[object]]:
    from torch.nn.attention import sdpa_kernel

    rows: list[list[object]] = []
    backends = [("math", None)] if not p.cuda else _backends()
    heads = DECODE_HEADS[:2] if p.smoke else DECODE_HEADS
    batches = (1, 4) if p.smoke else DECODE_BATCHES
    contexts = (64, 256) if p.smoke else DECODE_CONTEXTS
    for backend, kernels in backends:
        for kv_heads, group in heads:
            for batch in batches:
                for context in contexts:
                    kv_bytes = 2 * batch * kv_heads * context * 128 * 2
                    if kv_bytes > DECODE_KV_BYTES_CAP:
                        continue
                    if p.budget.spent():
                        p.log(f"attn_decode: budget spent at {backend} {kv_heads}x{group} b={batch} ctx={context}")
                        return rows
                    copies = copies_for(kv_bytes)
                    sets = [(torch.randn(batch, kv_heads, group, 128, dtype=torch.bfloat16, device=p.device),
                             torch.randn(batch, kv_heads, context, 128, dtype=torch.bfloat16, device=p.device),
                             torch.randn(batch, kv_heads, context, 128, dtype=torch.bfloat16, device=p.device))
                            for _ in range(copies)]

                    def make(i: int, sets=sets) -> Callable[[], None]:
                        q, k, v = sets[i]
                        return lambda: F.scaled_dot_product_attention(q, k, v)

                    try:
                        if kernels is None:
                            seconds = p.time_s(make, copies)
                        else:
                            with sdpa_kernel(kernels):
                                seconds = p.time_s(make, copies)
                    except RuntimeError as error:
                        p.log(f"attn_decode: {backend} {kv_heads}x{group} b={batch} ctx={context}: "
                              f"{str(error).splitlines()[0][:160]}")
                        continue
                    rows.append([backend, kv_heads, group, 128, batch, context, seconds])
                    del sets
    return rows


class LlamaForward:
    """A Llama-3.1-8B-shaped decoder (random bf16 weights) with a static KV cache."""

    def __init__(self, shape: DenseShape, layers: int, device: str, batch: int, context: int) -> None:
        h, d = shape.hidden, shape.head_dim
        self.shape, self.batch, self.context = shape, batch, context
        self.q_width, self.kv_width = shape.heads * d, shape.kv_heads * d

        def w(n: int, k: int) -> torch.Tensor:
            return torch.randn(n, k, dtype=torch.bfloat16, device=device) * 0.02

        self.layers = [
            {
                "qkv": w(self.q_width + 2 * self.kv_width, h),
                "o": w(h, self.q_width),
                "gate_up": w(2 * shape.intermediate, h),
                "down": w(h, shape.intermediate),
                "k_cache": torch.randn(batch, shape.kv_heads, context, d, dtype=torch.bfloat16, device=device),
                "v_cache": torch.randn(batch, shape.kv_heads, context, d, dtype=torch.bfloat16, device=device),
            }
            for _ in range(layers)
        ]
        self.norm = torch.ones(h, dtype=torch.bfloat16, device=device)
        self.embedding = w(shape.vocab, h)
        self.lm_head = w(shape.vocab, h)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """One decode step of ``batch`` sequences (attention over the cache, no cache write)."""
        s, b, d = self.shape, self.batch, self.shape.head_dim
        group = s.heads // s.kv_heads
        x = F.embedding(tokens, self.embedding)
        for layer in self.layers:
            hidden = F.rms_norm(x, (s.hidden,), self.norm)
            qkv = F.linear(hidden, layer["qkv"])
            q = qkv[:, : self.q_width].view(b, s.kv_heads, group, d)
            attention = F.scaled_dot_product_attention(q, layer["k_cache"], layer["v_cache"])
            x = x + F.linear(attention.reshape(b, self.q_width), layer["o"])
            hidden = F.rms_norm(x, (s.hidden,), self.norm)
            gate, up = F.linear(hidden, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        return F.linear(F.rms_norm(x, (s.hidden,), self.norm), self.lm_head)

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """One prefill of a single sequence of ``len(tokens)`` tokens (no cached context)."""
        s, d = self.shape, self.shape.head_dim
        n = tokens.shape[0]
        x = F.embedding(tokens, self.embedding)
        for layer in self.layers:
            hidden = F.rms_norm(x, (s.hidden,), self.norm)
            qkv = F.linear(hidden, layer["qkv"])
            q, k, v = qkv.split([self.q_width, self.kv_width, self.kv_width], dim=-1)
            attention = F.scaled_dot_product_attention(
                q.view(1, n, s.heads, d).transpose(1, 2), k.view(1, n, s.kv_heads, d).transpose(1, 2),
                v.view(1, n, s.kv_heads, d).transpose(1, 2), is_causal=True, enable_gqa=True)
            x = x + F.linear(attention.transpose(1, 2).reshape(n, self.q_width), layer["o"])
            hidden = F.rms_norm(x, (s.hidden,), self.norm)
            gate, up = F.linear(hidden, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        return F.linear(F.rms_norm(x[-1:], (s.hidden,), self.norm), self.lm_head)


def model_forward(p: Profiler) -> list[list[object]]:
    """Whole forward passes; on CUDA attention may use any fused back-end but not the math one."""
    if not p.cuda:
        return _model_forward(p)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        return _model_forward(p)


FORWARD_MODELS = (
    (DenseShape("Llama-3.1-8B", 4096, 32, 8, 128, 14336, 128256), 32),
    (DenseShape("Llama-3.1-70B/tp4-rank", 8192, 16, 2, 128, 7168, 32064), 80),
)
"""Whole models, and one GPU's share of a TP4 Llama-3.1-70B (its heads, MLP and vocabulary
columns; no all-reduce): the per-GPU work of a tensor-parallel forward pass."""

FORWARD_DECODE = ((1, 1024), (2, 1024), (4, 1024), (8, 1024), (16, 1024), (32, 1024), (64, 1024), (128, 1024),
                  (256, 1024), (1, 8192), (16, 8192), (64, 4096))
FORWARD_PREFILL = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _model_forward(p: Profiler) -> list[list[object]]:
    rows: list[list[object]] = []
    models = ((DenseShape("tiny", 256, 4, 2, 64, 512, 1000), 2),) if p.smoke else FORWARD_MODELS
    for shape, layers in models:
        for batch, context in ((1, 64), (4, 64)) if p.smoke else FORWARD_DECODE:
            if p.budget.spent():
                p.log(f"model_forward: budget spent at {shape.name} decode b={batch}")
                return rows
            model = LlamaForward(shape, layers, p.device, batch, context)
            tokens = torch.randint(0, shape.vocab, (batch,), device=p.device)
            seconds = p.time_s(lambda i, model=model, tokens=tokens: (lambda: model.decode(tokens)), 1)
            rows.append([shape.name, layers, "decode", batch, batch, context, seconds])
            del model
            if p.cuda:
                torch.cuda.empty_cache()
        model = LlamaForward(shape, layers, p.device, 1, 1)
        for n in (32, 128) if p.smoke else FORWARD_PREFILL:
            if p.budget.spent():
                p.log(f"model_forward: budget spent at {shape.name} prefill n={n}")
                return rows
            tokens = torch.randint(0, shape.vocab, (n,), device=p.device)
            seconds = p.time_s(lambda i, model=model, tokens=tokens: (lambda: model.prefill(tokens)), 1)
            rows.append([shape.name, layers, "prefill", 1, n, 0, seconds])
        del model
        if p.cuda:
            torch.cuda.empty_cache()
    return rows


SECTIONS: dict[str, tuple[float, Callable[[Profiler], list], str, list[str]]] = {
    "gemm_bf16": (30, gemm_bf16, "gemm_bf16.csv", ["model", "tp", "op", "m", "n", "k", "seconds"]),
    "attn_decode": (12, attn_decode, "attn_decode.csv",
                    ["backend", "kv_heads", "group", "head_dim", "batch", "context", "seconds"]),
    "attn_prefill": (12, attn_prefill, "attn_prefill.csv",
                     ["backend", "q_heads", "kv_heads", "head_dim", "chunk", "kv_len", "causal", "seconds"]),
    "model_forward": (10, model_forward, "model_forward.csv",
                      ["model", "layers", "phase", "batch", "tokens", "context", "seconds"]),
    "gemm_quant": (18, gemm_quant, "gemm_quant.csv",
                   ["kind", "model", "tp", "op", "m", "m_run", "n", "k", "seconds"]),
    "moe_grouped": (10, moe_grouped, "moe_grouped.csv",
                    ["model", "layout", "local_experts", "total_experts", "top_k", "tokens", "routed_rows",
                     "max_rows_per_expert", "experts_hit", "op", "n", "k", "seconds"]),
}


def environment(p: Profiler) -> dict[str, object]:
    info: dict[str, object] = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if p.cuda else None,
        "device": p.device,
    }
    if p.cuda:
        props = torch.cuda.get_device_properties(0)
        info |= {"gpu": props.name, "sm_count": props.multi_processor_count,
                 "memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}"}
        try:
            import subprocess

            info["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                 "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as error:
            info["nvidia_smi"] = f"unavailable: {error}"
    return info


def iter_sections(only: list[str] | None) -> Iterator[str]:
    for name in SECTIONS:
        if only is None or name in only:
            yield name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--smoke", action="store_true", help="tiny grid on the CPU (checks the script)")
    parser.add_argument("--only", default=None, help="comma-separated sections: " + ",".join(SECTIONS))
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    for name in only or []:
        if name not in SECTIONS:
            parser.error(f"--only {name}: unknown section; known: {', '.join(SECTIONS)}")
    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device (use --smoke to check the script on the CPU)")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    chosen = list(iter_sections(only))
    budget = Budget(args.budget_s * 0.95, {name: SECTIONS[name][0] for name in chosen} | {"copy": 1.0})
    p = Profiler(args.out, device, args.smoke, budget)
    started = time.perf_counter()
    info = environment(p)
    budget.start("copy")
    info["copy_bytes_seconds"] = profile_copy(p)
    p.log(f"environment: {json.dumps({k: v for k, v in info.items() if k != 'copy_bytes_seconds'})}")
    (args.out / "env.json").write_text(json.dumps(info, indent=1))
    for name in chosen:
        _, run, filename, header = SECTIONS[name]
        budget.start(name)
        section_started = time.perf_counter()
        try:
            rows = run(p)
        except Exception as error:  # keep the other sections' measurements
            p.log(f"{name}: failed: {type(error).__name__}: {error}")
            rows = []
        p.write(filename, header, rows)
        p.log(f"{name}: {time.perf_counter() - section_started:.1f} s")
        if p.cuda:
            torch.cuda.empty_cache()
    p.log(f"total: {time.perf_counter() - started:.1f} s")
    (args.out / "log.txt").write_text("\n".join(p.log_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
