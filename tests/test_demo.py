"""The demo job end to end on its built-in data."""

import json

from margin_solver.cli import main


def test_demo_writes_report_and_json(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "margin_solver demo" in out and "kappa" in out
    report = json.loads((tmp_path / "demo.json").read_text())
    svm = report["uniform_attention_svm"]
    assert svm["status"] == "optimal"
    assert abs(svm["min_margin"] - 1.0) < 1e-9 and svm["gap"] < 1e-6
    assert report["data"]["n"] == 40 and report["data"]["kappa"] == 4.0
