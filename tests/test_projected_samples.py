"""The paper model's test samples drawn in the model's own directions (ProjectedSamples)."""

import numpy as np
import pytest

from margin_solver.analysis.heads import head_metrics
from margin_solver.analysis.metrics import evaluate, evaluate_projected
from margin_solver.core.data import PaperDistribution, ProjectedSamples, _psd_cholesky


def _model(dist, seed=1):
    """A model that reads the signal direction and some noise: errors well inside (0, 1/2)."""
    rng = np.random.default_rng(seed)
    mu_plus, mu_minus = dist.signal_vectors() / dist.signal_norm
    v = 3 * (mu_plus - mu_minus) + rng.standard_normal(dist.d)
    p = 2 * (mu_plus + mu_minus) + rng.standard_normal(dist.d)
    return v / np.sqrt(dist.d), p / np.sqrt(dist.d)


def _same(a, b):
    fields = ("n", "error", "error_clean", "min_margin", "attn_signal", "attn_signal_clean")
    return all(getattr(a, f) == getattr(b, f) for f in fields) and np.array_equal(
        a.selected_token, b.selected_token
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"T": 2},
        {"T": 4, "signal": "random", "signal_position": "random"},
        {"T": 3, "noise": "isotropic", "signal": "antipodal"},
    ],
)
def test_projected_samples_have_the_law_of_the_full_test_set(kwargs):
    # 20 000 samples each: the errors' standard error is about 0.003, and a wrong noise
    # covariance (signal span kept, sigma missing) moves them by more than 0.02.
    d = 60
    dist = PaperDistribution(d=d, snr=0.15, eta=0.1, sigma=1.7, **kwargs)
    v, p = _model(dist)
    full = evaluate(v, p, dist.sample(20_000, seed=3))
    proj = evaluate_projected(v, p, ProjectedSamples(dist, 20_000, seed=4))
    assert 0.05 < full.error_clean < 0.45
    assert proj.error_clean == pytest.approx(full.error_clean, abs=0.012)
    assert proj.error == pytest.approx(full.error, abs=0.012)
    assert proj.attn_signal == pytest.approx(full.attn_signal, abs=0.01)


def test_labels_and_signal_tokens_are_those_of_the_full_draw():
    dist = PaperDistribution(d=30, T=3, snr=0.4, eta=0.2, signal_position="random")
    full = dist.sample(50, seed=np.random.SeedSequence(7, spawn_key=(3,)))
    test = ProjectedSamples(dist, 50, seed=np.random.SeedSequence(7, spawn_key=(3,)))
    again = test.sample()  # the same samples with their tokens, as often as asked
    assert np.array_equal(again.X, full.X) and np.array_equal(test.sample().X, full.X)
    assert np.array_equal(test.y, full.y) and np.array_equal(test.clean_y, full.clean_y)
    assert np.array_equal(test.signal_index, full.signal_index)
    W = np.random.default_rng(0).standard_normal((2, 30))
    rows = np.arange(50)
    np.testing.assert_allclose(
        test.project(W)[rows, test.signal_index], full.X[rows, full.signal_index] @ W.T
    )


def test_the_same_model_gets_the_same_numbers_and_one_head_is_the_single_model():
    dist = PaperDistribution(d=40, T=3, snr=0.3)
    test = ProjectedSamples(dist, 300, seed=0)
    v, p = _model(dist)
    once = evaluate_projected(v, p, test)
    assert _same(evaluate_projected(v, p, test), once)
    assert _same(evaluate_projected(v[None], p[None], test), once)


def test_heads_against_the_full_test_set():
    d = 50
    dist = PaperDistribution(d=d, T=2, snr=0.2, eta=0.0)
    V = np.stack([_model(dist, 1)[0], _model(dist, 2)[0]])
    P = np.stack([_model(dist, 3)[1], -_model(dist, 4)[1]])
    full = head_metrics(V, P, dist.sample(20_000, seed=1))
    proj = evaluate_projected(V, P, ProjectedSamples(dist, 20_000, seed=2))
    assert 0.05 < full.error < 0.45
    assert proj.error == pytest.approx(full.error, abs=0.012)
    assert proj.attn_signal == pytest.approx(full.attn_signal, abs=0.01)


def test_no_attention_and_attention_along_v_are_drawn():
    dist = PaperDistribution(d=20, T=4, snr=0.5)
    test = ProjectedSamples(dist, 200, seed=0)
    v, _ = _model(dist)
    uniform = evaluate_projected(v, np.zeros(20), test)
    assert uniform.attn_signal == pytest.approx(0.25)
    along = evaluate_projected(v, 3 * v, test)  # p parallel to v: a rank-one covariance
    assert np.isfinite(along.min_margin) and 0.25 < along.attn_signal < 1


def test_psd_cholesky_reproduces_a_semidefinite_matrix():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((3, 9))
    W = np.vstack([B[0], 2 * B[0], np.zeros(9), B[1:]])  # dependent and zero rows
    C = W @ W.T
    L = _psd_cholesky(C)
    np.testing.assert_allclose(L @ L.T, C, atol=1e-12 * np.abs(C).max())
    assert np.allclose(np.triu(L, 1), 0) and (np.diag(L) >= 0).all()
    definite = B @ B.T
    np.testing.assert_allclose(_psd_cholesky(definite), np.linalg.cholesky(definite))


def test_a_test_set_at_a_million_dimensions_holds_no_tokens():
    dist = PaperDistribution(d=10**6, T=2, snr=0.01)
    test = ProjectedSamples(dist, 1000, seed=0)
    v = np.zeros(10**6)
    v[0], v[1] = 1.0, -1.0
    assert evaluate_projected(v, np.zeros(10**6), test).error_clean == 0.0


@pytest.mark.parametrize("size", [1e-200, 1.0, 1e150])
def test_a_tiny_or_huge_model_is_drawn_as_its_unit_direction_scaled(size):
    # errors do not depend on the scale of v, nor attention on it once p is fixed
    dist = PaperDistribution(d=30, T=3, snr=0.3, eta=0.1)
    test = ProjectedSamples(dist, 400, seed=5)
    v, p = _model(dist)
    ref = evaluate_projected(v, p, test)
    got = evaluate_projected(size * v, p, test)
    assert got.error == ref.error and got.error_clean == ref.error_clean
    assert got.attn_signal == pytest.approx(ref.attn_signal, rel=1e-12)
    assert got.min_margin == pytest.approx(size * ref.min_margin, rel=1e-9)
