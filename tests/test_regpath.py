"""regularization_path and constrained_path (issue 14, part 1): statuses, bad input and the
fixed-attention limit."""

import warnings

import numpy as np
import pytest

from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import attention
from margin_solver.core.results import ConvergenceWarning
from margin_solver.core.validation import InvalidInputError
from margin_solver.gd.regpath import constrained_path, regularization_path
from margin_solver.svm.vstep import solve_vstep


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
    Z = np.einsum(
        "it,itd->id", attention(train.X, np.zeros(train.d) if p0 is None else p0), train.X
    )
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
    from margin_solver.core import validation

    monkeypatch.setattr(validation, "available_memory", lambda: 1000)
    with pytest.raises(validation.InsufficientMemoryError, match="Gram matrix"):
        regularization_path(train, R=1.0, lambdas=[1e-2])


@pytest.fixture(scope="module")
def uniform_svm(train):
    Z = np.einsum("it,itd->id", attention(train.X, np.zeros(train.d)), train.X)
    return solve_vstep(Z, train.y.astype(float), solver="ldp")


def test_constrained_path_at_fixed_attention_tends_to_the_svm_direction(train, uniform_svm):
    # Rosset, Zhu & Hastie (2004), constrained form: ||v|| <= r, r -> infinity.
    svm = uniform_svm
    radii = svm.norm * np.array([30.0, 0.3, 3.0, 300.0])  # solved in increasing order
    path = constrained_path(train, R=1.0, radii=radii, train=("v",))
    assert path.kind == "constraint" and path.status == "converged"
    assert list(path.radii) == sorted(radii)
    cos = [_cos(pt.v, svm.v) for pt in path.points]
    assert np.all(np.diff(cos) > 0) and cos[-1] > 0.99999
    # The bound is active (separable data), and its multiplier falls as r grows.
    assert all(pt.norm == pytest.approx(pt.radius, rel=1e-9) for pt in path.points)
    assert np.all(np.diff(path.lambdas) < 0) and path.lambdas[-1] > 0
    norms = [pt.normalized_norm for pt in path.points]
    assert np.all(np.diff(norms) < 0) and norms[-1] >= svm.norm * (1 - 1e-9)
    assert all(not np.any(pt.p) for pt in path.points)


def test_constrained_point_is_the_weight_decay_minimiser_at_its_multiplier(train):
    # KKT: on the sphere the loss gradient is -mu v, so (v fixed attention: strictly convex)
    # the ridge minimiser at lam = mu is the same point.
    (pt,) = constrained_path(train, R=1.0, radii=[2.0], train=("v",), tol=1e-9).points
    (same,) = regularization_path(train, R=1.0, lambdas=[pt.lam], train=("v",), tol=1e-9).points
    assert pt.status == same.status == "converged" and pt.radius == 2.0
    assert np.linalg.norm(same.v - pt.v) <= 1e-6 * np.linalg.norm(pt.v)


def test_joint_constrained_path_respects_both_balls(train):
    path = constrained_path(train, R=0.05, radii=[1.0, 4.0])
    assert path.status == "converged" and path.trained == ("v", "p")
    for pt in path.points:
        assert np.linalg.norm(pt.v) <= pt.radius * (1 + 1e-9)
        assert np.linalg.norm(pt.p) <= 0.05 * (1 + 1e-9)


def test_constrained_path_statuses_are_honest(train, uniform_svm):
    with pytest.warns(ConvergenceWarning, match="constrained_path: 1 of 1 radii did not converge"):
        capped = constrained_path(train, R=1.0, radii=[5.0], max_iter=2)
    assert capped.status == "max_iter" and not capped.success
    assert capped.points[0].iterations == 2 and "max_iter = 2" in capped.points[0].message
    # At margins beyond ~708 the logistic loss leaves float64's normal range: no test possible.
    with pytest.warns(ConvergenceWarning, match="normal range"):
        far = constrained_path(train, R=1.0, radii=[1e4 * uniform_svm.norm], train=("v",))
    assert far.status == "failed" and not far.points[0].success


def test_constrained_path_inside_the_ball_is_not_called_converged():
    # A sample repeated with the opposite label: nothing separates, so at a large radius the
    # minimiser lies inside the ball, the multiplier is 0 and the relative test cannot pass.
    X = np.random.default_rng(0).normal(size=(6, 2, 5))
    X[1] = X[0]
    y = np.array([1, -1, 1, -1, 1, -1])
    with pytest.warns(ConvergenceWarning, match="r = 100"):
        path = constrained_path(X, y, R=1.0, radii=[0.1, 100.0], train=("v",), max_iter=300)
    small, large = path.points
    assert small.status == "converged" and small.norm == pytest.approx(0.1)
    assert large.status == "max_iter" and large.lam == 0.0 and large.norm < 100.0


@pytest.mark.parametrize(
    "radii, match",
    [
        ([], "radii is empty"),
        ([1.0, 0.0], "radius must be a positive"),
        ([-2.0], "radius must be a positive"),
        ([np.nan], "radius must be a positive"),
        ([np.inf], "radius must be a positive"),
        ([1e200], "outside"),
        (3.0, "radii must be a sequence"),
        ("1.0", "radii must be a sequence"),
    ],
)
def test_bad_radii_are_rejected_in_one_line(train, radii, match):
    with pytest.raises(InvalidInputError, match=match) as err:
        constrained_path(train, R=1.0, radii=radii)
    assert "\n" not in str(err.value)
