"""Kernel numerics: gradients against finite differences, invariances, stability, Gram forms."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from margin_solver.core import kernel as K


def _instance(seed=0, n=5, T=3, d=7, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    y = rng.choice([-1.0, 1.0], size=n)
    v = rng.standard_normal(d) * scale
    p = rng.standard_normal(d) * scale
    return X, y, v, p


def _fd_grad(fun, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


def test_tiny_model_by_hand():
    # one sample, tokens e1 and e2; p = (log 3, 0) gives attention (3/4, 1/4)
    X = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    p = np.array([np.log(3.0), 0.0])
    v = np.array([4.0, 8.0])
    np.testing.assert_allclose(K.attention(X, p), [[0.75, 0.25]])
    np.testing.assert_allclose(K.outputs(X, v, p), [0.75 * 4 + 0.25 * 8])
    # df/dp = X^T [s * (u - f)] with u = (4, 8), f = 5
    np.testing.assert_allclose(K.output_grad_p(X, v, p), [[0.75 * -1, 0.25 * 3]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_output_grad_p_matches_finite_differences(seed):
    X, _, v, p = _instance(seed)
    G = K.output_grad_p(X, v, p)
    for i in range(X.shape[0]):
        fd = _fd_grad(lambda q, i=i: K.outputs(X[i : i + 1], v, q)[0], p)
        np.testing.assert_allclose(G[i], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_gradients_match_finite_differences(seed):
    X, y, v, p = _instance(seed)
    lg = K.loss_and_grads(X, y, v, p)
    fd_v = _fd_grad(lambda w: K.loss_and_grads(X, y, w, p).loss, v)
    fd_p = _fd_grad(lambda q: K.loss_and_grads(X, y, v, q).loss, p)
    np.testing.assert_allclose(lg.grad_v, fd_v, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(lg.grad_p, fd_p, rtol=1e-6, atol=1e-9)
    assert lg.loss == pytest.approx(np.mean(np.log1p(np.exp(-y * K.outputs(X, v, p)))))


@pytest.mark.parametrize("seed", [0, 3])
def test_token_gram_loss_gradients_match_finite_differences_in_coefficients(seed):
    X, y, _, _ = _instance(seed, n=4, T=2, d=9)
    rng = np.random.default_rng(seed + 10)
    a, c = rng.standard_normal((4, 2)), rng.standard_normal((4, 2)) * 0.3
    G = K.TokenGram(X)
    lg = G.loss_and_grads(y, a, c)
    # gradients w.r.t. coefficients are H @ (coefficient gradient) by the chain rule
    fd_a = _fd_grad(lambda b: G.loss_and_grads(y, b, c).loss, a)
    fd_c = _fd_grad(lambda b: G.loss_and_grads(y, a, b).loss, c)
    np.testing.assert_allclose(G.apply(lg.grad_v), fd_a, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(G.apply(lg.grad_p), fd_c, rtol=1e-6, atol=1e-9)


def test_token_gram_matches_dense_forms():
    X, y, _, _ = _instance(4, n=6, T=3, d=40)
    rng = np.random.default_rng(5)
    a, c = rng.standard_normal((6, 3)), rng.standard_normal((6, 3)) * 0.2
    G = K.TokenGram(X)
    v, p = G.materialize(X, a), G.materialize(X, c)
    np.testing.assert_allclose(G.outputs(a, c), K.outputs(X, v, p), rtol=1e-12)
    np.testing.assert_allclose(G.sq_norm(c), p @ p, rtol=1e-12)
    s = G.attention(c)
    Z = K.attended_features(X, s)
    np.testing.assert_allclose(G.feature_gram(s), Z @ Z.T, rtol=1e-10, atol=1e-10)
    beta = rng.standard_normal(6)
    np.testing.assert_allclose(G.materialize(X, G.feature_coefficients(s, beta)), Z.T @ beta)
    dense, coef = K.loss_and_grads(X, y, v, p), G.loss_and_grads(y, a, c)
    assert dense.loss == pytest.approx(coef.loss, rel=1e-12)
    np.testing.assert_allclose(G.materialize(X, coef.grad_v), dense.grad_v, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G.materialize(X, coef.grad_p), dense.grad_p, rtol=1e-10, atol=1e-12)


def test_token_gram_from_gram_equals_constructor():
    X, *_ = _instance(6)
    G1 = K.TokenGram(X)
    flat = X.reshape(-1, X.shape[2])
    G2 = K.TokenGram.from_gram(flat @ flat.T, *X.shape)
    c = np.random.default_rng(0).standard_normal(X.shape[:2])
    np.testing.assert_array_equal(G1.attention(c), G2.attention(c))


finite = st.floats(-10, 10, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(
    X=arrays(np.float64, (3, 4, 5), elements=finite),
    v=arrays(np.float64, (5,), elements=finite),
    p=arrays(np.float64, (5,), elements=finite),
    perm_seed=st.integers(0, 2**31),
)
def test_outputs_invariant_to_token_order(X, v, p, perm_seed):
    perm = np.random.default_rng(perm_seed).permutation(4)
    np.testing.assert_allclose(
        K.outputs(X[:, perm], v, p), K.outputs(X, v, p), rtol=1e-9, atol=1e-9
    )


@settings(max_examples=40, deadline=None)
@given(
    X=arrays(np.float64, (3, 2, 4), elements=finite),
    v=arrays(np.float64, (4,), elements=finite),
    p=arrays(np.float64, (4,), elements=finite),
    lam=st.floats(0, 1e3),
)
def test_outputs_one_homogeneous_in_v(X, v, p, lam):
    np.testing.assert_allclose(
        K.outputs(X, lam * v, p), lam * K.outputs(X, v, p), rtol=1e-9, atol=1e-7
    )


@settings(max_examples=60, deadline=None)
@given(a=arrays(np.float64, (4, 6), elements=st.floats(-1e300, 1e300, allow_nan=False)))
def test_softmax_stable_for_any_finite_scores(a):
    s = K.softmax(a)
    assert np.all(np.isfinite(s))
    assert np.all(s >= 0)
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-12)
    # the largest score always gets the largest weight
    np.testing.assert_array_equal(np.max(s, axis=1), s[np.arange(4), np.argmax(a, axis=1)])


def test_softmax_handles_infinite_scores():
    s = K.softmax(np.array([[np.inf, 0.0, -np.inf], [-np.inf, -np.inf, 0.0]]))
    np.testing.assert_allclose(s, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def test_softmax_rows_do_not_depend_on_an_infinite_row_beside_them():
    # An infinite maximum anywhere sends the whole array down the NaN-masking path; its
    # finite rows must come out bit for bit as on the fast path (GD's iterates rely on it).
    finite = np.random.default_rng(3).normal(size=(5, 3)) * 40
    mixed = np.vstack([finite, [[np.inf, 1.0, np.inf]], [[-np.inf, -np.inf, -np.inf]]])
    with np.errstate(invalid="raise"):  # the mask path raises nothing either
        s = K.softmax(mixed)
    np.testing.assert_array_equal(s[:5], K.softmax(finite))
    np.testing.assert_array_equal(s[5], [0.5, 0.0, 0.5])
    np.testing.assert_allclose(s[6], 1 / 3)  # all scores -inf: no token preferred


def test_huge_attention_norm_gives_no_overflow():
    X, y, v, p = _instance(7, d=12)
    p = p / np.linalg.norm(p) * 1e6 * 10  # ||p|| of 1e6 times token norms (~sqrt(12))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        lg = K.loss_and_grads(X, y, v * 1e6, p)
        s = K.attention(X, p)
    assert (
        np.isfinite(lg.loss) and np.all(np.isfinite(lg.grad_v)) and np.all(np.isfinite(lg.grad_p))
    )
    np.testing.assert_allclose(np.sort(s, axis=1)[:, -1], 1.0)
    G = K.TokenGram(X)
    c = np.zeros(X.shape[:2])
    c[0, 0] = 1e7
    with np.errstate(over="raise", invalid="raise"):
        assert np.all(np.isfinite(G.loss_and_grads(y, c * 10, c).grad_p))


def test_logistic_loss_is_stable_and_correct():
    m = np.array([-1e4, -30.0, 0.0, 30.0, 1e4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = K.logistic_loss(m)
        deriv = K.logistic_loss_derivative(m)
    np.testing.assert_allclose(
        loss, [1e4, 30.0 + np.log1p(np.exp(-30.0)), np.log(2), np.log1p(np.exp(-30.0)), 0.0]
    )
    np.testing.assert_allclose(
        deriv, [-1.0, -1 / (1 + np.exp(-30.0)), -0.5, -1 / (1 + np.exp(30.0)), 0.0]
    )


def test_scores_and_values_are_the_products_of_tokens_on_disk_bit_for_bit(tmp_path):
    # in memory and memory-mapped, every layout: the same per-sample products (docs/usage.md)
    X, _, v, p = _instance(seed=4, n=6, T=3, d=2000)
    np.save(tmp_path / "X.npy", X)
    on_disk = np.load(tmp_path / "X.npy", mmap_mode="r")
    a0, u0 = K.scores_and_values(on_disk, p, v)
    for tokens in (X, np.asfortranarray(X), X[:, ::-1, :]):
        a, u = K.scores_and_values(tokens, p, v)
        assert a.shape == u.shape == (6, 3)
        assert np.array_equal(a, tokens @ p) and np.array_equal(u, tokens @ v)
    a, u = K.scores_and_values(X, p, v)
    assert np.array_equal(a, a0) and np.array_equal(u, u0)
