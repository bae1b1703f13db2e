"""The public attention SVM (issue 14, part 5): known answers, infeasibility, bad input."""

import numpy as np
import pytest

import margin_solver
from margin_solver.core.validation import InvalidInputError
from margin_solver.svm.selection import solve_attention_svm


def test_known_answer_two_samples():
    # Sample 0 needs p1 - p2 >= 1, sample 1 p1 + p2 >= 1: the least-norm p is (1, 0).
    X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [-1.0, 0.0]]])
    np.testing.assert_allclose(solve_attention_svm(X, [0, 0], R=2.0), [2.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(solve_attention_svm(X, [1, 1]), [-1.0, 0.0], atol=1e-9)
    assert margin_solver.solve_attention_svm is solve_attention_svm


def test_known_answer_three_tokens():
    # One sample, tokens e1, e2, e3 in R^3, select e1: p1 - p2 >= 1, p1 - p3 >= 1; the least
    # norm p is (2/3, -1/3, -1/3) (direction (2, -1, -1) / sqrt(6)).
    X = np.eye(3)[None]
    p = solve_attention_svm(X, [0], R=np.sqrt(6))
    np.testing.assert_allclose(p, [2.0, -1.0, -1.0], atol=1e-9)


def test_infeasible_selection_is_none():
    X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    assert solve_attention_svm(X, [0, 1]) is None


def test_random_tokens_select_what_was_asked():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 4, 40))
    sel = rng.integers(0, 4, size=6)
    p = solve_attention_svm(X, sel, R=3.0)
    assert np.linalg.norm(p) == pytest.approx(3.0)
    scores = X @ p
    assert np.array_equal(np.argmax(scores, axis=1), sel)


@pytest.mark.parametrize("sel", [[0], [0, 2], [0.0, 1.0], [-1, 0]])
def test_bad_selection(sel):
    X = np.zeros((2, 2, 3)) + np.arange(3)
    with pytest.raises(InvalidInputError, match="selection"):
        solve_attention_svm(X, sel)
