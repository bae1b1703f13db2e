"""The sweep engine: grids, seeds, resume after interruption, joblib and Dask backends."""

import json
import math
import os
import time

import numpy as np
import pytest

from margin_solver._version import __version__
from margin_solver.bench import sweeps
from margin_solver.bench.methods import SWEEP_METHODS, register_method
from margin_solver.bench.resultlog import read_rows
from margin_solver.bench.sweeps import (
    FIELDS,
    Cell,
    SweepConfig,
    SweepGrid,
    cell_seeds,
    load_results,
    local_map,
    run_sweep,
    sidecar_path,
)
from margin_solver.core.validation import InvalidInputError

GRID = SweepGrid(n=[8, 12], d=[60], kappa=[0.5, 4.0], eta=[0.1], seeds=3, methods=["uniform-svm"])
CONFIG = SweepConfig(sweep_seed=7, n_test=60)


def _rows_without_time(path):
    rows = read_rows(path, FIELDS)
    for row in rows:
        row.pop("seconds")
    return sorted(rows, key=lambda r: tuple(r.values()))


def test_grid_cells_and_snr_kappa_relation():
    cells = GRID.cells()
    assert len(cells) == 2 * 2 * 3
    c = cells[0]
    assert c.snr == pytest.approx(np.sqrt(c.kappa / c.n))
    assert Cell(
        n=10, d=5, T=2, snr=0.5, kappa=None, eta=0.1, seed=0, method="m"
    ).kappa == pytest.approx(2.5)
    with pytest.raises(InvalidInputError, match="exactly one of snr and kappa"):
        SweepGrid(n=[8], d=[10], methods=["uniform-svm"])


def test_seeds_depend_on_the_cell_not_on_order_and_data_not_on_method():
    a, b = GRID.cells()[:2]
    sa, sb = cell_seeds(a, 0), cell_seeds(b, 0)

    def state(s):
        return tuple(s.generate_state(2))

    assert state(sa.train) != state(sb.train)  # different seed index -> different data
    assert len({state(sa.train), state(sa.test), state(sa.init)}) == 3
    other = Cell(a.n, a.d, a.T, None, a.kappa, a.eta, a.seed, "other-method")
    so = cell_seeds(other, 0)
    assert state(so.train) == state(sa.train) and state(so.init) != state(sa.init)
    assert state(cell_seeds(a, 1).train) != state(sa.train)


def test_sweep_writes_rows_and_sidecar(tmp_path):
    out = tmp_path / "s.csv"
    res = run_sweep(GRID, out, CONFIG, jobs=1)
    assert res.success and res.n_run == 12 and res.n_skipped == 0
    rows = load_results(out)
    assert len(rows) == 12
    assert all(r["status"] == "optimal" and r["train_error"] == 0.0 for r in rows)
    assert all(abs(r["min_margin"] - 1) < 1e-6 and r["R"] == 0.0 for r in rows)
    meta = json.loads(sidecar_path(out).read_text())
    assert meta["version"] == __version__
    assert meta["config"]["sweep_seed"] == 7 and meta["runs"][-1]["state"] == "complete"
    # a second run has nothing to do
    again = run_sweep(GRID, out, CONFIG, jobs=1)
    assert again.n_run == 0 and again.n_skipped == 12
    assert len(load_results(out)) == 12


def test_two_logs_differing_only_in_suffix_do_not_share_a_sidecar(tmp_path):
    grid = SweepGrid(n=[8], d=[40], kappa=[4.0], methods=["uniform-svm"])
    run_sweep(grid, tmp_path / "s.csv", CONFIG, jobs=1)
    before = sidecar_path(tmp_path / "s.csv").read_bytes()
    with pytest.raises(
        InvalidInputError, match=r"s\.json is the sidecar of the results log s\.csv"
    ):
        run_sweep(grid, tmp_path / "s.txt", CONFIG, jobs=1)
    assert not (tmp_path / "s.txt").exists()
    assert sidecar_path(tmp_path / "s.csv").read_bytes() == before


@pytest.fixture
def interrupting_method():
    """A method that raises KeyboardInterrupt on its 5th call while armed (a Ctrl-C)."""
    state = {"calls": 0, "armed": True}

    @register_method("test-interrupt")
    def method(train, test, call):
        state["calls"] += 1
        if state["armed"] and state["calls"] == 5:
            raise KeyboardInterrupt
        return SWEEP_METHODS["uniform-svm"](train, test, call)

    yield state
    del SWEEP_METHODS["test-interrupt"]


def test_resume_after_interruption_and_torn_line_loses_nothing_and_repeats_nothing(
    tmp_path, interrupting_method
):
    grid = SweepGrid(n=[8, 12], d=[60], kappa=[0.5, 4.0], seeds=3, methods=["test-interrupt"])
    reference = tmp_path / "ref.csv"
    interrupting_method["armed"] = False
    run_sweep(grid, reference, CONFIG, jobs=1)
    interrupting_method.update(armed=True, calls=0)

    out = tmp_path / "s.csv"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(grid, out, CONFIG, jobs=1)
    assert len(read_rows(out)) == 4
    assert json.loads(sidecar_path(out).read_text())["runs"][-1]["state"] == "interrupted"
    # a crash in the middle of the 4th row's write: cut it and leave a torn tail
    data = out.read_bytes()
    torn = len(data) - 9 - (data.rstrip(b"\n").rfind(b"\n") + 1)
    out.write_bytes(data[: len(data) - 9])
    assert len(read_rows(out)) == 3

    res = run_sweep(grid, out, CONFIG, jobs=1)
    assert res.n_skipped == 3 and res.n_run == 9
    rows = read_rows(out, FIELDS)
    keys = [tuple(r[k] for k in ("n", "kappa", "seed")) for r in rows]
    assert len(keys) == len(set(keys)) == 12
    assert _rows_without_time(out) == _rows_without_time(reference)
    runs = json.loads(sidecar_path(out).read_text())["runs"]
    assert [r["state"] for r in runs] == ["interrupted", "complete"] and runs[1][
        "repaired_torn_bytes"
    ] == torn


def test_failed_cell_is_a_row_with_status_failed(tmp_path):
    @register_method("test-broken")
    def broken(train, test, call):
        raise ArithmeticError("no luck")

    try:
        res = run_sweep(
            SweepGrid(n=[8], d=[20], snr=[1.0], methods=["test-broken"]),
            tmp_path / "f.csv",
            CONFIG,
            jobs=1,
        )
    finally:
        del SWEEP_METHODS["test-broken"]
    assert res.n_failed == 1 and not res.success
    (row,) = load_results(tmp_path / "f.csv")
    assert row["status"] == "failed" and row["message"] == "ArithmeticError: no luck"


def test_bad_inputs_are_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="Unknown method 'nope'"):
        run_sweep(SweepGrid(n=[8], d=[20], snr=[1.0], methods=["nope"]), tmp_path / "x.csv", CONFIG)
    out = tmp_path / "s.csv"
    run_sweep(SweepGrid(n=[8], d=[20], snr=[1.0], methods=["uniform-svm"]), out, CONFIG, jobs=1)
    with pytest.raises(InvalidInputError, match="another sweep config"):
        run_sweep(GRID, out, SweepConfig(sweep_seed=8, n_test=60), jobs=1)


def test_joblib_processes_and_dask_cluster_give_the_same_rows(tmp_path):
    distributed = pytest.importorskip("distributed")
    serial, parallel, dask = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    run_sweep(GRID, serial, CONFIG, jobs=1)
    run_sweep(GRID, parallel, CONFIG, jobs=2)
    with distributed.LocalCluster(
        host="127.0.0.1",
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp",
        dashboard_address=None,
    ) as cluster:
        res = run_sweep(GRID, dask, CONFIG, scheduler=cluster.scheduler_address)
    assert res.n_run == 12
    assert _rows_without_time(serial) == _rows_without_time(parallel) == _rows_without_time(dask)
    assert json.loads(sidecar_path(dask).read_text())["runs"][0]["backend"].startswith(
        "dask:tcp://127.0.0.1"
    )


def test_unreachable_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")

    def no_client(*args, **kwargs):  # dask's client retries for its whole timeout (20-40 s)
        raise AssertionError("the refused probe should have ended the call")

    monkeypatch.setattr(distributed, "Client", no_client)
    with pytest.raises(InvalidInputError, match="Cannot reach the Dask scheduler"):
        run_sweep(GRID, tmp_path / "x.csv", CONFIG, scheduler="tcp://127.0.0.1:1")
    assert not list(tmp_path.iterdir())  # refused before the log was created


def test_all_methods_on_one_grid_point_are_consistent(tmp_path):
    grid = SweepGrid(
        n=[10],
        d=[200],
        snr=[0.6],
        seeds=2,
        methods=["uniform-svm", "min-norm", "gd-two-step", "gd-long"],
    )
    config = SweepConfig(n_test=100, method_options={"gd-long": {"steps": 50}})
    res = run_sweep(grid, tmp_path / "m.csv", config, jobs=1)
    assert res.success and res.n_run == 8
    rows = {(r["method"], r["seed"]): r for r in load_results(tmp_path / "m.csv")}
    for seed in (0.0, 1.0):
        mn, uni = rows[("min-norm", seed)], rows[("uniform-svm", seed)]
        # p = 0 is feasible for P_R, so the min-norm value cannot exceed the uniform-attention SVM's
        assert mn["norm"] <= uni["norm"] * (1 + 1e-6)
        assert mn["min_margin"] == pytest.approx(1.0, abs=1e-6) and mn["p_norm"] <= mn["R"] * (
            1 + 1e-9
        )
        # certified (n = 10 <= CERTIFY_MAX_N): the bound sits below the value,
        # gap = relative distance
        assert mn["lower_bound"] <= mn["norm"] * (1 + 1e-6)
        assert mn["gap"] == pytest.approx((mn["norm"] - mn["lower_bound"]) / mn["norm"], abs=1e-6)
        assert (
            rows[("gd-two-step", seed)]["iterations"] == 2
            and rows[("gd-long", seed)]["iterations"] == 50
        )
        assert rows[("gd-two-step", seed)]["R"] == rows[("gd-two-step", seed)]["p_norm"]
        # every method sees the same training set
        assert len({rows[(m, seed)]["n_noisy"] for m in grid.methods}) == 1
        assert mn["predicted_regime"] and mn["snr_regime"] in (
            "benign",
            "harmful",
            "outside the theory",
        )


def test_a_failed_method_is_a_row_status_not_a_warning(tmp_path, recwarn):
    """Two steps that do not fit (kappa 16) warn when called directly; in a sweep the row's
    status says it and no ConvergenceWarning reaches the caller."""
    from margin_solver.core.results import ConvergenceWarning

    grid = SweepGrid(n=(20,), snr=(math.sqrt(16 / 20),), d=(300,), methods=("gd-two-step",))
    run_sweep(grid, tmp_path / "s.csv", SweepConfig(n_test=50), jobs=1)
    rows = load_results(tmp_path / "s.csv")
    assert rows and all(r["status"] in ("not_fitted", "completed", "diverged") for r in rows)
    assert not [w for w in recwarn if issubclass(w.category, ConvergenceWarning)]


def _item_and_pid(item):
    time.sleep(0.02)
    return item, os.getpid()


@pytest.mark.parametrize("fork", [True, False])
def test_local_map_runs_every_item_once_this_process_among_the_workers(monkeypatch, fork):
    if fork and not sweeps._FORK_WORKERS:
        pytest.skip("workers are forked on Linux with Python >= 3.11 only")
    monkeypatch.setattr(sweeps, "_FORK_WORKERS", fork)  # False: loky's workers, as elsewhere
    done = list(local_map(_item_and_pid, list(range(40)), 2))
    assert sorted(item for item, _ in done) == list(range(40))
    # this process works as one of the two: it runs items while its worker starts and after
    # (which items depends on the scheduler, so the test does not name them)
    assert os.getpid() in {pid for _, pid in done}
