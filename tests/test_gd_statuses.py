"""Gradient descent that fails says so (issue 11): statuses, warnings, exit codes, safe defaults.

Reproducers: two-step GD at the paper's kappa = 8 does not interpolate; on scikit-learn's
wine, breast-cancer and digits data cut into tokens the package's default steps made the loss
rise from log 2 to hundreds; the classifier scored at chance on digits. Each returned success
with no warning and exit 0.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
from sklearn.model_selection import cross_val_score

from margin_solver.bench.methods import SWEEP_METHODS, MethodCall
from margin_solver.bench.realdata import digits_train_test, image_tokens, load_digits_images
from margin_solver.cli import EXIT_NO_ANSWER, EXIT_OK, main
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.results import ConvergenceWarning
from margin_solver.estimator import SingleHeadAttentionClassifier
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent


def feature_tokens(features: np.ndarray, T: int) -> np.ndarray:
    """Cut each row of a feature table into T tokens of equal length (zero-padded)."""
    n, m = features.shape
    width = -(-m // T)
    padded = np.zeros((n, T * width))
    padded[:, :m] = features
    return padded.reshape(n, T, width)


def real_token_sets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The real datasets of the reproducer, as (X, y) with labels in {-1, +1}."""
    wine = load_wine()
    two = wine.target < 2  # classes 0 and 1
    cancer = load_breast_cancer()
    digits, _ = digits_train_test(80, 0.1, 1, 1001)
    lifted, _ = digits_train_test(80, 0.1, 1, 1001, lift=1024, lift_seed=0)
    return {
        "wine": (feature_tokens(wine.data[two], 2), np.where(wine.target[two] == 1, 1, -1)),
        "breast-cancer": (feature_tokens(cancer.data, 3), np.where(cancer.target == 1, 1, -1)),
        "digits": (digits.X, digits.y),
        "digits-lifted": (lifted.X, lifted.y),
    }


REAL = real_token_sets()


def run_warned(*args, **kwargs):
    """gradient_descent and the ConvergenceWarnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = gradient_descent(*args, **kwargs)
    return res, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


@pytest.mark.parametrize("d", [200, 2000, 20000])
def test_two_step_at_kappa_8_is_not_fitted_and_says_why(d):
    for seed in range(5):
        train = PaperDistribution(d=d, snr=math.sqrt(8 / 40), eta=0.1).sample(40, seed=seed)
        res, caught = run_warned(train)
        assert not res.interpolates  # measured: 0 of 5 seeds interpolate at each d
        assert res.status == "not_fitted" and not res.success and not res.solution_present
        assert "training labels" in res.message and "Theorem 3.3" in res.message
        assert "upper limit" in res.message and "kappa = n SNR^2 = 8" in res.message
        assert len(caught) == 1 and "not_fitted" in str(caught[0].message)


@pytest.mark.parametrize("name", sorted(REAL))
def test_default_two_step_never_raises_the_loss_on_real_tokens(name):
    X, y = REAL[name]
    res, caught = run_warned(X, y)
    loss = res.trajectory["loss"]
    assert loss[0] == pytest.approx(math.log(2))
    assert np.all(np.diff(loss) <= 0)  # before: 0.69 -> 44 to 1418
    assert res.status == "not_fitted" and not res.success and len(caught) == 1
    assert "halved" in res.message  # the safeguard acted, and the message says so


@pytest.mark.parametrize("name", sorted(REAL))
def test_exact_scaled_steps_that_raise_the_loss_are_diverged(name):
    X, y = REAL[name]
    b0, b1 = default_step_sizes(X)
    res, caught = run_warned(X, y, beta0=b0, beta1=b1)
    assert res.step_sizes == [b0, b1]  # steps the caller gave are taken as given
    assert res.loss > math.log(2)
    assert res.status == "diverged" and not res.success and len(caught) == 1
    assert "rose from 0.6931 to" in res.message


def test_constant_schedule_that_ends_above_its_start_is_diverged():
    X, y = REAL["digits"]
    # Three steps, not 1000: after 1000 steps of this size the loss is chaotic and its end
    # depends on the BLAS (0.86 on one machine, 0.46 on another); after three it is 3.6.
    res, caught = run_warned(X, y, schedule="constant", step_size=default_step_sizes(X)[0], steps=3)
    assert res.loss > math.log(2)
    assert res.status == "diverged" and len(caught) == 1 and "rose from" in res.message


@pytest.mark.parametrize("name", sorted(REAL))
def test_default_constant_step_is_settled_at_the_first_step(name):
    X, y = REAL[name]
    res, caught = run_warned(X, y, schedule="constant", steps=300)
    b0 = default_step_sizes(X)[0]
    assert res.step_sizes[0] < b0 and math.log2(b0 / res.step_sizes[0]).is_integer()
    assert res.loss < math.log(2) and res.status == "completed" and not caught
    assert "halved" in res.message and "kept for every step" in res.message


def test_warning_points_at_the_caller():
    X, y = REAL["wine"]
    with pytest.warns(ConvergenceWarning) as record:
        gradient_descent(X, y)
    assert record[0].filename == __file__


@pytest.mark.parametrize("kappa", [2, 4])
def test_benign_band_results_are_unchanged_by_the_safeguard(kappa):
    for seed in range(3):
        dist = PaperDistribution(d=2000, T=2, snr=math.sqrt(kappa / 40), eta=0.15)
        train = dist.sample(40, seed=seed)
        b0, b1 = default_step_sizes(train.X)
        res, caught = run_warned(train)
        exact = gradient_descent(train, beta0=b0, beta1=b1)
        assert res.status == "completed" and res.success and not caught
        assert res.step_sizes == [b0, b1]
        np.testing.assert_array_equal(res.v, exact.v)
        np.testing.assert_array_equal(res.p, exact.p)


def digits_3_vs_8() -> tuple[np.ndarray, np.ndarray]:
    images, labels = load_digits_images()
    keep = np.isin(labels, (3, 8))
    return image_tokens(images[keep], 4, True, None, 0), np.where(labels[keep] == 8, 1, -1)


def test_classifier_on_digits_warns_with_sklearns_category_and_beats_chance():
    X, y = digits_3_vs_8()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = cross_val_score(SingleHeadAttentionClassifier(method="gd"), X, y, cv=5)
    assert scores.mean() > 0.7  # 0.49 before the safeguard; 0.81 measured after
    sk = [w for w in caught if w.category is SklearnConvergenceWarning]
    assert len(sk) == 5 and all("not_fitted" in str(w.message) for w in sk)
    assert not [w for w in caught if w.category is ConvergenceWarning]  # not repeated


def test_sweep_rows_carry_the_status():
    train, test = PaperDistribution(d=2000, snr=math.sqrt(8 / 40), eta=0.1).sample_train_test(
        40, 50, seed=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        row = SWEEP_METHODS["gd-two-step"](train, test, MethodCall(cell=None))
    assert row["status"] == "not_fitted" and "Theorem 3.3" in row["message"]


def test_cli_exit_codes_and_stderr(tmp_path, capsys):
    X, y = REAL["wine"]
    wine = Dataset(X, y).save(tmp_path / "wine.npz")
    assert main(["gd", str(wine)]) == EXIT_NO_ANSWER
    out, err = capsys.readouterr()
    assert out.startswith("not_fitted: two steps did not fit")
    assert err.startswith(
        "margin-solver gd: ConvergenceWarning: gradient_descent ended with status 'not_fitted'"
    )
    assert len(err.splitlines()) == 1
    b0, b1 = default_step_sizes(X)
    assert main(["gd", str(wine), "--beta0", repr(b0), "--beta1", repr(b1)]) == EXIT_NO_ANSWER
    out, err = capsys.readouterr()
    assert out.startswith("diverged: the loss rose from 0.6931 to") and "'diverged'" in err
    paper = PaperDistribution(d=2000, snr=0.35, eta=0.1).sample(20, seed=0).save(tmp_path / "p.npz")
    assert main(["gd", str(paper)]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out.startswith("completed:") and err == ""


def test_usage_failure_example_prints_what_the_docs_show(tmp_path, monkeypatch, capsys):
    """docs/usage.md, "When gradient descent fails": the Python block and its output."""
    text = (Path(__file__).parents[1] / "docs" / "usage.md").read_text()
    after = text.split("<!-- gd-failure-example -->", 1)[1]
    code = after.split("```python\n", 1)[1].split("```", 1)[0]
    shown = after.split("```output\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exec(compile(code, "usage.md", "exec"), {})
    assert capsys.readouterr().out == shown
    assert main(["gd", "wine.npz"]) == EXIT_NO_ANSWER
    out, err = capsys.readouterr()
    cli = after.split('$ margin-solver gd wine.npz; echo "exit $?"\n', 1)[1].split("```", 1)[0]
    assert err + out + f"exit {EXIT_NO_ANSWER}\n" == cli


def test_safeguard_takes_the_same_steps_in_both_forms():
    X, y = REAL["wine"]
    dense, _ = run_warned(X, y, form="dense")
    kernel, _ = run_warned(X, y, form="kernel")
    assert dense.step_sizes == kernel.step_sizes and dense.step_sizes != list(default_step_sizes(X))
    np.testing.assert_allclose(kernel.v, dense.v, rtol=1e-9, atol=1e-12 * np.abs(dense.v).max())
    np.testing.assert_allclose(kernel.p, dense.p, rtol=1e-9, atol=1e-12 * np.abs(dense.p).max())


def test_classifier_warns_once_with_scikit_learns_category():
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

    X, y = REAL["wine"]  # the classifier needs scikit-learn (issue 16): its warning category
    with pytest.warns(SklearnConvergenceWarning, match="status 'not_fitted'") as record:
        SingleHeadAttentionClassifier(method="gd").fit(X, y)
    assert [w.category for w in record] == [SklearnConvergenceWarning]  # once, not repeated
    assert record[0].filename == __file__
