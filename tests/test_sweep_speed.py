"""The sweep-throughput benchmark counts failed cells instead of summing their missing time."""

import json

from margin_solver.bench import sweeps
from margin_solver.bench.measure import sweep_speed
from margin_solver.bench.methods import SWEEP_METHODS
from margin_solver.bench.sweeps import CellJob, SweepConfig, SweepGrid, run_cell


def _boom(train, test, call):
    raise ValueError("no answer today")


def test_a_failed_method_call_is_timed():
    cell = SweepGrid(n=[8], d=[40], kappa=[4.0], methods=["boom"]).cells()[0]
    row = run_cell(CellJob(cell, _boom, SweepConfig(n_test=20)))
    assert row["status"] == "failed" and "no answer today" in row["message"]
    assert row["seconds"] >= 0


def test_failed_cells_are_counted_and_listed_not_summed_as_nan(monkeypatch, capsys):
    monkeypatch.setitem(SWEEP_METHODS, "boom", _boom)
    grid = SweepGrid(n=[8], d=[40], kappa=[4.0], methods=["uniform-svm", "boom"])
    monkeypatch.setattr(
        sweep_speed, "_grids", lambda name, seeds: ([grid], SweepConfig(n_test=20, check=False))
    )
    assert sweep_speed.main(["--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    assert "| joblib --jobs 1 | 2 | 1 |" in out
    assert (
        "failed cell, joblib --jobs 1: n=8 d=40 T=2 kappa=4 eta=0.1 seed=0 boom heads=1: "
        "ValueError: no answer today"
    ) in out


def test_the_checker_runs_on_then_off_each_against_its_own_first_backend(monkeypatch, tmp_path):
    grid = SweepGrid(n=[8], d=[40], kappa=[4.0], methods=["uniform-svm"])
    monkeypatch.setattr(sweep_speed, "_grids", lambda name, seeds: ([grid], SweepConfig(n_test=20)))
    measured = []
    real = sweeps.data_evidence
    monkeypatch.setattr(sweeps, "data_evidence", lambda data: measured.append(1) or real(data))
    out = tmp_path / "speed.json"
    assert sweep_speed.main(["--jobs", "1", "--checker", "on", "off", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["backend"] for r in rows] == ["joblib --jobs 1", "joblib --jobs 1 (no checker)"]
    assert all(r["speed-up"] == 1 for r in rows)
    assert len(measured) == 1  # one data point, measured only in the run with the checker
