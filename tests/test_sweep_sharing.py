"""A data point's methods share one draw of its data, and each row is what the cell gives alone."""

import numpy as np

from margin_solver.bench import sweeps
from margin_solver.bench.methods import SWEEP_METHODS
from margin_solver.bench.sweeps import (
    CellJob,
    SweepConfig,
    SweepGrid,
    point_jobs,
    run_cell,
    run_point,
)
from margin_solver.theory import check_conditions

METHODS = ["uniform-svm", "gd-two-step", "min-norm"]


def _jobs(config):
    grid = SweepGrid(n=[8, 12], d=[60], kappa=[2.0], T=[2, 3], seeds=2, methods=METHODS)
    return [CellJob(c, SWEEP_METHODS[c.method], config) for c in grid.cells()]


def _strip(row):
    return {k: v for k, v in row.items() if k != "seconds"}


def test_points_group_cells_by_data_key_in_order():
    jobs = _jobs(SweepConfig(n_test=40))
    points = point_jobs(jobs)
    assert len(points) == len(jobs) // len(METHODS)
    assert [j for p in points for j in p.jobs] == jobs  # methods vary fastest: order kept
    for p in points:
        assert len({j.cell.data_key() for j in p.jobs}) == 1


def test_one_draw_per_point_and_rows_equal_the_cells_run_alone(monkeypatch):
    # No certified bound: it is a function of the draw alone and took 9/10 of this test's time.
    config = SweepConfig(n_test=40, method_options={"min-norm": {"certify_max_n": 0}})
    jobs = _jobs(config)
    alone = [run_cell(j) for j in jobs]
    draws = []
    original = sweeps.DATA_SOURCES["paper"]

    def counting(cell, seeds, n_test, options):
        draws.append(cell.data_key())
        return original(cell, seeds, n_test, options)

    monkeypatch.setitem(sweeps.DATA_SOURCES, "paper", counting)
    shared = [row for p in point_jobs(jobs) for row in run_point(p)]
    assert len(draws) == len(jobs) // len(METHODS) == len(set(draws))
    assert [_strip(r) for r in shared] == [_strip(r) for r in alone]


def test_the_checker_measures_a_point_once_and_rows_equal_the_unshared_ones(monkeypatch):
    config = SweepConfig(n_test=40)
    grid = SweepGrid(n=[10], d=[100], kappa=[1.0, 2.5], methods=METHODS)
    points = point_jobs([CellJob(c, SWEEP_METHODS[c.method], config) for c in grid.cells()])
    measured = []
    measure = sweeps.data_evidence

    def counting(train):
        measured.append(train)
        return measure(train)

    monkeypatch.setattr(sweeps, "data_evidence", counting)
    shared = [row for p in points for row in run_point(p)]
    assert len(measured) == len(points) == len({id(t) for t in measured})

    def unshared(train, *, evidence, **kwargs):  # every row measures the data itself
        return check_conditions(train, **kwargs)

    monkeypatch.setattr(sweeps, "check_conditions", unshared)
    alone = [row for p in points for row in run_point(p)]
    assert [_strip(r) for r in shared] == [_strip(r) for r in alone]
    # the per-method part stays per row: methods of one point get different predictions
    assert any(
        len({r["predicted_regime"] for r in shared[i : i + len(METHODS)]}) > 1
        for i in range(0, len(shared), len(METHODS))
    )


def test_methods_cannot_change_the_data_the_next_method_sees(monkeypatch):
    def vandal(train, test, call):
        train.X[0, 0, 0] = np.nan
        return {}

    monkeypatch.setitem(SWEEP_METHODS, "vandal", vandal)
    config = SweepConfig(n_test=20)
    cell = SweepGrid(n=[8], d=[30], kappa=[2.0], methods=["vandal", "uniform-svm"]).cells()
    rows = run_point(point_jobs([CellJob(c, SWEEP_METHODS[c.method], config) for c in cell])[0])
    assert rows[0]["status"] == "failed" and "read-only" in rows[0]["message"]
    assert rows[1]["status"] != "failed"
    assert _strip(rows[1]) == _strip(
        run_cell(CellJob(cell[1], SWEEP_METHODS["uniform-svm"], config))
    )


def test_a_failed_draw_fails_every_cell_of_the_point(monkeypatch):
    def broken(cell, seeds, n_test, options):
        raise ValueError("no data today")

    monkeypatch.setitem(sweeps.DATA_SOURCES, "paper", broken)
    config = SweepConfig(n_test=20)
    cells = SweepGrid(n=[8], d=[30], kappa=[2.0], methods=METHODS).cells()
    rows = run_point(point_jobs([CellJob(c, SWEEP_METHODS[c.method], config) for c in cells])[0])
    assert [r["method"] for r in rows] == METHODS
    assert all(r["status"] == "failed" and "no data today" in r["message"] for r in rows)
