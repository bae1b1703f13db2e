"""regularization_path (issue 14, part 1): statuses, bad input and the fixed-attention limit."""

import warnings

import numpy as np
import pytest

from margin_solver.data import PaperDistribution
from margin_solver.kernel import attention
from margin_solver.regpath import regularization_path
from margin_solver.results import ConvergenceWarning
from margin_solver.validation import InvalidInputError
from margin_solver.vstep import solve_vstep


@pytest.fixture(scope="module")
def train():
    return PaperDistribution(d=60, T=3, snr=0.4, eta=0.1).sample(8, seed=3)


def _cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("p0_kind", ["zero", "random"])
def test_fixed_attention_path_tends_to_the_svm_direction(train, p0_kind):
    # Rosset, Zhu & Hastie (2004): the ridge-logistic direction tends to the hard-margin SVM's.
    p0 = None
    if p0_kind == "random":
        p0 = np.random.default_rng(0).normal(size=train.d) / np.sqrt(train.d)
    Z = np.einsum("it,itd->id", attention(train.X, np.zeros(train.d) if p0 is None else p0), train.X)
    svm = solve_vstep(Z, train.y.astype(float), solver="ldp")
    lams = np.geomspace(1e-1, 1e-9, 5)
    path = regularization_path(train, R=1.0, lambdas=lams, train=("v",), p0=p0)
    assert path.status == "converged" and path.success
    assert [pt.status for pt in path.points] == ["converged"] * 5
    cos = [_cos(pt.v, svm.v) for pt in path.points]
    assert np.all(np.diff(cos) > 0) and cos[-1] > 0.999
    norms = [pt.normalized_norm for pt in path.points]
    # No interpolator at this attention has a smaller margin-normalised norm than the SVM.
    assert np.all(np.diff(norms) < 0) and norms[-1] >= svm.norm * (1 - 1e-9)
    expected_p = np.zeros(train.d) if p0 is None else p0
    assert all(np.allclose(pt.p, expected_p, atol=1e-12) for pt in path.points)


def test_joint_path_respects_the_ball_and_orders_lambdas(train):
    path = regularization_path(train, R=0.05, lambdas=[1e-4, 1e-1, 1e-2])
    assert list(path.lambdas) == [1e-1, 1e-2, 1e-4]
    assert path.status == "converged"
    assert all(np.linalg.norm(pt.p) <= 0.05 * (1 + 1e-9) for pt in path.points)
    assert all(pt.margin > 0 for pt in path.points[1:])


def test_iteration_cap_is_a_status_and_a_warning(train):
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        path = regularization_path(train, R=1.0, lambdas=[1e-3], max_iter=2)
    assert path.status == "max_iter" and not path.success
    (pt,) = path.points
    assert pt.status == "max_iter" and pt.iterations == 2 and np.all(np.isfinite(pt.v))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"lambdas": [1e-2, 0.0]}, "lambda"),
        ({"lambdas": []}, "empty"),
        ({"train": ("p",)}, "train"),
        ({"p0": np.ones(60)}, "exceeds R"),
        ({"p0": np.ones(5)}, "p0"),
        ({"R": -1.0}, "R"),
    ],
)
def test_bad_input(train, kwargs, match):
    with warnings.catch_warnings(), pytest.raises(InvalidInputError, match=match):
        regularization_path(train, **{"R": 1.0, **kwargs})


def test_gram_matrix_too_large_for_memory_is_refused(train, monkeypatch):
    from margin_solver import validation

    monkeypatch.setattr(validation, "available_memory", lambda: 1000)
    with pytest.raises(validation.InsufficientMemoryError, match="Gram matrix"):
        regularization_path(train, R=1.0, lambdas=[1e-2])
