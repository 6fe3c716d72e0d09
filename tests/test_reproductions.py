"""The reproductions runner: one page of headline rows, a smoke warning first in --quick, and a
clear error for a script without headlines() or a row that misses without a cause."""

from __future__ import annotations

import contextlib
import datetime
import re
import types
from pathlib import Path

import pytest

from experiments import reproductions
from experiments.headlines import Headline
from markdown_tables import unpadded


def row(ours: float, cause: str = "") -> Headline:
    return Headline(paper="P", where="Fig. 1", claim="speed-up", metric="speed-up", unit="×", paper_value=3.0,
                    paper_text="3×", ours=ours, no_effect=1.0, setup="paper setup", command="python -m x", cause=cause)


def fake_script(rows: list[Headline]) -> types.ModuleType:
    """A module with main(argv) writing results.json under --out and headlines() returning ``rows``."""
    module = types.ModuleType("fake")

    def main(argv: list[str]) -> int:
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "results.json").write_text('{"quick": %s}' % str("--quick" in argv).lower())
        return 0

    module.main = main
    module.headlines = lambda results: rows if results["quick"] else []
    return module


def test_quick_run_of_a_real_script_writes_a_page_whose_first_line_is_the_smoke_warning(tmp_path):
    assert reproductions.main(["--quick", "--out", str(tmp_path), "--only", "pascal_reproduction"]) == 0
    page = unpadded((tmp_path / "reproductions.md").read_text()).splitlines()
    assert page[0] == reproductions.SMOKE_WARNING and "not comparable to the papers" in page[0]
    table = [line for line in page if line.startswith("| PASCAL |")]
    assert len(table) == 6  # two TTFT cuts, blocking, violations; the two cuts of the KV-constrained variant
    assert any(line.startswith("Wall time per script: pascal_reproduction ") for line in page)


def test_page_counts_rows_and_shows_causes_only_for_rows_that_miss():
    rows = [row(3.5), row(1.2, cause="a named mechanism"), row(0.5, cause="another mechanism")]
    # ratios: 2.5 / 2 = 1.25 (✓ ✓), 0.2 / 2 = 0.1 (✓ ✗), -0.5 / 2 = -0.25 (✗ ✗)
    lines = reproductions.page_lines(rows, {"fake": 12.0}, quick=False, today=datetime.date(2025, 1, 2))
    assert lines[0].startswith("# Paper reproductions")
    assert "1 of 3 rows reproduce in direction with magnitude within 2x (2 of 3 in direction). Generated 2025-01-02" in lines[2]
    table = [line for line in lines if line.startswith("| P |")]
    assert [cells.split(" | ")[5:8] for cells in table] == [["1.25", "✓", "✓"], ["0.10", "✓", "✗"], ["-0.25", "✗", "✗"]]
    assert "a named mechanism" in table[1] and "another mechanism" in table[2] and "mechanism" not in table[0]


def _refused(argv: list[str], message: str, capsys) -> None:
    """The runner prints one error line carrying ``message`` (a regular expression) and returns 2."""
    assert reproductions.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("experiments.reproductions: error: ") and err.count("\n") == 1 and re.search(message, err), err


def test_a_missing_row_without_cause_makes_the_runner_raise(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(reproductions, "load_script", lambda name: fake_script([row(3.5), row(1.2)]))
    _refused(["--quick", "--out", str(tmp_path), "--only", "pascal_reproduction"], "does not reproduce .*names no cause", capsys)
    assert not (tmp_path / "reproductions.md").exists()


def test_a_script_without_headlines_is_named(monkeypatch, capsys):
    def without_headlines(name: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.main = lambda argv: 0
        return module

    monkeypatch.setattr(reproductions.importlib, "import_module", without_headlines)
    _refused(["--quick", "--only", "cauchy_autoscaling"], r"experiments\.cauchy_autoscaling has no headlines\(\)", capsys)


def test_unknown_script_names_are_refused(capsys):
    _refused(["--quick", "--only", "cauchy_ilp"], "--only cauchy_ilp: not a reproduction; known: pascal, multitier", capsys)
    assert [reproductions.script_name(n) for n in ("pascal", "cauchy", "cauchy_autoscaling")] == [
        "pascal_reproduction", "cauchy_reproduction", "cauchy_autoscaling"]
    _refused(["--quick", "--only", "pascal_reproduction,"], "--only", capsys)


def test_reuse_builds_the_page_from_an_earlier_run_without_running_the_script(tmp_path, monkeypatch, capsys):
    script = fake_script([row(3.5), row(1.2, cause="a named mechanism")])
    monkeypatch.setattr(reproductions, "load_script", lambda name: script)
    assert reproductions.main(["--quick", "--out", str(tmp_path), "--only", "pascal_reproduction"]) == 0
    first = unpadded((tmp_path / "reproductions.md").read_text()).splitlines()

    def must_not_run(argv: list[str]) -> int:
        raise AssertionError(f"--reuse ran the script with {argv}")

    script.main = must_not_run
    assert reproductions.main(["--quick", "--reuse", "--out", str(tmp_path), "--only", "pascal_reproduction"]) == 0
    again = unpadded((tmp_path / "reproductions.md").read_text()).splitlines()
    assert [line for line in again if line.startswith("| P |")] == [line for line in first if line.startswith("| P |")]
    assert "Wall time per script: pascal_reproduction (results.json of an earlier run)." in again
    _refused(["--quick", "--reuse", "--out", str(tmp_path / "elsewhere"), "--only", "pascal_reproduction"], "no .*elsewhere.*results.json to reuse", capsys)


def test_a_full_size_run_with_only_replaces_those_rows_and_keeps_the_others(tmp_path, monkeypatch):
    """Rows are matched by their command: the pascal row of the earlier page is replaced, the
    multitier row is kept, and the summary counts both."""
    def script_row(ours: float, script: str, cause: str = "") -> Headline:
        return Headline(paper="P", where="Fig. 1", claim="speed-up", metric="speed-up", unit="×", paper_value=3.0,
                        paper_text="3×", ours=ours, no_effect=1.0, setup="paper setup",
                        command=f"python -m experiments.{script}", cause=cause)

    page = tmp_path / "reproductions.md"
    earlier = reproductions.page_lines([script_row(0.5, "pascal_reproduction", "old cause"),
                                        script_row(3.5, "multitier_reproduction")],
                                       {"pascal_reproduction": 1.0, "multitier_reproduction": 1.0}, quick=False,
                                       today=datetime.date(2025, 1, 1))
    page.write_text("\n".join(earlier))
    monkeypatch.setattr(reproductions, "PAGE", page)
    script = fake_script([script_row(2.5, "pascal_reproduction")])
    script.headlines = lambda results: [script_row(2.5, "pascal_reproduction")]
    monkeypatch.setattr(reproductions, "load_script", lambda name: script)
    assert reproductions.main(["--out", str(tmp_path / "out"), "--only", "pascal_reproduction"]) == 0
    lines = unpadded(page.read_text()).splitlines()
    table = [line for line in lines if line.startswith("| P |")]
    assert len(table) == 2 and "old cause" not in page.read_text()
    kept_row = next(line for line in unpadded("\n".join(earlier)).splitlines()
                    if line.startswith("| P |") and "multitier_reproduction" in line)
    assert table[0].split(" | ")[5:8] == ["0.75", "✓", "✓"] and table[1] == kept_row
    assert lines[2].startswith("2 of 2 rows reproduce") and "--only pascal_reproduction" in lines[2]
    assert "the rows of multitier_reproduction are kept from the earlier full-size page" in lines[2]
    # the kept script's wall time stays, in script order, beside the new one
    assert lines[-1] == "Wall time per script: pascal_reproduction 0 s, multitier_reproduction 1 s."


def test_workers_and_address_reach_only_the_scripts_that_fan_out(tmp_path, monkeypatch):
    seen: dict[str, list[str]] = {}

    def recording(name: str, takes_flags: bool) -> types.ModuleType:
        module = fake_script([row(3.5)])
        write = module.main

        def main(argv: list[str]) -> int:
            seen[name] = argv
            return write(argv)

        module.main = main
        if takes_flags:
            module.FANS_OUT = True
        return module

    monkeypatch.setattr(reproductions, "load_script",
                        lambda name: recording(name, name == "multitier_reproduction"))
    sessions = _recorded_ray_sessions(monkeypatch)
    assert reproductions.main(["--quick", "--out", str(tmp_path), "--only", "multitier_reproduction,pascal_reproduction",
                               "--workers", "3", "--address", "auto"]) == 0
    assert seen["multitier_reproduction"][-4:] == ["--workers", "3", "--address", "auto"]
    assert "--workers" not in seen["pascal_reproduction"] and "--address" not in seen["pascal_reproduction"]
    assert sessions == [(3, "auto", "open"), (3, "auto", "closed")]  # one Ray around both scripts


def _recorded_ray_sessions(monkeypatch) -> list[tuple[int, str | None, str]]:
    """Replace simulator.fanout.ray_session by a recorder (no Ray starts): its opens and closes."""
    sessions: list[tuple[int, str | None, str]] = []

    @contextlib.contextmanager
    def ray_session(cpus: int, address: str | None = None):
        sessions.append((cpus, address, "open"))
        yield None
        sessions.append((cpus, address, "closed"))

    monkeypatch.setattr(reproductions.fanout, "ray_session", ray_session)
    return sessions


@pytest.mark.parametrize(("argv", "fans", "opened"), [
    (["--workers", "2"], True, [(2, None, "open"), (2, None, "closed")]),
    (["--workers", "1"], True, []),  # the jobs run in this process: no Ray
    (["--workers", "1", "--address", "auto"], True, [(1, "auto", "open"), (1, "auto", "closed")]),
    (["--workers", "2"], False, []),  # no script fans out
])
def test_the_runner_starts_one_ray_for_the_scripts_that_fan_out(tmp_path, monkeypatch, argv, fans, opened):
    scripts = []

    def script(name: str) -> types.ModuleType:
        module = fake_script([row(3.5)])
        write = module.main
        module.main = lambda argv: scripts.append((name, list(sessions))) or write(argv)
        if fans:
            module.FANS_OUT = True
        return module

    monkeypatch.setattr(reproductions, "load_script", script)
    sessions = _recorded_ray_sessions(monkeypatch)
    assert reproductions.main(["--quick", "--out", str(tmp_path), "--only", "pascal,multitier", *argv]) == 0
    assert sessions == opened
    assert [(name, open_then) for name, open_then in scripts] == [
        (name, opened[:1]) for name in ("pascal_reproduction", "multitier_reproduction")]  # both ran inside it
    reused = reproductions.shared_ray(["pascal_reproduction"], True, 2, None)  # --reuse runs nothing: no Ray
    assert isinstance(reused, contextlib.nullcontext) and sessions == opened


def test_the_scripts_that_fan_out_take_the_runners_flags():
    assert [name for name in reproductions.SCRIPTS if reproductions.fans_out(reproductions.load_script(name))] == [
        "pascal_reproduction", "multitier_reproduction", "cauchy_autoscaling", "cauchy_reproduction",
        "cascadia_reproduction", "cascadia_fluctuating", "cascadeserve_reproduction"]


def test_workers_must_be_a_positive_integer(tmp_path, capsys):
    _refused(["--quick", "--out", str(tmp_path), "--workers", "0"], r"--workers must be a positive integer, got 0", capsys)


def test_a_script_that_stops_with_an_error_is_one_error_line_and_no_page(tmp_path, monkeypatch, capsys):
    failing = types.ModuleType("failing")
    failing.main = lambda argv: 2
    monkeypatch.setattr(reproductions, "load_script", lambda name: failing)
    _refused(["--quick", "--out", str(tmp_path), "--only", "cascadia"],
             r"experiments\.cascadia_reproduction stopped with status 2 .*--reuse --only", capsys)
    assert not (tmp_path / "reproductions.md").exists()
