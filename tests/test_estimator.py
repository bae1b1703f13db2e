"""SingleHeadAttentionClassifier: scikit-learn conventions, GD and min-norm methods."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import outputs
from margin_solver.core.validation import InvalidInputError
from margin_solver.estimator import NotFittedError, SingleHeadAttentionClassifier
from margin_solver.gd.endpoints import gradient_descent


@pytest.fixture(scope="module")
def data(paper_split):
    return paper_split(30, 100, seed=4, kappa=4, d=2000, T=2, eta=0.1)


def test_init_only_stores_and_params_round_trip():
    clf = SingleHeadAttentionClassifier(method="bogus", steps=-3)  # validated in fit
    params = clf.get_params()
    assert params["method"] == "bogus" and params["steps"] == -3
    assert set(params) == {
        "method",
        "n_tokens",
        "positions",
        "R",
        "schedule",
        "steps",
        "step_size",
        "weight_decay",
        "random_state",
        "solver_options",
        "verbose",
        "heads",
    }
    assert clf.set_params(method="gd", steps=None) is clf and clf.method == "gd"
    with pytest.raises(ValueError, match="Invalid parameter 'alpha'"):
        clf.set_params(alpha=1.0)
    assert (
        repr(SingleHeadAttentionClassifier(method="gd"))
        == "SingleHeadAttentionClassifier(method='gd')"
    )


def test_gd_fit_predict_score(data):
    train, test = data
    clf = SingleHeadAttentionClassifier(method="gd")
    assert clf.fit(train.X, train.y) is clf
    ref = gradient_descent(train)
    np.testing.assert_array_equal(clf.v_, ref.v)
    np.testing.assert_array_equal(clf.p_, ref.p)
    assert clf.result_.status == "completed" and clf.n_features_in_ == train.d
    np.testing.assert_allclose(clf.decision_function(test.X), outputs(test.X, ref.v, ref.p))
    assert set(np.unique(clf.predict(test.X))) <= {-1, 1}
    assert clf.score(train.X, train.y) == 1.0  # two-step GD interpolates here
    assert clf.score(test.X, test.clean_y) >= 0.9


def test_not_fitted_and_bad_inputs(data):
    train, _ = data
    clf = SingleHeadAttentionClassifier(method="gd")
    with pytest.raises(NotFittedError, match="not fitted yet"):
        clf.predict(train.X)
    assert isinstance(NotFittedError("x"), (ValueError, AttributeError))
    with pytest.raises(InvalidInputError, match="method must be one of"):
        SingleHeadAttentionClassifier(method="svm").fit(train.X, train.y)
    with pytest.raises(InvalidInputError, match="not a multiple of n_tokens=3"):
        SingleHeadAttentionClassifier(method="gd", n_tokens=3).fit(train.X[:, 0, :], train.y)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        clf.fit(train.X, np.ones(train.n))
    clf.fit(train.X, train.y)
    with pytest.raises(InvalidInputError, match="2000 features each"):
        clf.predict(train.X[:, :, :10])


def test_sklearn_clone_and_cross_val_score(data):
    sklearn_base = pytest.importorskip("sklearn.base")  # sklearn is a test dependency
    from sklearn.model_selection import cross_val_score

    train, _ = data
    clf = SingleHeadAttentionClassifier(
        method="gd", schedule="constant", steps=30, weight_decay=1e-3
    )
    twin = sklearn_base.clone(clf)
    assert twin is not clf and twin.get_params() == clf.get_params()
    assert not hasattr(twin, "v_")
    scores = cross_val_score(SingleHeadAttentionClassifier(method="gd"), train.X, train.y, cv=3)
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))
    assert scores.mean() >= 0.6


def test_min_norm_method(data):
    from margin_solver.minnorm.solve import solve_min_norm

    train, _ = data
    clf = SingleHeadAttentionClassifier(method="min-norm", R=5.0, random_state=0).fit(
        train.X, train.y
    )
    ref = solve_min_norm(train.X, train.y.astype(float), 5.0)
    np.testing.assert_allclose(clf.v_, ref.v, rtol=1e-6, atol=1e-9)
    assert clf.score(train.X, train.y) == 1.0  # an interpolator
    assert np.linalg.norm(clf.p_) <= 5.0 * (1 + 1e-9)
    default = SingleHeadAttentionClassifier().fit(
        train.X, train.y
    )  # method="min-norm", R = 10 / nu
    nu = np.sqrt(np.mean(np.sum(train.X**2, axis=2)))
    assert default.result_.p_norm <= 10 / nu * (1 + 1e-9)
    assert default.score(train.X, train.y) == 1.0


def test_soft_default_radius_runs_the_zero_start_only(data):
    train, _ = data
    soft = SingleHeadAttentionClassifier().fit(train.X, train.y)  # R = 1 / nu interpolates
    assert list(soft.result_.start_norms) == ["zero"]
    # the selection starts, asked for, reach the same norm here (docs/decisions.md)
    asked = {"options": {"first_starts": ("zero", "first_step", "hard_selection")}}
    every = SingleHeadAttentionClassifier(solver_options=asked).fit(train.X, train.y)
    assert {"zero", "first_step"} <= set(every.result_.start_norms)
    np.testing.assert_allclose(every.result_.norm, soft.result_.norm, rtol=1e-8)
    # a caller's strategy fields reach the solve beside the zero start
    other = SingleHeadAttentionClassifier(solver_options={"options": {"memory": 0}})
    assert list(other.fit(train.X, train.y).result_.start_norms) == ["zero"]
    given = SingleHeadAttentionClassifier(R=soft.R_).fit(train.X, train.y)
    assert "first_step" in given.result_.start_norms  # an R given keeps every first start


def test_min_norm_without_interpolator_warns_once_and_keeps_the_weight_decayed_fit():
    X = np.ones((4, 2, 3))  # identical samples with opposite labels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = SingleHeadAttentionClassifier(R=1.0).fit(X, [1, -1, 1, -1])
    assert len(caught) == 1 and caught[0].category is ConvergenceWarning
    assert re.search(
        r"no interpolator with \|\|p\|\| <= 1 .*infeasible.*weight decay 0.01",
        str(caught[0].message),
    )
    assert (
        clf.fallback_.startswith("min-norm found no interpolator") and "infeasible" in clf.fallback_
    )
    assert clf.solution_ == "weight-decayed gd" and clf.R_ is None
    assert clf.result_.schedule == "normalized" and clf.result_.weight_decay == 0.01
    assert clf.status_ == clf.result_.status and clf.predict(X).shape == (4,)


def test_min_norm_keeps_the_first_default_radius_that_interpolates(monkeypatch):
    import margin_solver.estimator as estimator

    real = estimator.solve_min_norm_heads
    radii = []

    def first_radius_fails(X, y, R, **kwargs):
        radii.append(R)
        if len(radii) == 1:  # no interpolator: one sample with both labels
            return real(np.ones((2, 2, 3)), [1, -1], R, **kwargs)
        return real(X, y, R, **kwargs)

    monkeypatch.setattr(estimator, "solve_min_norm_heads", first_radius_fails)
    train = PaperDistribution(d=200, snr=0.5, eta=0.0).sample(10, seed=1)
    with pytest.warns(
        ConvergenceWarning, match=r"no interpolator with \|\|p\|\| <= .*kept the one"
    ):
        clf = SingleHeadAttentionClassifier().fit(train.X, train.y)
    nu = np.sqrt(np.mean(np.sum(train.X**2, axis=2)))
    np.testing.assert_allclose(radii, [1 / nu, 10 / nu])
    assert clf.solution_ == "min-norm" and radii[1] == clf.R_ and clf.score(train.X, train.y) == 1.0


def test_diverged_gd_warns_and_keeps_the_last_finite_iterate(data):
    train, _ = data
    clf = SingleHeadAttentionClassifier(
        method="gd", solver_options={"beta0": 1e300, "beta1": 1e300}
    )
    with pytest.warns(ConvergenceWarning, match="status 'diverged'"):
        clf.fit(train.X, train.y)
    assert np.all(np.isfinite(clf.v_))
