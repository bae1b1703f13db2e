"""The hard-selection lower bound LB: hand example, enumeration vs branch-and-bound, limits."""

import itertools
import math

import numpy as np
import pytest

from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram
from margin_solver.core.validation import InvalidInputError
from margin_solver.svm.selection import attention_svm, selection_svm

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")


def paper_data(n, kappa, T=2, d=200, seed=3):
    return PaperDistribution(d=d, T=T, snr=math.sqrt(kappa / n), eta=0.15).sample(n, seed=seed)


def test_hand_example():
    # Sample 0: tokens e1, e2, y = +1; sample 1: tokens -2 e1, 3 e2, y = -1. Selections:
    # (0, 0): v1 >= 1 and 2 v1 >= 1 -> norm 1;  (0, 1): v1 >= 1, v2 <= -1/3 -> sqrt(10)/3;
    # (1, 0): v2 >= 1, v1 >= 1/2 -> sqrt(5)/2;  (1, 1): v2 >= 1 and v2 <= -1/3, infeasible.
    X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[-2.0, 0.0], [0.0, 3.0]]])
    for method in ("enumerate", "bnb"):
        res = global_lower_bound(X, [1, -1], method=method)
        assert res.status == "optimal"
        assert res.value == pytest.approx(1.0, rel=1e-12)
        assert res.selection.tolist() == [0, 0]


@pytest.mark.parametrize("n", [10, 12])
@pytest.mark.parametrize("kappa", [4.0, 0.1])
def test_bnb_equals_enumeration(n, kappa):
    ds = paper_data(n, kappa)
    assert ds.flipped.any()  # the harmful/benign contrast needs noisy samples
    exact = global_lower_bound(ds.X, ds.y, method="enumerate")
    bnb = global_lower_bound(ds.X, ds.y, method="bnb")
    assert exact.nodes == 2**n
    assert bnb.status == exact.status == "optimal"
    assert bnb.value == pytest.approx(exact.value, rel=1e-9)
    assert bnb.incumbent == pytest.approx(exact.value, rel=1e-9)
    assert bnb.nodes < exact.nodes
    # The reported selection achieves the value.
    H = TokenGram(ds.X).H
    assert selection_svm(H, ds.y.astype(float), 2, bnb.selection).norm == pytest.approx(
        exact.value, rel=1e-9
    )


def test_enumeration_is_the_minimum_over_selections():
    ds = paper_data(5, 1.0, T=3, d=60, seed=1)
    H = TokenGram(ds.X).H
    y = ds.y.astype(float)
    norms = [
        selection_svm(H, y, 3, np.array(s)).norm for s in itertools.product(range(3), repeat=5)
    ]
    res = global_lower_bound(ds.X, ds.y, method="enumerate")
    assert res.value == min(norms)
    assert global_lower_bound(ds.X, ds.y, method="bnb").value == pytest.approx(min(norms), rel=1e-9)


def test_time_limit_gives_a_valid_bound(fast_clock):
    from margin_solver.bounds import lower

    ds = paper_data(7, 1.0, T=3, d=100, seed=2)
    exact = global_lower_bound(ds.X, ds.y, method="enumerate")
    fast_clock(lower)  # the limit acts at the search's first check, on any machine
    res = global_lower_bound(ds.X, ds.y, method="bnb", time_limit=1.0)
    assert res.status == "time_limit"
    assert 0.0 <= res.value <= exact.value * (1 + 1e-12)
    assert res.incumbent >= exact.value * (1 - 1e-12)
    assert "time limit" in res.message


def test_infeasible_data():
    # Samples 0 and 1 repeat one token and carry opposite labels: no selection separates them.
    X = np.array([[[1.0, 2.0], [1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]], [[0.0, 1.0], [1.0, 0.0]]])
    for method in ("enumerate", "bnb"):
        res = global_lower_bound(X, [1, -1, 1], method=method)
        assert res.status == "infeasible"
        assert res.value == math.inf
        assert "no (v, p) interpolates" in res.message


def test_bad_arguments():
    X = np.ones((3, 2, 4))
    with pytest.raises(InvalidInputError, match="Unknown method 'exact'"):
        global_lower_bound(X, [1, -1, 1], method="exact")
    with pytest.raises(InvalidInputError, match="time_limit must be a positive"):
        global_lower_bound(X, [1, -1, 1], time_limit=0)
    with pytest.raises(InvalidInputError, match="y has 2 labels but X has 3 samples"):
        global_lower_bound(X, [1, -1])


def test_attention_svm_singles_out_the_selection():
    ds = paper_data(8, 1.0, T=3, d=100, seed=4)
    H = TokenGram(ds.X).H
    selection = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    R = 3.0
    c = attention_svm(H, 3, selection, R)
    p = TokenGram.materialize(ds.X, c)
    assert np.linalg.norm(p) == pytest.approx(R, rel=1e-12)
    assert np.array_equal(np.argmax(ds.X @ p, axis=1), selection)


def test_best_tokens_breaks_ties_without_rounding():
    from margin_solver.svm.selection import best_tokens

    current = np.array([0, 1, 0, 1])
    for eps in (0.0, 1e-15, -1e-15):
        margins = np.array([[1.0, 1.0 + eps], [1.0 + eps, 1.0], [2.0, 1.0], [1.0, 3.0]])
        # tied samples move off their current token; clear winners are kept or taken
        np.testing.assert_array_equal(best_tokens(margins, current), [1, 0, 0, 1])
    np.testing.assert_array_equal(best_tokens(np.array([[1.0, 1.5, 1.5]]), np.array([1])), [2])
    np.testing.assert_array_equal(best_tokens(np.array([[1.0, 2.0]])), [1])


def test_hard_selection_alternation_is_deterministic_under_rounding():
    from margin_solver.bounds.lower import first_step_margins
    from margin_solver.svm.selection import hard_selection_alternation

    # few dimensions and a shared signal token: samples' tokens tie on the SVM's margin
    ds = PaperDistribution(d=80, T=2, snr=math.sqrt(4 / 40), eta=0.1).sample(40, seed=11)
    y = ds.y.astype(float)
    H = TokenGram(ds.X).H
    base = hard_selection_alternation(H, y, 2, first_step_margins(H, y, 2))
    rng = np.random.default_rng(0)
    for _ in range(3):  # a perturbation of H at the level of its rounding
        noise = rng.standard_normal(H.shape) * 4e-16 * np.abs(H).max()
        Hp = H + (noise + noise.T) / 2
        again = hard_selection_alternation(Hp, y, 2, first_step_margins(Hp, y, 2))
        np.testing.assert_array_equal(again.tokens, base.tokens)
        assert again.norm == pytest.approx(base.norm, rel=1e-9)
