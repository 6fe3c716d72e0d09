"""The documentation works as written: every tutorial's Python runs (tiny budgets), the site
builds with warnings as errors, and no code, doc or report cites a paper by a file name
(``<paper>.txt``): papers are cited by short name, defined once in ``hardware.references``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hardware.references import PAPERS, reference, references_markdown

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
PAPER_FILE = re.compile(r"\b(cascadeserve|cascadia|cauchy|multitier-llumnix|pascal)\.txt\b")
SCANNED = (".py", ".md", ".yml", ".yaml", ".csv", ".cff", ".toml", ".txt")


def test_there_are_four_tutorials():
    assert [p.stem for p in TUTORIALS] == ["add-a-reproduction", "add-a-scenario", "train-an-agent", "write-a-policy"]


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_code_runs(page, tmp_path):
    blocks = PYTHON_BLOCK.findall(page.read_text())
    assert blocks, f"{page.name} has no python block"
    script = tmp_path / "tutorial.py"
    script.write_text("\n\n".join(blocks))
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's packages, wherever it is installed
    completed = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                               env=environment)
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_readme_example_prints_the_slo_attainment_of_its_episode(tmp_path):
    """The README's short example runs as written and prints a fraction."""
    blocks = PYTHON_BLOCK.findall((ROOT / "README.md").read_text())
    assert len(blocks) == 1, "the README has one python example"
    script = tmp_path / "readme_example.py"
    script.write_text(blocks[0])
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                               env=environment)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert 0.0 <= float(completed.stdout.strip().splitlines()[-1]) <= 1.0


def test_docs_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    completed = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    envs_page = (tmp_path / "site" / "envs" / "index.html").read_text()
    assert envs_page.count("Observation tables") >= 5 and "kv_used_fraction" in envs_page  # generated from the schema
    references = (tmp_path / "site" / "references" / "index.html").read_text()
    assert all(paper.title.split(":")[0] in references for paper in PAPERS.values())


def test_no_paper_is_cited_by_file_name():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    hits = [f"{path}:{number}" for path in tracked if path.endswith(SCANNED) and (ROOT / path).is_file()
            for number, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1)
            if PAPER_FILE.search(line) and path != "tests/test_docs.py"]
    assert hits == [], f"{len(hits)} citations by file name, first: {hits[:5]}"


def test_each_short_name_is_defined_once_with_a_full_reference():
    assert list(PAPERS) == ["Llumnix-K", "PASCAL", "Cauchy", "Cascadia", "CascadeServe"]
    for short, paper in PAPERS.items():
        assert paper.short == short and paper.authors and paper.title and paper.venue and paper.year >= 2024
    assert str(reference("Cauchy")).endswith("2025. https://doi.org/10.1145/3772052.3772264")
    assert references_markdown().count("\n- **") == len(PAPERS) - 1
    with pytest.raises(ValueError, match="unknown paper 'Vidur'"):
        reference("Vidur")
