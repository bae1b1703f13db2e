"""compare(): any two fitted models with dense v and p."""

from __future__ import annotations

import json

import numpy as np
import pytest

from margin_solver.analysis.compare import compare
from margin_solver.analysis.metrics import evaluate
from margin_solver.core.validation import InvalidInputError
from margin_solver.gd.endpoints import gradient_descent


@pytest.fixture(scope="module")
def fitted(paper_split):
    train, test = paper_split(30, 100, seed=2, kappa=4, d=2000, T=2, eta=0.15)
    two = gradient_descent(train, test=test)
    long = gradient_descent(train, schedule="constant", steps=100, weight_decay=1e-3)
    return train, test, two, long


def test_model_against_itself(fitted):
    train, test, two, _ = fitted
    c = compare(two, two, train, test)
    assert c.cos_v == pytest.approx(1.0) and c.cos_p == pytest.approx(1.0)
    assert c.same_token_train == 1.0 and c.same_token_test == 1.0
    assert c.a == c.b


def test_numbers_come_from_the_models(fitted):
    train, test, two, long = fitted
    c = compare(two, long, train, test, names=("two-step", "long GD"))
    m = evaluate(long.v, long.p, train)
    assert c.b.train_error == m.error and c.b.min_margin == m.min_margin
    assert c.b.normalized_margin == pytest.approx(m.min_margin / np.linalg.norm(long.v))
    assert c.b.attn_signal_noisy == m.attn_signal_noisy
    assert c.a.test_error_clean == evaluate(two.v, two.p, test).error_clean
    expected_cos = two.v @ long.v / (np.linalg.norm(two.v) * np.linalg.norm(long.v))
    assert c.cos_v == pytest.approx(expected_cos)
    sel = evaluate(two.v, two.p, train).selected_token == m.selected_token
    assert c.same_token_train == pytest.approx(sel.mean())


def test_table_and_json(fitted):
    train, test, two, long = fitted
    c = compare(two, long, train, test, names=("two-step", "long GD"))
    text = str(c)
    header = text.splitlines()[0]
    assert "two-step" in header and "long GD" in header
    for label in (
        "||v||",
        "normalised margin",
        "cos(v_a, v_b)",
        "same token (test)",
        "attention on signal, noisy",
        "test error (clean labels)",
    ):
        assert label in text
    data = json.loads(c.to_json())
    assert data["names"] == ["two-step", "long GD"]
    assert data["a"]["interpolates"] is True
    assert data["cos_p"] == pytest.approx(c.cos_p)


def test_zero_vector_cosine_and_no_test(fitted):
    train, _, two, _ = fitted

    class Zero:
        v = np.zeros(train.d)
        p = np.zeros(train.d)

    c = compare(two, Zero(), train)
    assert c.cos_v is None and c.cos_p is None
    assert c.same_token_test is None and c.a.test_error is None
    assert "same token (test)" not in str(c)


def test_estimator_attributes_are_read(fitted):
    from margin_solver.estimator import SingleHeadAttentionClassifier

    train, _, two, _ = fitted
    clf = SingleHeadAttentionClassifier(method="gd").fit(train.X, train.y)
    assert compare(clf, two, train).cos_v == pytest.approx(1.0)


def test_bad_inputs(fitted):
    train, _, two, _ = fitted
    with pytest.raises(InvalidInputError, match="has no dense v and p"):
        compare(two, object(), train)
    with pytest.raises(InvalidInputError, match="train must be a Dataset"):
        compare(two, two, train.X)

    class Short:
        v = np.ones(3)
        p = np.ones(3)

    with pytest.raises(InvalidInputError, match=r"Expected b.v of shape \(2000,\)"):
        compare(two, Short(), train)


def test_min_norm_result_against_gd(fitted):
    from margin_solver.minnorm.solve import solve_min_norm

    train, test, two, _ = fitted
    mn = solve_min_norm(train, R=float(np.linalg.norm(two.p)))
    c = compare(mn, two, train, test, names=("min-norm", "two-step"))
    assert c.a.min_margin == pytest.approx(mn.min_margin, rel=1e-9)
    assert c.a.normalized_margin == pytest.approx(mn.min_margin / mn.norm, rel=1e-9)
    assert c.a.interpolates and c.b.interpolates
    assert -1 <= c.cos_v <= 1 and c.same_token_train == pytest.approx(
        np.mean(mn.selected_token == evaluate(two.v, two.p, train).selected_token)
    )
    assert "min-norm" in str(c).splitlines()[0]
