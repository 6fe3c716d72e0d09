"""The reproduction scripts' shared harness: the common flags and their checks, the output
folder, results.json, TensorBoard runs, markdown tables, figures and progress lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from experiments import reproductions
from experiments.harness import REPO_ROOT, ExperimentParser, Run, markdown_table, run_name, save_figure

DOC = """First line of a script's docstring.

More text the description leaves out.
"""


def test_parser_defaults_and_optional_flags():
    plain = ExperimentParser(DOC, "demo", "a smoke run")
    assert plain.description == "First line of a script's docstring."
    args = plain.parse_args([])
    assert vars(args) == {"quick": False, "out": REPO_ROOT / "results" / "demo"}
    args = plain.parse_args(["--quick", "--out", "elsewhere"])
    assert args.quick and args.out == Path("elsewhere")

    full = ExperimentParser(DOC, "demo", "a smoke run", seeds=[0, 1, 2], fans_out=True)
    assert vars(full.parse_args([])) == {"quick": False, "out": REPO_ROOT / "results" / "demo", "seeds": [0, 1, 2],
                                         "workers": 2, "address": None}
    args = full.parse_args(["--seeds", "4", "5", "--workers", "1", "--address", "auto"])
    assert (args.seeds, args.workers, args.address) == ([4, 5], 1, "auto")


def test_parser_refuses_negative_seeds_and_workers_below_one():
    parser = ExperimentParser(DOC, "demo", "a smoke run", seeds=[0], fans_out=True)
    with pytest.raises(ValueError, match=r"--seeds must be non-negative; got \[3, -1\]"):
        parser.parse_args(["--seeds", "3", "-1"])
    with pytest.raises(ValueError, match="--workers must be a positive integer, got 0"):
        parser.parse_args(["--workers", "0"])
    with pytest.raises(SystemExit):  # a flag the script does not take stays argparse's error
        ExperimentParser(DOC, "demo", "a smoke run").parse_args(["--seeds", "1"])


def test_run_creates_its_folder_and_writes_results_json_indented_with_a_final_newline(tmp_path):
    out = tmp_path / "a" / "b"
    run = Run(out)
    assert out.is_dir()
    path = run.write_results({"cells": {"x": [1.5, None]}, "n": 2, "where": Path("p/q")})
    assert path == out / "results.json"
    assert path.read_text() == '{\n "cells": {\n  "x": [\n   1.5,\n   null\n  ]\n },\n "n": 2,\n "where": "p/q"\n}\n'
    assert json.loads(path.read_text())["where"] == "p/q"  # what json cannot write goes in as its str


def test_log_lines_end_with_the_runs_wall_seconds(tmp_path, capsys):
    run = Run(tmp_path)
    run.log("grid done")
    assert re.fullmatch(r"grid done \(\d+ s\)\n", capsys.readouterr().out)
    assert 0.0 <= run.elapsed_s < 60.0


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    accumulator = EventAccumulator(str(run))
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def test_tensorboard_writes_one_run_per_system_with_its_scalars_and_drops_stale_runs(tmp_path):
    stale = tmp_path / "tensorboard" / "old_system"
    stale.mkdir(parents=True)
    run = Run(tmp_path)
    root = run.write_tensorboard({
        "Cauchy*": [("fig7/x", 1.5, 0), ("fig7/x", 2.5, 3), ("fig8/y", -1.0, 0)],
        "Mélange": [("fig7/x", 0.25, 0)],
        "PASCAL(NoMigration)": [],
    })
    assert root == tmp_path / "tensorboard"
    assert sorted(p.name for p in root.iterdir()) == ["Cauchy_star", "Melange", "PASCAL_NoMigration"]
    assert scalars(root / "Cauchy_star") == {"fig7/x": [(0, 1.5), (3, 2.5)], "fig8/y": [(0, -1.0)]}
    assert scalars(root / "Melange") == {"fig7/x": [(0, 0.25)]}
    assert scalars(root / "PASCAL_NoMigration") == {}


def test_finish_writes_results_and_tensorboard_and_exits_with_status_0(tmp_path, capsys):
    assert Run(tmp_path).finish({"n": 1}, {"RR+vLLM": [("k", 2.0, 1)]}) == 0
    assert json.loads((tmp_path / "results.json").read_text()) == {"n": 1}
    assert scalars(tmp_path / "tensorboard" / "RR_vLLM") == {"k": [(1, 2.0)]}
    assert re.fullmatch(rf"wrote {re.escape(str(tmp_path))} \(\d+ s\)\n", capsys.readouterr().out)


def test_systems_that_would_share_a_run_folder_are_refused(tmp_path):
    with pytest.raises(ValueError, match="share a TensorBoard run folder"):
        Run(tmp_path).write_tensorboard({"RR+vLLM": [], "RR vLLM": []})


@pytest.mark.parametrize("system, folder", [
    ("PASCAL(NoMigration)", "PASCAL_NoMigration"),
    ("Cascadia (re-scheduling)", "Cascadia_re-scheduling"),
    ("Stand-alone", "Stand-alone"),
    ("Llumnix(no migration)+Llumlet", "Llumnix_no_migration_Llumlet"),
    ("INFaaS+vLLM", "INFaaS_vLLM"),
    ("Cauchy*", "Cauchy_star"),
    ("Mélange", "Melange"),
    ("cauchy_gwrr", "cauchy_gwrr"),
])
def test_run_names_keep_letters_digits_and_dashes(system, folder):
    assert run_name(system) == folder


def test_markdown_table_is_pandas_to_markdown_with_cells_kept_as_text():
    lines = markdown_table(("system", "p95 E2E (s)", "lost"), [("Cascadia", "1.25", 0), ("RR+vLLM", "", 3)])
    assert "\n".join(lines) == (
        "| system   | p95 E2E (s)   | lost   |\n"
        "|:---------|:--------------|:-------|\n"
        "| Cascadia | 1.25          | 0      |\n"
        "| RR+vLLM  |               | 3      |"
    )
    assert markdown_table(("a",), []) == ["| a   |", "|-----|"]
    assert markdown_table(("n",), [("007",)])[2] == "| 007 |"  # a cell is never re-read as a number
    with pytest.raises(ValueError, match="has 2 cells for 3 columns"):
        markdown_table(("a", "b", "c"), [("x", "y")])


def test_save_figure_writes_a_png_and_closes_the_figure(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    save_figure(fig, tmp_path / "f.png", dpi=50)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.number not in plt.get_fignums()


@pytest.mark.parametrize("name", reproductions.SCRIPTS)
def test_every_reproduction_script_takes_the_harness_flags(name, capsys):
    module = reproductions.load_script(name)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--quick" in text and "--out OUT" in text
    assert ("--workers" in text and "--address" in text) == reproductions.fans_out(module)
