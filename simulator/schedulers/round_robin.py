"""Round-robin with a token quantum (pascal.txt §II and §V-A baseline "RR")."""

from __future__ import annotations

from simulator.schedulers.base import LocalScheduler
from simulator.sequence import Sequence


class RoundRobinScheduler(LocalScheduler):
    """Each request gets a quantum of decode tokens (default 500, pascal.txt §V-A); once it has
    used its quantum it goes to the back of the circular order (its priority is lowered).
    Time-sharing: at each iteration the batch is the longest prefix of that order that fits in
    KV memory, so lower-priority running requests are swapped out to host memory to admit
    higher-priority ones (pascal.txt Fig. 2(c))."""

    name = "rr"
    preemptive = True
    default_preemption = "swap"

    def __init__(self, quantum_tokens: int = 500) -> None:
        super().__init__()
        if quantum_tokens <= 0:
            raise ValueError(f"quantum_tokens must be positive, got {quantum_tokens}")
        self.quantum_tokens = quantum_tokens

    def on_enqueue(self, seq: Sequence) -> None:
        super().on_enqueue(seq)
        seq.quantum_start_tokens = seq.generated_tokens

    def iterations_until_change(self, seq: Sequence) -> int | None:
        return self.quantum_tokens - (seq.generated_tokens - seq.quantum_start_tokens)

    def on_boundary(self, running: list[Sequence]) -> None:
        expired = [s for s in running if s.generated_tokens - s.quantum_start_tokens >= self.quantum_tokens]
        expired.sort(key=self.priority_key)
        for seq in expired:
            self.on_enqueue(seq)
