"""The soft-selection bound: the envelope it rests on, its validity at points of a leaf and
against exhaustive search, and the certificate it gives where attention is nearly hard."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from test_rbounds import _softmax, exhaustive_p_r

from margin_solver.bounds.lower import global_lower_bound, soft_selection_bound
from margin_solver.bounds.softleaf import leaf_bound, sigmoid_envelope
from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram
from margin_solver.core.strategy import DEFAULT_STRATEGY
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.svm.selection import selection_svm
from margin_solver.svm.vstep import solve_vstep

pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")

LEAF = {"tangents": DEFAULT_STRATEGY.soft_leaf_tangents, "inner_steps": 500}


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 80.0))
def test_envelope_is_convex_below_the_sigmoid_and_equal_past_its_tangent(reach):
    g, dg = sigmoid_envelope(np.array([reach]))
    x = np.linspace(-reach, reach, 4001)
    gx = g(x)
    assert np.all(gx <= expit(-x) + 1e-15)
    assert np.all(gx[:-2] - 2 * gx[1:-1] + gx[2:] >= -1e-14)  # convex on a uniform grid
    # its slope is its derivative, and it is the sigmoid itself where it turned
    h = 1e-6 * max(reach, 1.0)
    inner = x[(x > -reach + 2 * h) & (x < reach - 2 * h)]
    np.testing.assert_allclose(dg(inner), (g(inner + h) - g(inner - h)) / (2 * h), atol=1e-6)
    assert g(np.array([reach]))[0] == pytest.approx(expit(-reach), rel=1e-12)


def _leaf_point(X, y, H, R, rng):
    """A random p of the ball, its v-step's v and norm, and its larger-margin selection."""
    n, T, d = X.shape
    p = rng.standard_normal(d)
    p *= R * rng.uniform(0.3, 1.0) / np.linalg.norm(p)
    Z = np.einsum("itd,it->id", X, _softmax(X @ p))
    res = solve_vstep(Z, y, "ldp")
    if not res.success:
        return None
    margins = y[:, None] * np.einsum("itd,d->it", X, res.v)
    return res.norm, np.argmax(margins, axis=1)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6))
def test_leaf_bound_is_below_every_point_of_its_leaf(seed):
    # Any point (v, p) interpolates, so its larger-margin tokens form a leaf that contains it:
    # the leaf's bound, claimed for points below U, must not exceed its ||v||.
    rng = np.random.default_rng(seed)
    n, T, d = int(rng.integers(3, 7)), int(rng.integers(2, 5)), int(rng.integers(2, 5))
    X = rng.standard_normal((n, T, d))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    H = TokenGram(X).H
    R = float(rng.choice([0.3, 2.0, 8.0]))
    point = _leaf_point(X, y, H, R, rng)
    if point is None:
        return
    norm, selection = point
    svm = selection_svm(H, y, T, selection)
    assert svm.feasible and svm.norm <= norm * (1 + 1e-9)
    target = norm * float(rng.choice([1.0 + 1e-6, 1.01, 1.5]))
    bound = leaf_bound(H, y, R, selection, target, svm.coef, **LEAF)
    assert bound <= norm * (1 + 1e-8)


@pytest.mark.parametrize("seed", range(8))
def test_stage_never_claims_a_target_above_the_optimum(seed):
    # The target is put above an exhaustive estimate of P_R, where a point below it exists:
    # the stage must prove less than that point's norm.
    rng = np.random.default_rng(100 + seed)
    n, T, d = 5, 2 + seed % 2, int(rng.integers(2, 4))
    X = rng.standard_normal((n, T, d))
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    R = [1.0, 3.0, 10.0, 30.0][seed % 4]
    H = TokenGram(X).H
    lb = global_lower_bound(X, y)
    if not math.isfinite(lb.value):
        return
    upper = exhaustive_p_r(X, y, R, rng, n_points=300, n_polish=2)
    soft = soft_selection_bound(
        H, y, R, upper * 1.02, lb.value, lb.selection, DEFAULT_STRATEGY, math.inf, 0.0
    )
    assert soft.value <= upper * (1 + 1e-7)


def test_soft_attention_costs_one_svm_and_no_cone_program():
    # At small R the leaf's margins cannot be charged (k = 0): the stage stops at once.
    rng = np.random.default_rng(3)
    X = rng.standard_normal((8, 2, 4))
    y = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
    H = TokenGram(X).H
    lb = global_lower_bound(X, y)
    soft = soft_selection_bound(
        H, y, 0.05, lb.value * 1.5, lb.value, lb.selection, DEFAULT_STRATEGY, math.inf, 0.0
    )
    assert soft.value == 0.0 and soft.nodes == 1 and "is not above" in soft.reason


NEARLY_HARD = PaperDistribution(d=500, T=2, snr=math.sqrt(4.0 / 40), eta=0.15).sample(40, seed=1)


@pytest.mark.parametrize("scale", [1.0, 1e-6, 1e4])
def test_nearly_hard_attention_is_certified_by_the_stage(scale):
    # The paper's model at R sqrt(d) = 44.7 (n = 40, d = 500): LB and the linearised bound
    # leave a gap above gap_tol (the Lagrangian and box stages after them left 1.5e-4 after
    # 18 s); the soft-selection stage closes it, at any scale of the tokens (P_R(c X) at
    # R / c is P_R(X) / c: the cone program works in units of the token norm).
    X, R = NEARLY_HARD.X * scale, 44.7 / math.sqrt(500) / scale
    res = global_lower_bound(X, NEARLY_HARD.y, R=R)
    assert res.status == "optimal" and res.gap <= 1e-4
    assert res.method == "hard-selection+linearised+soft-selection"
    lb = global_lower_bound(X, NEARLY_HARD.y)
    assert (res.incumbent - lb.value) / res.incumbent > 1e-4  # LB alone does not certify


def test_the_certified_solve_gets_the_stage_at_its_root():
    R = 44.7 / math.sqrt(500)
    solve = solve_min_norm(NEARLY_HARD.X, NEARLY_HARD.y, R=R, certify=True)
    assert solve.status == "optimal" and "soft-selection" in solve.bound.method
    assert solve.start == "lb_selection" and len(solve.start_norms) == 1  # no other start


@pytest.mark.parametrize("seed", range(6))
def test_leaf_bound_is_below_the_solver_point_of_its_leaf(seed):
    # A descent's end point is where the leaf's bound is nearest to tight; with T = 3 and 4
    # the other tokens share the attention, whose charge the bound must not overstate.
    T = 3 + seed % 2
    data = PaperDistribution(d=300, T=T, snr=math.sqrt(1.0 / 16), eta=0.15).sample(16, seed=seed)
    R = [10.0, 30.0, 100.0][seed % 3] / math.sqrt(300)
    res = solve_min_norm(data.X, data.y, R=R, search_starts=0, n_random_starts=0)
    assert res.v is not None
    y = data.y.astype(float)
    H = TokenGram(data.X).H
    selection = np.argmax(y[:, None] * np.einsum("itd,d->it", data.X, res.v), axis=1)
    svm = selection_svm(H, y, T, selection)
    bound = leaf_bound(H, y, R, selection, res.norm * (1 + 1e-6), svm.coef, **LEAF)
    assert svm.norm <= bound <= res.norm * (1 + 1e-8)
