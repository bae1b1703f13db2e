"""The faster forms of hot kernels give the very same floats as the forms they replaced."""

import numpy as np
import pytest

from margin_solver.core.kernel import TokenGram
from margin_solver.svm.selection import _SLICED_RUNS, _difference_gram, _principal_block


@pytest.mark.parametrize("n,T", [(1, 1), (1, 3), (7, 1), (30, 4), (100, 4)])
def test_feature_gram_is_bitwise_the_einsum_contraction(n, T):
    # the two batched products replaced np.einsum with a fixed path; the rounding must not move
    rng = np.random.default_rng(n * 10 + T)
    X = rng.standard_normal((n, T, 9))
    gram = TokenGram(X)
    H4 = gram.H.reshape(n, T, n, T)
    for scale in (0.1, 3.0, 30.0):
        scores = scale * rng.standard_normal((n, T))
        s = np.exp(scores - scores.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        reference = np.einsum("it,itjr,jr->ij", s, H4, s, optimize=["einsum_path", (0, 1), (0, 1)])
        assert np.array_equal(gram.feature_gram(s), reference)


@pytest.mark.parametrize("dropped", [[], [0], [7], [3, 4, 60, 99], list(range(0, 100, 2))])
def test_principal_block_equals_fancy_indexing(dropped):
    # a few runs of rows go by slices, many runs (every other sample) by fancy indexing
    rng = np.random.default_rng(len(dropped))
    T = 4
    H = rng.standard_normal((400, 400))
    samples = np.setdiff1d(np.arange(100), dropped)
    rows = (samples[:, None] * T + np.arange(T)).reshape(-1)
    block = _principal_block(H, rows)
    assert np.array_equal(block, H[np.ix_(rows, rows)])
    assert not np.shares_memory(block, H)
    scale = rng.standard_normal(rows.size)
    scaled = _principal_block(H, rows, scale)
    assert np.array_equal(scaled, H[np.ix_(rows, rows)] * scale)
    assert not np.shares_memory(scaled, H)
    runs = 1 + np.count_nonzero(np.diff(rows) != 1)
    assert (runs > _SLICED_RUNS) == (len(dropped) == 50)  # both branches are exercised


def test_difference_gram_is_bitwise_the_dense_products():
    rng = np.random.default_rng(5)
    n, T = 60, 4
    H = TokenGram(rng.standard_normal((n, T, 30))).H
    for _ in range(3):
        selection = rng.integers(0, T, n)
        samples, others = np.nonzero(np.arange(T)[None, :] != selection[:, None])
        plus, minus = samples * T + selection[samples], samples * T + others
        E = np.zeros((samples.size, n * T))
        E[np.arange(samples.size), plus] = 1.0
        E[np.arange(samples.size), minus] = -1.0
        assert np.array_equal(_difference_gram(H, plus, minus), E @ H @ E.T)
