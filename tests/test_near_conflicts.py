"""Features equal only to within the rounding of the Gram matrix are not a proof of
infeasibility (new-user pass): the v-step says it cannot tell and bounds ||v|| from below by
2 / delta, delta an upper bound on their distance; exactly equal features of opposite labels
stay a proof."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from margin_solver import global_lower_bound, solve_min_norm
from margin_solver.core.results import ConvergenceWarning
from margin_solver.svm.vstep import solve_trusted_vstep, solve_vstep

Y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0])


def _shifted_copy(shift: float, seed: int = 0) -> np.ndarray:
    """Six random samples (T = 1, d = 5) and a copy of sample 0 moved by ``shift`` (relative,
    in a random direction) that gets the opposite label."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((6, 1, 5))
    moved = X[0] + shift * np.linalg.norm(X[0]) * rng.standard_normal((1, 5))
    return np.concatenate([X, moved[None]])


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return call()


@pytest.fixture(scope="module")
def resolved_norm():
    """||v|| at a shift of 1e-5, where K tells the two samples apart."""
    Z = _shifted_copy(1e-5)[:, 0, :]
    res = _quiet(lambda: solve_vstep(Z, Y, solver="ldp"))
    assert res.solution_present and res.min_margin == pytest.approx(1.0)
    return res.norm


def test_features_equal_to_within_rounding_are_not_infeasible(resolved_norm):
    X = _shifted_copy(1e-7)
    Z = X[:, 0, :]
    K = Z @ Z.T
    K = (K + K.T) / 2
    for res in (
        _quiet(lambda: solve_vstep(Z, Y)),
        _quiet(lambda: solve_trusted_vstep(K, Y, row=Z.__getitem__)),
    ):
        assert res.status == "failed" and res.unresolved and not res.broke_down
        assert "cannot tell" in res.message and res.v is None
        # valid: any separator of these samples has ||v|| >= 2 / ||z_0 - z_6||, and the
        # optimum at shift 1e-5 grows like 1 / shift; not vacuous: within 2 of that
        assert res.norm_bound <= 2.0 / np.linalg.norm(Z[0] - Z[6])
        assert res.norm_bound <= resolved_norm * 100 * 1.01
        assert res.norm_bound >= 0.5 * 2.0 / np.linalg.norm(Z[0] - Z[6])
    # without the features the rounding of K is unknown: still no claim of infeasibility
    bare = _quiet(lambda: solve_trusted_vstep(K, Y))
    assert bare.status == "failed" and bare.unresolved and bare.norm_bound == 0.0

    bound = _quiet(lambda: global_lower_bound(X, Y))
    assert bound.status == "no_feasible_point_found" and not bound.certified
    assert "cannot tell" in bound.message
    assert 1e6 < bound.value <= resolved_norm * 100 * 1.01

    res = _quiet(lambda: solve_min_norm(X, Y, R=1.0, certify=True, n_random_starts=2))
    assert res.status == "no_feasible_point_found" and not res.certified
    assert "infeasibility is not proven" in res.message and res.lower_bound == bound.value


def test_exactly_equal_opposite_labels_stay_infeasible():
    X = _shifted_copy(0.0)
    Z = X[:, 0, :]
    K = Z @ Z.T
    for res in (
        _quiet(lambda: solve_vstep(Z, Y)),
        _quiet(lambda: solve_trusted_vstep((K + K.T) / 2, Y, row=Z.__getitem__)),
    ):
        assert res.status == "infeasible" and res.infeasible_samples == [0, 6]
        assert res.norm_bound == np.inf
    bound = _quiet(lambda: global_lower_bound(X, Y))
    assert bound.status == "infeasible" and bound.certified
    zero = Z.copy()
    zero[3] = 0.0
    res = _quiet(lambda: solve_vstep(zero, [1, -1, 1, -1, 1, -1, 1]))
    assert res.status == "infeasible" and res.infeasible_samples == [3]


def test_shared_token_of_other_samples_proves_the_selection_infeasible():
    # tokens 1.0 are shared by samples of opposite labels (d = 1): the selection SVM confirms
    # the equality on the tokens, so LB proves infeasibility; a 1e-12 shift only bounds it
    X = np.array([[[1.0], [2.0]], [[1.0], [3.0]]])
    bound = _quiet(lambda: global_lower_bound(X, [1, -1]))
    assert bound.status == "infeasible" and bound.certified
    X[1, 0, 0] += 1e-12
    bound = _quiet(lambda: global_lower_bound(X, [1, -1]))
    assert bound.status == "no_feasible_point_found" and bound.value > 1e6
