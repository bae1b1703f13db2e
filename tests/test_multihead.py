"""H attention heads: outputs, gradients (finite differences), GD forms and schedules, the
H-head min-norm problem against the single-head one, and H = 1 as the old path exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from margin_solver.analysis.heads import head_metrics
from margin_solver.analysis.metrics import trusted_metrics
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.kernel import (
    TokenGram,
    attended_features,
    logistic_loss,
    multihead_outputs,
    multihead_token_loss_and_grads,
    outputs,
    softmax,
)
from margin_solver.core.results import SOLUTION_PRESENT, ConvergenceWarning
from margin_solver.core.validation import InvalidInputError
from margin_solver.descent.alternating import (
    DenseForm,
    KernelForm,
    descend,
    evaluate_phi,
    gradient_coefficients,
)
from margin_solver.gd import endpoints as gdmod
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.minnorm.multihead import MultiHeadForm, solve_min_norm_heads


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((6, 3, 5))
    y = np.array([1.0, -1, 1, -1, 1, -1])
    return X, y


def _loss(X, y, V, P):
    return float(np.mean(logistic_loss(y * multihead_outputs(X, V, P))))


def test_one_head_outputs_are_the_single_head_outputs_bit_for_bit(tiny):
    X, _ = tiny
    rng = np.random.default_rng(0)
    v, p = rng.standard_normal((2, 5))
    assert np.array_equal(multihead_outputs(X, v[None], p[None]), outputs(X, v, p))


def test_outputs_are_the_sum_over_heads(tiny):
    X, _ = tiny
    V, P = np.random.default_rng(1).standard_normal((2, 3, 5))
    by_hand = sum(np.einsum("nt,nt->n", softmax(X @ P[h]), X @ V[h]) for h in range(3))
    np.testing.assert_allclose(multihead_outputs(X, V, P), by_hand, rtol=1e-13)


def test_loss_gradients_match_finite_differences(tiny):
    X, y = tiny
    H = 3
    V, P = np.random.default_rng(2).standard_normal((2, H, 5))
    lg = multihead_token_loss_and_grads(
        y, np.einsum("ntd,hd->hnt", X, P), np.einsum("ntd,hd->hnt", X, V)
    )
    gV, gP = np.tensordot(lg.grad_v, X, axes=2), np.tensordot(lg.grad_p, X, axes=2)
    assert lg.loss == pytest.approx(_loss(X, y, V, P), rel=1e-13)
    eps = 1e-6
    for W, G, which in ((V, gV, "v"), (P, gP, "p")):
        for h, k in [(0, 0), (1, 3), (2, 4)]:
            E = np.zeros_like(W)
            E[h, k] = eps
            args = (V + E, P) if which == "v" else (V, P + E)
            args_m = (V - E, P) if which == "v" else (V, P - E)
            fd = (_loss(X, y, *args) - _loss(X, y, *args_m)) / (2 * eps)
            assert G[h, k] == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("form", ["dense", "kernel"])
def test_gd_state_gradients_match_finite_differences(tiny, form):
    """The gradient each GD form steps along is the loss gradient (dense coordinates)."""
    X, y = tiny
    H = 2
    W0 = np.random.default_rng(4).standard_normal((2 * H, 5)) * 0.3
    state = gdmod._gd_state(form, X, W0, H)
    W = state.W0 + 0.1 * np.random.default_rng(5).standard_normal(state.W0.shape)
    ev = state.evaluate(W, y)
    dense_W = state.dense(W)
    # kernel coefficients map to R^d through the basis; the dense form is its own basis
    basis = state.basis if form == "kernel" else np.eye(5)
    grad = ev.grads @ basis
    eps = 1e-6
    for r, k in [(0, 1), (1, 2), (2, 0), (3, 4)]:
        E = np.zeros_like(dense_W)
        E[r, k] = eps
        fd = (_loss(X, y, *np.split(dense_W + E, 2)) - _loss(X, y, *np.split(dense_W - E, 2))) / (
            2 * eps
        )
        assert grad[r, k] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    assert ev.lg.loss == pytest.approx(_loss(X, y, *np.split(dense_W, 2)), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schedule": "two-step", "beta0": 0.5, "beta1": 2.0},
        {"schedule": "constant", "steps": 15, "step_size": 0.3, "weight_decay": 1e-3},
        {"schedule": "normalized", "steps": 15, "step_size": 0.2, "R": 0.5},
    ],
)
def test_gd_kernel_and_dense_forms_agree_for_three_heads(tiny, kwargs):
    X, y = tiny
    runs = [
        gradient_descent(X, y, heads=3, init="random", init_scale=0.5, seed=3, form=f, **kwargs)
        for f in ("dense", "kernel")
    ]
    a, b = runs
    assert a.v.shape == a.p.shape == (3, 5) and a.heads == 3 and a.attention.shape == (3, 6, 3)
    np.testing.assert_allclose(a.v, b.v, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.p, b.p, rtol=1e-8, atol=1e-10)
    assert a.loss == pytest.approx(_loss(X, y, a.v, a.p), rel=1e-10)
    if "R" in kwargs:
        assert a.p_norm <= kwargs["R"] * (1 + 1e-12)
        assert math.sqrt(np.sum(a.p**2)) == pytest.approx(a.p_norm, rel=1e-12)


def test_gd_heads_lower_the_loss_and_record_head_mean_attention(tiny):
    X, y = tiny
    res = gradient_descent(
        X,
        y,
        heads=2,
        schedule="constant",
        steps=30,
        step_size=0.5,
        init="random",
        seed=0,
        record_every=10,
    )
    assert res.status == "completed"
    assert res.trajectory["loss"][-1] < res.trajectory["loss"][0]
    assert res.selected_token.shape == (6,)


@pytest.mark.parametrize("form", ["dense", "kernel"])
@pytest.mark.parametrize("schedule", ["two-step", "constant", "normalized"])
def test_one_head_is_the_old_path_bit_for_bit(tiny, form, schedule):
    """heads=1 runs the original single-head state; the multi-head state forced to H = 1
    (a different code path) reaches the same iterates to rounding."""
    X, y = tiny
    kw = {"schedule": schedule, "form": form, "init": "random", "seed": 1}
    if schedule != "two-step":
        kw.update(steps=8, step_size=0.2)
    else:
        kw.update(beta0=0.4, beta1=1.0)
    old, new = gradient_descent(X, y, **kw), gradient_descent(X, y, heads=1, **kw)
    assert np.array_equal(old.v, new.v) and np.array_equal(old.p, new.p)
    assert old.loss == new.loss and new.heads == 1 and new.v.shape == (5,)
    W0 = np.random.default_rng(1).standard_normal((2, 5))
    cls = gdmod._MultiHeadKernelGDState if form == "kernel" else gdmod._MultiHeadDenseGDState
    one = (gdmod._KernelGDState if form == "kernel" else gdmod._DenseGDState)(X, W0)
    multi = cls(X, W0, 1)
    W = one.W0 + 0.2
    e1, e2 = one.evaluate(W, y), multi.evaluate(W, y)
    np.testing.assert_allclose(e2.grads, e1.grads, rtol=1e-12, atol=1e-15)
    assert e2.lg.loss == pytest.approx(e1.lg.loss, rel=1e-14)


@pytest.mark.parametrize("kernel", [False, True])
def test_feature_gram_is_the_gram_of_the_concatenated_features(tiny, kernel):
    X, _ = tiny
    base = KernelForm(X, TokenGram(X)) if kernel else DenseForm(X)
    form = MultiHeadForm(base, 3)
    S = softmax(np.random.default_rng(6).standard_normal((3, 6, 3)))
    Z = np.concatenate([attended_features(X, S[h]) for h in range(3)], axis=1)  # (n, 3d)
    np.testing.assert_allclose(form.feature_gram(S), Z @ Z.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", [False, True])
def test_phi_envelope_gradient_per_head_matches_finite_differences(tiny, kernel):
    """phi(p) = ||v*(p)||^2 / 2 over the H heads' p: its gradient (one block per head, as the
    p-steps use it) against central differences of the v-step value."""
    X, y = tiny
    base = KernelForm(X, TokenGram(X)) if kernel else DenseForm(X)
    form = MultiHeadForm(base, 2)
    p = form.from_coefficients(0.2 * np.random.default_rng(7).standard_normal((2, 6, 3)))
    point = evaluate_phi(form, y, p)
    assert point.feasible
    g = form.from_coefficients(gradient_coefficients(form, point))
    direction = form.from_coefficients(np.random.default_rng(8).standard_normal((2, 6, 3)))
    eps = 1e-5
    fd = (
        evaluate_phi(form, y, p + eps * direction).phi
        - evaluate_phi(form, y, p - eps * direction).phi
    ) / (2 * eps)
    assert form.inner(g, direction) == pytest.approx(fd, rel=1e-4, abs=1e-9)


def test_one_head_form_descends_like_the_single_head_form(tiny):
    X, y = tiny
    base = KernelForm(X, TokenGram(X))
    c0 = 0.1 * np.random.default_rng(9).standard_normal((6, 3))
    single = descend(base, y, c0, 2.0, max_iter=20)
    multi = descend(MultiHeadForm(base, 1), y, c0[None], 2.0, max_iter=20)
    assert multi.norm == pytest.approx(single.norm, rel=1e-9)


def _digits_like(n, seed):
    """Real tokens (scikit-learn digits cut into 4 patches), the off-distribution case."""
    from margin_solver.bench.realdata import digits_train_test

    train, _ = digits_train_test(n, 0.1, seed, seed + 1, n_test=20)
    return train


@pytest.mark.parametrize(
    "make, R",
    [
        (lambda: PaperDistribution(d=40, snr=0.6, eta=0.1).sample(10, seed=2), 3.0),
        (lambda: PaperDistribution(d=6, T=3, snr=1.0, eta=0.0).sample(9, seed=1), 10.0),
        (lambda: _digits_like(12, 0), 20.0),
    ],
    ids=["paper", "n_gt_d", "digits"],
)
# max_iter=100 keeps it fast: a start may stop at the cap, a feasible point all the same
@pytest.mark.filterwarnings("ignore:solve_min_norm returned status 'max_iter'")
def test_h_head_norm_never_exceeds_one_head_at_the_same_R(make, R):
    data = make()
    heads = 3 if data.d == 40 else 2
    kw = {"n_random_starts": 1, "search_starts": 0, "max_iter": 100}
    one = solve_min_norm_heads(data, R=R, **kw)
    many = solve_min_norm_heads(data, R=R, heads=heads, **kw)
    assert one.status in SOLUTION_PRESENT and many.status in SOLUTION_PRESENT
    assert many.norm <= one.norm * (1 + 1e-9)
    assert many.single_head_norm == one.norm
    assert not many.certified and many.lower_bound is None and "not certified" in many.message
    assert many.v.shape == (heads, data.d) and many.p_norm <= R * (1 + 1e-9)
    f = multihead_outputs(data.X, many.v, many.p)
    assert np.min(data.y * f) == pytest.approx(many.min_margin) and many.min_margin >= 1 - 1e-6
    assert math.sqrt(np.sum(many.v**2)) == pytest.approx(many.norm, rel=1e-6)


def test_conflicting_samples_are_infeasible_for_any_number_of_heads():
    X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, 1.0]]])
    with pytest.warns(ConvergenceWarning):
        res = solve_min_norm_heads(X, np.array([1, -1, 1]), R=1.0, heads=2)
    assert res.status == "infeasible" and res.certified and res.heads == 2


def test_heads_must_be_a_positive_integer(tiny):
    X, y = tiny
    with pytest.raises(InvalidInputError, match="heads"):
        gradient_descent(X, y, heads=0)
    with pytest.raises(InvalidInputError, match="heads"):
        solve_min_norm_heads(X, y, R=1.0, heads=1.5)


def test_head_metrics(tiny):
    X, y = tiny
    data = Dataset(X, y.astype(int))
    V, P = np.random.default_rng(10).standard_normal((2, 2, 5))
    m = head_metrics(V, P, data)
    assert m.min_margin == pytest.approx(float(np.min(y * multihead_outputs(X, V, P))))
    one, ref = head_metrics(V[0], P[0], data), trusted_metrics(V[0], P[0], data)
    assert one.min_margin == ref.min_margin and one.error == ref.error


@pytest.mark.parametrize("kernel", [False, True])
def test_vstep_at_fixed_p_is_the_svm_on_concatenated_features(tiny, kernel):
    """The H-head v-step (summed Gram, LDP engine) against the primal SVM on the explicit
    (n, H d) features, a different engine on a different representation."""
    from margin_solver.svm.vstep import solve_vstep

    X, y = tiny
    base = KernelForm(X, TokenGram(X)) if kernel else DenseForm(X)
    form = MultiHeadForm(base, 2)
    P = np.random.default_rng(11).standard_normal((2, 5))
    p = (
        P
        if not kernel
        else np.stack(
            [
                np.linalg.lstsq(base.gram.H, X.reshape(18, 5) @ P[h], rcond=None)[0].reshape(6, 3)
                for h in range(2)
            ]
        )
    )
    point = evaluate_phi(form, y, p)
    Z = np.concatenate([attended_features(X, softmax(X @ P[h])) for h in range(2)], axis=1)
    ref = solve_vstep(Z, y, solver="primal")
    assert point.feasible and ref.success
    assert math.sqrt(2 * point.phi) == pytest.approx(ref.norm, rel=1e-6)


def test_equal_heads_divide_the_single_head_norm_by_sqrt_h(tiny):
    """N_H(R) <= N_1(R / sqrt(H)) / sqrt(H): H copies of one head's attention give K = H K_1."""
    X, y = tiny
    base = KernelForm(X, TokenGram(X))
    c = 0.3 * np.random.default_rng(12).standard_normal((6, 3))
    one = evaluate_phi(base, y, c)
    for H in (2, 4):
        many = evaluate_phi(MultiHeadForm(base, H), y, np.stack([c] * H))
        assert math.sqrt(2 * many.phi) == pytest.approx(
            math.sqrt(2 * one.phi) / math.sqrt(H), rel=1e-9
        )


def test_two_heads_beat_random_search_over_the_ball_on_a_tiny_instance():
    """Brute force: the smallest v-step norm over 1500 random P in the joint ball (and the
    single-head optimum) is never below the solver's answer, beyond rounding."""
    rng = np.random.default_rng(13)
    X = rng.standard_normal((5, 2, 3))
    y = np.array([1.0, -1, 1, -1, -1])
    R = 2.0
    res = solve_min_norm_heads(X, y, R=R, heads=2, n_random_starts=2, search_starts=0)
    form = MultiHeadForm(DenseForm(X), 2)
    P = rng.standard_normal((1500, 2, 3))
    P *= (R * rng.random(1500) ** (1 / 6) / np.linalg.norm(P.reshape(1500, -1), axis=1))[
        :, None, None
    ]
    best = min(math.sqrt(2 * evaluate_phi(form, y, p).phi) for p in P)
    assert res.norm <= best * (1 + 1e-6)
    assert res.norm <= res.single_head_norm * (1 + 1e-9)
