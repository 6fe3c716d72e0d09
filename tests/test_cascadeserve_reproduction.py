"""The CascadeServe reproduction's quick run writes its outputs and shows the expected ordering."""

from __future__ import annotations

import json

from experiments.cascadeserve_reproduction import main


def test_quick_reproduction(tmp_path):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    for name in ("report.md", "fig7_gpus.png", "fig8_spiky.png", "results.json"):
        assert (tmp_path / name).stat().st_size > 0
    systems = ("cascadeserve", "cascadeserve_batched", "cascadeserve_fewer_gpus", "model_switching", "static_cascade",
               "most_accurate", "single_3b")
    assert sorted(p.name for p in (tmp_path / "tensorboard").iterdir()) == sorted(systems)
    spiky = json.loads((tmp_path / "results.json").read_text())["spiky"]
    # The 3B alone scores lowest; holding the most accurate cascade through the 50 req/s spike
    # overloads the 70B replicas, which gear switching avoids.
    assert spiky["single_3b"]["quality_mean"] < spiky["cascadeserve"]["quality_mean"] < spiky["most_accurate"]["quality_mean"]
    assert spiky["cascadeserve"]["e2e_p95_s"] < spiky["most_accurate"]["e2e_p95_s"]
    gears = spiky["gears"]
    accuracies = [g[2] for g in gears]
    assert accuracies == sorted(accuracies, reverse=True)
    rows = json.loads((tmp_path / "results.json").read_text())["grid"]["rows"]
    assert {r["system"] for r in rows} == {"cascadeserve", "static_cascade", "model_switching", "static_single"}
    # Model switching gears are single models: top levels up to the served model, then 0.
    switching = [r for r in rows if r["system"] == "model_switching" and r["accuracy"] is not None]
    assert switching and all(g == sorted(g, reverse=True) and set(g) <= {0, 10} for r in switching for g in r["gears"])
    report = (tmp_path / "report.md").read_text()
    assert "2-3x fewer GPUs" in report and "## Left out" in report
