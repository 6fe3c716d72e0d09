"""Sarathi-Serve: chunked prefill with stall-free decodes (Agrawal et al., OSDI 2024)."""

from __future__ import annotations

from simulator.schedulers.base import LocalScheduler


class SarathiScheduler(LocalScheduler):
    """FCFS order; every iteration carries all running decodes plus prompt chunks that fill
    the remaining token budget (default 512), so decodes never stall behind a long prefill."""

    name = "sarathi"

    def __init__(self, chunk_tokens: int = 512) -> None:
        super().__init__()
        if chunk_tokens <= 0:
            raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
        self.chunked_prefill_tokens = chunk_tokens
