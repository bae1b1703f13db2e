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


#: Rows of a small grid as commit 96610f1 (before issue 44's sweep changes) wrote them:
#: (n, seed, method, status, test_error_clean, test_error_noisy, attn_signal_test,
#: min_margin, norm). The test set's errors and attention pin its samples; they are those
#: of the test set drawn in each model's directions (ProjectedSamples), which replaced the
#: full test tokens after 7e58896; the training columns are 96610f1's.
BEFORE = [
    (
        8,
        0,
        "gd-two-step",
        "completed",
        0.025,
        0.1,
        0.4442949336341465,
        16.14917484507747,
        0.5425865558176962,
    ),
    (8, 0, "uniform-svm", "optimal", 0.0, 0.075, 0.5, 0.9999999999999998, 0.49718570494163855),
    (
        8,
        1,
        "gd-two-step",
        "completed",
        0.0,
        0.075,
        0.530327389809664,
        10.717728661495208,
        0.7226864353986593,
    ),
    (8, 1, "uniform-svm", "optimal", 0.0, 0.075, 0.5, 0.9999999999999998, 0.5476709514312506),
    (
        12,
        0,
        "gd-two-step",
        "completed",
        0.025,
        0.1,
        0.48173879649453577,
        12.085105324019871,
        0.9304451720335818,
    ),
    (12, 0, "uniform-svm", "optimal", 0.025, 0.1, 0.5, 0.9999999999999993, 0.8623816412070645),
    (
        12,
        1,
        "gd-two-step",
        "not_fitted",
        0.425,
        0.475,
        0.2849199028731083,
        -1.2103712453593012,
        None,
    ),
    (12, 1, "uniform-svm", "optimal", 0.475, 0.525, 0.5, 0.9999999999999984, 1.2106383693642742),
]


def test_a_small_grid_gives_the_rows_it_gave_before_in_one_process_and_in_two(tmp_path):
    grid = SweepGrid(
        n=[8, 12], d=[60], kappa=[2.0], seeds=2, methods=["uniform-svm", "gd-two-step"]
    )
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}.csv"
        sweeps.run_sweep(grid, out, SweepConfig(n_test=40), jobs=jobs)
        rows = sorted(sweeps.load_results(out), key=lambda r: (r["n"], r["seed"], r["method"]))
        got = [
            (int(r["n"]), int(r["seed"]), r["method"], r["status"])
            + tuple(r[k] for k in ("test_error_clean", "test_error_noisy", "attn_signal_test"))
            + (r["min_margin"], None if np.isnan(r["norm"]) else r["norm"])
            for r in rows
        ]
        assert [g[:4] for g in got] == [b[:4] for b in BEFORE]
        for g, b in zip(got, BEFORE):
            assert g[4:6] == b[4:6]  # error shares: counts of test samples
            np.testing.assert_allclose(
                [x for x in g[6:] if x is not None], [x for x in b[6:] if x is not None], rtol=1e-12
            )
