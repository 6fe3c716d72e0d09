"""PASCAL's token-pacer flag (``simulator.pacer``): an answer falls behind pace once a reader
taking one token per TPOT target has read more than it delivered."""

from __future__ import annotations

import pytest

from simulator.pacer import answering_behind_pace
from simulator.request import Request
from simulator.sequence import Sequence


def answering(answered: int, answer_tokens: int = 20, reasoning: int = 10) -> Sequence:
    seq = Sequence(Request(0, 0.0, 100, reasoning + answer_tokens, reasoning_tokens=reasoning), record_token_curve=False)
    seq.generated_tokens = reasoning + answered
    seq.first_answer_token_s = 1.0
    return seq


def test_an_answer_is_behind_once_the_reader_passes_its_last_token():
    seq = answering(3)
    assert not answering_behind_pace([seq], 1.5, 0.25)  # the reader is at token 1 + 2 = 3
    assert answering_behind_pace([seq], 1.75, 0.25)  # token 4 is due


def test_reasoning_and_fully_delivered_answers_are_never_behind():
    assert not answering_behind_pace([answering(0), answering(20)], 100.0, 0.25)
    assert answering_behind_pace([answering(0), answering(20), answering(3)], 100.0, 0.25)


@pytest.mark.parametrize("tpot_target_s", [0.0, -0.1, float("nan")])
def test_a_non_positive_tpot_target_is_refused(tpot_target_s):
    with pytest.raises(ValueError, match="tpot_target_s"):
        answering_behind_pace([], 0.0, tpot_target_s)
