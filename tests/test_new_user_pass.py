"""A new user's pass off the paper's distribution: messages that say what is true.

Each test pins a defect found by running the public entry points on data the paper does not
model (duplicated samples with opposite labels, a check without R).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from margin_solver import ConvergenceWarning
from margin_solver.analysis.compare import compare
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.cli import main
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.validation import InvalidInputError
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import check_conditions

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")


@pytest.fixture(scope="module")
def twins() -> Dataset:
    """Ten random samples plus copies of samples 0 and 1 with the opposite labels: no (v, p)
    interpolates them."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 2, 5))
    y = np.where(rng.random(10) < 0.5, 1, -1)
    return Dataset(np.concatenate([X, X[:2, ::-1]]), np.concatenate([y, -y[:2]]))


def test_check_without_R_shows_the_radius_row_as_infinite(twins, tmp_path, capsys):
    report = check_conditions(twins, method="min-norm")
    row = report.condition("attention_radius")
    assert row.value == np.inf and row.holds is True
    assert "R = infinity" in row.note
    line = next(s for s in str(report).splitlines() if s.startswith("attention_radius"))
    assert line.split()[1] == "inf"
    with_R = check_conditions(twins, method="min-norm", R=0.01).condition("attention_radius")
    assert np.isfinite(with_R.value) and with_R.holds is False
    # The JSON stays strict: the infinite value is null there, the note says why.
    path = tmp_path / "twins.npz"
    twins.save(path)
    assert main(["check", str(path), "--json", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "r.json").read_text())["conditions"]
    saved = next(r for r in rows if r["name"] == "attention_radius")
    assert saved["value"] is None and saved["holds"] is True and "R = infinity" in saved["note"]


@pytest.mark.parametrize("schedule", ["two-step", "constant"])
def test_gd_on_unfittable_data_does_not_blame_the_optimiser(twins, schedule):
    # Two steps that leave labels unfitted end `not_fitted` and warn; 50 constant steps are
    # `completed` (they did what they set out to do) and must not warn.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        steps = {} if schedule == "two-step" else {"steps": 50}
        res = gradient_descent(twins, schedule=schedule, **steps)
    assert len(caught) == (schedule == "two-step")
    assert res.status == ("not_fitted" if schedule == "two-step" else "completed")
    assert res.min_margin <= 0
    assert "No model interpolates these data: samples 0 and 10" in res.message
    assert "(2 such pairs)" in res.message
    assert "failure of the optimiser" not in res.message
    assert "may fit" not in res.message


def test_gd_diagnoses_conflicts_only_when_it_does_not_interpolate(monkeypatch):
    # The diagnosis reads every token (issue 44: it was half of a short call); an endpoint
    # that interpolates needs none, one that does not still gets it.
    calls = []

    def counted(X, y):
        calls.append(len(y))
        return []

    monkeypatch.setattr("margin_solver.gd.endpoints.conflicting_pairs", counted)
    train = PaperDistribution(d=2000, snr=0.35, eta=0.1).sample(20, seed=0)
    assert gradient_descent(train).interpolates
    assert calls == []
    res = gradient_descent(train, schedule="constant", steps=1, step_size=1e-9)
    assert not res.interpolates and calls == [20]
    assert "does not interpolate the training set." in res.message


def test_gd_not_fitted_on_fittable_data_keeps_the_optimiser_note():
    # The same samples without the twins can be fitted: two steps that do not fit them are
    # the optimiser's failure, and the message says so (nothing about unfittable data).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 2, 5))
    y = np.where(rng.random(10) < 0.5, 1, -1)
    with pytest.warns(ConvergenceWarning):
        res = gradient_descent(X, y, beta0=1e-6, beta1=1e-6)
    assert res.status == "not_fitted"
    assert "failure of the optimiser" in res.message
    assert "No model interpolates" not in res.message


@pytest.mark.parametrize(
    "verb, option, name",
    [
        ("solve", "--json", "mine.json"),
        ("check", "--json", "notes.txt"),
        ("gd", "--json", "mine.json"),
        ("gd", "--plot", "photo.png"),
    ],
)
def test_cli_refuses_to_overwrite_a_file_it_did_not_write(
    twins, tmp_path, capsys, verb, option, name
):
    data = tmp_path / "twins.npz"
    twins.save(data)
    foreign = tmp_path / name
    foreign.write_bytes(b'{"v": [1.0], "p": [0.0]}\n' if name.endswith(".json") else b"mine\n")
    before = foreign.read_bytes()
    extra = ["--R", "1", "--no-progress"] if verb == "solve" else []
    assert main([verb, str(data), option, str(foreign), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "was not written by margin-solver" in err
    assert foreign.read_bytes() == before
    # A file this tool wrote is replaced on the next run (same command twice).
    own = tmp_path / ("own" + (".png" if option == "--plot" else ".json"))
    for _ in range(2):
        assert main([verb, str(data), option, str(own), *extra]) != 2
    capsys.readouterr()
    if own.suffix == ".json":
        assert json.loads(own.read_text())["written_by"].startswith("margin-solver")
    else:
        assert b"margin-solver" in own.read_bytes()


def test_finite_r_bound_does_not_call_near_duplicates_the_same_tokens(twins, counted_bound):
    # Samples 0 and 1 copied with every coordinate moved by 1e-9 and the opposite labels:
    # (v, p) can tell them apart (||v|| about 1e9 does), so infeasibility is not proven. The
    # Gram matrix rounds their squared distance (5e-18) away; the bound used to read "the
    # same tokens" off it and solve_min_norm then said "infeasible for any R".
    X, y = twins.X[:10], twins.y[:10]
    near = np.concatenate([X, X[:2] + 1e-9]), np.concatenate([y, -y[:2]])
    bound = global_lower_bound(*near, R=1.0)
    assert bound.status != "infeasible" and np.isfinite(bound.value)
    assert global_lower_bound(*near).status == "optimal"  # LB: a selection separates them
    exact = global_lower_bound(twins.X, twins.y, R=1.0)
    assert exact.status == "infeasible" and "samples 0 and 10 have the same tokens" in exact.message


def test_compare_names_the_status_of_a_result_without_a_point(twins):
    with pytest.warns(ConvergenceWarning):
        none = solve_min_norm(twins, R=1.0)
    gd = gradient_descent(twins, schedule="constant", steps=5)
    with pytest.raises(
        InvalidInputError,
        match=r"has no dense v and p \(status 'infeasible': "
        r"proven infeasible: samples 0 and 10",
    ):
        compare(none, gd, twins)


def test_bench_out_that_is_a_file_is_one_clear_line(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    assert main(["bench", "--tiny", "--only", "speed", "--out", str(notes), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "notes.txt exists and is not a directory" in err and "\n" not in err
    assert notes.read_text() == "mine\n"
