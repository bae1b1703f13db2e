"""The sweep-throughput benchmark counts failed cells instead of summing their missing time."""

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
