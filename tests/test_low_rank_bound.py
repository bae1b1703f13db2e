"""The finite-R bound over boxes of p (rbounds.low_rank_bound) for low-rank score spaces."""

import math

import numpy as np
import pytest

from margin_solver import solve_min_norm
from margin_solver.bench.measure.search_quality import make_instance
from margin_solver.bounds.rbounds import (
    low_rank_bound,
    realising_coefficients,
    score_difference_gram,
    score_rank,
)
from margin_solver.core.kernel import TokenGram, softmax
from margin_solver.svm.vstep import solve_trusted_vstep


def _sampled_norms(X, y, R, rng, count):
    """||v*|| at random p of the ball (half on the sphere), where some v interpolates."""
    n, T, d = X.shape
    norms = []
    for k in range(count):
        p = rng.standard_normal(d)
        p *= R / np.linalg.norm(p) * (1.0 if k % 2 == 0 else rng.uniform() ** (1 / d))
        s = softmax(X @ p)
        Z = np.einsum("it,itd->id", s, X)
        K = Z @ Z.T
        result = solve_trusted_vstep((K + K.T) / 2, y)
        if result.success:
            norms.append(result.norm)
    return np.array(norms)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bound_is_below_every_sampled_feasible_point(seed):
    rng = np.random.default_rng(seed)
    n, T, d = 5, 2 + seed % 2, 2 + seed % 2
    X = rng.standard_normal((n, T, d)) * 10.0 ** rng.uniform(-1, 1)
    y = rng.choice([-1.0, 1.0], n)
    R = float(10.0 ** rng.uniform(-0.5, 1)) / math.sqrt(np.mean(np.sum(X**2, axis=-1)))
    H = TokenGram(X).H
    assert score_rank(H, n, T) == d
    found = low_rank_bound(H, y, T, R, gap_tol=1e-6, max_nodes=1000, stall_nodes=100)
    sampled = _sampled_norms(X, y, R, rng, 1500)
    assert sampled.size and 0 < found.value <= sampled.min() * (1 + 1e-9)
    assert found.value <= found.incumbent * (1 + 1e-12)


def test_certify_proves_a_two_dimensional_instance_with_boxes_of_p():
    X, y = make_instance("gaussian", 6, 2, 2, 5)
    result = solve_min_norm(X, y, R=10 / math.sqrt(2), certify=True, bound_time_limit=10.0)
    assert result.status == "optimal" and result.gap <= 1e-4
    assert "p-boxes" in result.bound.method.split("+")


def test_realising_coefficients_give_the_scores_at_the_least_norm():
    rng = np.random.default_rng(4)
    n, T, d = 5, 3, 3
    X = rng.standard_normal((n, T, d))
    H = TokenGram(X).H
    p = rng.standard_normal(d)
    scores = (X[:, 1:] - X[:, :1]) @ p
    c = realising_coefficients(H, n, T, scores)
    q = TokenGram.materialize(X, c)
    np.testing.assert_allclose((X[:, 1:] - X[:, :1]) @ q, scores, atol=1e-10)
    # p itself lies in the span of the differences (d = 3 <= n (T - 1)), so q is p
    assert np.linalg.norm(q) <= np.linalg.norm(p) * (1 + 1e-10)
    G = score_difference_gram(H, n, T)
    assert np.linalg.norm(q) ** 2 == pytest.approx(
        scores.reshape(-1) @ np.linalg.lstsq(G, scores.reshape(-1), rcond=None)[0]
    )


def test_without_a_point_the_boxes_stop_at_the_stall_budget():
    # d = 1: sample 1's feature -3 s_0 + s_1 is positive only when p > ln(3) / 4 ~ 0.27, so
    # no p with |p| <= 0.2 interpolates. Without a point the boxes of p prune nothing and
    # their bound only grows as they shrink: the search ran to its whole node budget (20,000
    # SVMs by default) before the score boxes proved infeasibility in 10. Now finding no
    # point within the stall budget counts as no progress.
    X = np.array([[[1.0], [3.0]], [[-3.0], [1.0]]])
    H, y = TokenGram(X).H, np.array([1.0, 1.0])
    stalled = low_rank_bound(H, y, 2, 0.2, max_nodes=500, stall_nodes=50)
    assert stalled.status == "max_iter" and stalled.nodes <= 52  # one split past the budget
    assert stalled.incumbent == math.inf
    unbudgeted = low_rank_bound(H, y, 2, 0.2, max_nodes=500)
    assert unbudgeted.nodes >= 500 and unbudgeted.value >= stalled.value
