"""PASCAL's token pacer as an SLO flag (PASCAL §IV-B, Alg. 1; §IV-C).

The pacer releases answer tokens to the user at one token per TPOT target; it does not change
which requests run (``simulator.schedulers.pascal``), so the simulator keeps only its flag:
whether some answering request's buffer ran dry.
"""

from __future__ import annotations

from collections.abc import Iterable

from simulator.sequence import Sequence


def answering_behind_pace(sequences: Iterable[Sequence], now_s: float, tpot_target_s: float) -> bool:
    """True when an answering request among ``sequences`` has delivered fewer answer tokens by
    ``now_s`` than a reader taking one token per ``tpot_target_s`` since its first answer token
    would have read, i.e. its pacer buffer ran dry (Alg. 1's ``t_i`` is the negation)."""
    if not tpot_target_s > 0:
        raise ValueError(f"tpot_target_s must be positive, got {tpot_target_s}")
    for seq in sequences:
        answered = seq.generated_tokens - seq.reasoning_tokens
        if answered > 0 and answered < seq.output_tokens - seq.reasoning_tokens:
            if answered < 1 + int((now_s - seq.first_answer_token_s) / tpot_target_s):
                return True
    return False
