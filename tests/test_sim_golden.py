"""Simulator-level goldens: every case of ``tests/sim_golden`` (a small seeded run of one engine
feature) gives the recorded outcome of every request, field by field, bit for bit, and the
recorded counters. A failure names the case, the request id, the field and both values; re-record
with ``python -m tests.sim_golden.record`` only for an intended change (tests/sim_golden/README.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.sim_golden.cases import CASES
from tests.sim_golden.run import Run
from tests.sim_golden.table import DATA_DIR, MAX_REPORTED, encode, mismatches, read, summary, table, text, write


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_run_gives_the_recorded_outcomes(case):
    recorded = read(DATA_DIR / f"{case.name}.json")
    found = mismatches(recorded, table(case.name, case.feature, case.run()))
    assert not found, f"{len(found)} mismatches with the golden of {case.name}:\n{summary(found)}"


def test_every_case_has_a_table_and_every_table_a_case():
    assert sorted(path.stem for path in DATA_DIR.glob("*.json")) == sorted(case.name for case in CASES)


def test_tables_read_back_bit_for_bit_and_a_difference_is_named(tmp_path):
    """A written table reads back equal; a float one ulp off, a NaN that became a number, a
    changed counter and a missing request are each reported with the request id (or counter
    name), the field and both values."""
    [case] = [c for c in CASES if c.name == "rejections"]
    run = case.run()
    path = tmp_path / "rejections.json"
    write(path, table(case.name, case.feature, run))
    assert mismatches(read(path), table(case.name, case.feature, run)) == []
    first, second, third = run.outcomes[:3]
    assert first.finish_s > 0 and second.reasoning_end_s != second.reasoning_end_s  # a NaN: no reasoning
    changed = [replace(first, finish_s=first.finish_s * (1 + 2**-52)), replace(second, reasoning_end_s=1.5),
               *run.outcomes[3:]]
    found = mismatches(read(path), table(case.name, case.feature, Run(changed, {**run.counters, "preemptions": -1})))
    assert sorted(found) == sorted([
        f"rejections: counter preemptions: recorded {run.counters['preemptions']}, now -1",
        f"rejections: request {third.request_id}: recorded only",
        f"rejections: request {first.request_id}: finish_s: recorded {first.finish_s!r}, now {changed[0].finish_s!r}",
        f'rejections: request {second.request_id}: reasoning_end_s: recorded "nan", now 1.5',
    ])


def test_floats_compare_by_bit_pattern():
    assert text(encode(-0.0)) != text(encode(0.0))
    assert text(encode(float("nan"))) == text(encode(float("nan"))) == '"nan"'
    assert text(encode([float("inf"), 0.1 + 0.2])) == '["inf",0.30000000000000004]'


def test_a_long_list_of_mismatches_is_cut_to_the_first_few():
    found = [f"case: request {i}: finish_s: recorded 1.0, now 2.0" for i in range(MAX_REPORTED + 5)]
    assert summary(found).splitlines() == found[:MAX_REPORTED] + ["... and 5 more mismatches"]


def test_a_token_curve_difference_names_its_first_differing_point():
    [case] = [c for c in CASES if c.name == "pipeline_token_curves"]
    run = case.run()
    expected = table(case.name, case.feature, run)
    first = run.outcomes[0]
    curve = list(first.token_curve)
    curve[2] = (curve[2][0], curve[2][1] + 1)
    outcomes = [replace(first, token_curve=tuple(curve)), *run.outcomes[1:]]
    got = table(case.name, case.feature, Run(outcomes, run.counters))
    assert mismatches(expected, got) == [
        f"{case.name}: request {first.request_id}: token_curve: first differs at point 2: recorded "
        f"{text(encode(list(first.token_curve[2])))}, now {text(encode(list(curve[2])))} "
        f"({len(curve)} points recorded, {len(curve)} now)"
    ]
