"""The compiled core's mutation tool (``tests/mutate_core.py``): which changes it plants, where."""

from __future__ import annotations

import pytest

from mutate_core import Mutant, code_part, line_mutants, summary


def test_code_outside_strings_and_comments_is_mutated_and_nothing_else():
    line = '  if (a < b && c == 1) throw bad("a < b && 1"); // a < b'
    found = {(m.column, m.old, m.new) for m in line_mutants("x.cpp", 7, line)}
    assert found == {(7, " < ", " <= "), (11, " && ", " || "), (16, " == ", " != "), (20, "1", "0")}
    assert code_part(line).endswith('bad("          "); ')


def test_templates_shifts_floats_and_preprocessor_lines_are_left_alone():
    assert line_mutants("x.hpp", 1, "  std::vector<std::pair<int, int>> out << x; double y = 0.5 * 1.0;") == [
        Mutant("x.hpp", 1, 59, " * ", " / ")]
    assert line_mutants("x.hpp", 2, "#define LIMIT (1 + 2)") == []
    assert line_mutants("x.hpp", 3, "  // return a + 1;") == []
    assert {(m.old, m.new) for m in line_mutants("x.cpp", 4, "  best = std::min(best, a) - 1;")} == {
        ("std::min(", "std::max("), (" - ", " + "), ("1", "0")}


def test_a_mutant_changes_its_line_at_its_column_only():
    text = "int f(int a) {\n  return a + a + 1;\n}"
    mutant = next(m for m in line_mutants("f.cpp", 2, text.split("\n")[1]) if m.column == 14)
    assert mutant.apply(text) == "int f(int a) {\n  return a + a - 1;\n}"
    with pytest.raises(ValueError, match="f.cpp:2: ' \\+ ' is not at column 3"):
        Mutant("f.cpp", 2, 3, " + ", " - ").apply(text)


def test_the_summary_counts_statuses_per_file_and_leaves_uncompilable_mutants_out_of_the_score():
    results = [{"path": "a.cpp", "status": s} for s in ("killed", "killed", "survived", "uncompilable")] + [
        {"path": "b.cpp", "status": "timeout"}]
    table = summary(results).split("\n")
    assert table[2] == "| a.cpp | 4 | 2 | 0 | 1 | 1 | 66.7 % |"
    assert table[3] == "| b.cpp | 1 | 0 | 1 | 0 | 0 | 100.0 % |"
    assert table[4] == "| all | 5 | 2 | 1 | 1 | 1 | 75.0 % |"
