"""The demo job end to end on its built-in data."""

import json
from pathlib import Path

import docrun
import pytest

from margin_solver.cli import main

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"


def _page_summary() -> docrun.Command:
    """The demo command of docs/usage.md's quick start with the summary it shows."""
    (cmd,) = [
        cmd
        for block in docrun.blocks(USAGE)
        if block.kind == "shell"
        for cmd in docrun.commands(block)
        if cmd.command.startswith("margin-solver demo")
    ]
    return cmd


@pytest.mark.slow
def test_demo_tells_the_benign_and_harmful_story(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--out", "results"]) == 0
    out = capsys.readouterr().out
    assert "Summary" in out and "files written" in out
    # docs/usage.md shows the summary (the tail of what the demo prints) as it is today
    shown = _page_summary()
    assert shown.command == f"margin-solver demo --out results | tail -n {len(shown.expected)}"
    tail = "\n".join(out.splitlines()[-len(shown.expected) :])
    differences = docrun.differences(shown.expected, tail, "docs/usage.md, the demo's summary")
    assert not differences, "\n".join(differences)
    results = tmp_path / "results"
    report = json.loads((results / "demo.json").read_text())
    benign, harmful = report["settings"]["benign"], report["settings"]["harmful"]
    for rep in (benign, harmful):
        mn = rep["min_norm"]
        assert mn["status"] == "optimal" and mn["train_error"] == 0.0
        # certified: the bound never exceeds the value and the gap is small
        assert mn["lower_bound"] <= mn["norm_v"] * (1 + 1e-9) and mn["gap"] < 1e-3
    assert benign["check"]["predicted_regime"] == "benign"
    assert harmful["check"]["predicted_regime"] == "harmful"
    assert (
        benign["min_norm"]["test_error_clean"] < 0.05
        and harmful["min_norm"]["test_error_clean"] > 0.3
    )
    assert (
        benign["min_norm"]["attn_signal_clean"] > 0.9
        and benign["min_norm"]["attn_signal_noisy"] < 0.1
    )
    assert len(report["phase_diagram"]) == 2 and "min-norm: benign in" in report["phase_diagram"][0]
    assert {
        "demo_attention.png",
        "demo_phase_seed0.png",
        "demo_phase_seed0.csv",
        "demo_phase_seed0.json",
        "demo.json",
    } == {name.split("/")[-1] for name in report["files"]}
    for name in report["files"]:
        assert (results / name.split("/")[-1]).stat().st_size > 0
