"""The support-aware SQP step of the P_R descent (margin_solver.descent.alternating,
margin_solver.descent.sqp; issue 12 part 3)."""

import functools
import math

import numpy as np
import pytest

from margin_solver.bench.measure.minnorm_convergence import stationarity
from margin_solver.bench.realdata import digits_train_test
from margin_solver.bounds.lower import first_step_margins
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram
from margin_solver.descent.alternating import (
    DenseForm,
    KernelForm,
    _sqp_model,
    descend,
    evaluate_phi,
    with_gradient,
)
from margin_solver.gd.endpoints import token_scale
from margin_solver.svm.selection import attention_svm, hard_selection_alternation


def _hard_selection_start(train, R):
    X, y, T = train.X, train.y.astype(float), train.T
    gram = TokenGram(X)
    form = KernelForm(X, gram)
    hard = hard_selection_alternation(gram.H, y, T, first_step_margins(gram.H, y, T))
    return form, y, form.from_coefficients(attention_svm(gram.H, T, hard.tokens, R))


@functools.lru_cache(maxsize=1)
def _digits_case():
    """Lifted digit patches (token Gram condition number ~1e6), the hard-selection start and
    the quasi-Newton descent from it capped at 200 steps: it crawls (400 steps to its rtol
    stop; docs/decisions.md, "SQP after 250 quasi-Newton steps is the default descent")."""
    train, _ = digits_train_test(20, 0.1, 2, 1002, lift=256, lift_seed=0)
    R = 100 / math.sqrt(token_scale(train.X))
    form, y, p0 = _hard_selection_start(train, R)
    with single_threaded_blas():  # as solve_min_norm runs it; threads only slow these sizes
        quasi = descend(form, y, p0, R, max_iter=200, sqp=False)
    return train, R, form, y, p0, quasi


def _dense(X, run):
    """(v, p) of a kernel-form run as vectors of R^d."""
    return TokenGram.materialize(X, np.stack([run.point.value_coefficients, run.point.p]))


def test_sqp_steps_leave_a_short_descent_unchanged():
    # the paper's data: the quasi-Newton descent ends before SQP steps are tried, so the
    # default (SQP after 250 steps) changes nothing there
    ds = PaperDistribution(d=300, T=2, snr=math.sqrt(4 / 20), eta=0.1).sample(20, seed=3)
    X, y = ds.X, ds.y.astype(float)
    form = KernelForm(X, TokenGram(X))
    R = 100 / math.sqrt(token_scale(X))
    quasi = descend(form, y, form.zeros(), R, sqp=False)
    assert quasi.status == "local_optimal" and quasi.n_iter > 0
    # the strategy table's default, descend's own: SQP steps only after 250 quasi-Newton steps
    sqp = descend(form, y, form.zeros(), R)
    assert sqp.n_iter == quasi.n_iter < 250 and sqp.norm == quasi.norm


def test_sqp_model_predicts_phi_to_second_order():
    # at a fixed support the QP model's value at p + dp is phi(p + dp) up to O(||dp||^3): its
    # error must be far below that of the first-order prediction phi + <g, dp>
    ds = PaperDistribution(d=30, T=3, snr=0.5, eta=0.1).sample(8, seed=4)
    X, y = ds.X, ds.y.astype(float)
    gram = TokenGram(X)
    form = KernelForm(X, gram)
    rng = np.random.default_rng(0)
    p = form.from_coefficients(0.3 * rng.standard_normal((8, 3)))
    point = with_gradient(form, evaluate_phi(form, y, p))
    model = _sqp_model(form, point, R=1e6)  # inside the ball: mu = 0
    assert model.mu == 0
    errors, lengths = [], []
    for t in (1e-5, 1e-4):
        _, dc, value = model.step(t)
        moved = evaluate_phi(form, y, p + dc.reshape(8, 3), support=point.vstep.alpha > 0)
        assert np.array_equal(moved.vstep.alpha > 0, point.vstep.alpha > 0)
        first_order = point.phi + form.inner(point.gradient, dc.reshape(8, 3))
        assert moved.phi < point.phi  # the model's step decreases phi
        assert abs(moved.phi - value) <= 1e-2 * abs(moved.phi - first_order)
        errors.append(abs(moved.phi - value))
        lengths.append(math.sqrt(form.inner(dc, dc)))
    # third order: a step ~10x longer has an error ~1000x larger (a wrong second-order
    # term would give ~100x)
    assert errors[1] / errors[0] >= 0.3 * (lengths[1] / lengths[0]) ** 3


def test_sqp_steps_converge_on_a_digits_instance_where_the_quasi_newton_descent_crawls():
    # the support-aware SQP steps end at a first-order stationary point, lower than the
    # quasi-Newton descent's 200 steps (which end far from it)
    train, R, form, y, p0, quasi = _digits_case()
    assert quasi.status == "max_iter"
    assert stationarity(train.X, y, *_dense(train.X, quasi), R)[0] > 1e-3
    with single_threaded_blas():
        sqp = descend(form, y, p0, R, sqp=True, sqp_after=0)
    assert sqp.status == "local_optimal" and sqp.n_iter < 60
    assert "projected gradient" in sqp.reason  # first-order stationary, not a stall
    assert sqp.norm <= quasi.norm
    assert sqp.point.vstep.min_margin >= 1 - 1e-7
    rel, kkt = stationarity(train.X, y, *_dense(train.X, sqp), R)
    assert rel <= 1e-5 and kkt <= 1e-6


def test_sqp_descent_is_the_same_in_the_dense_and_the_kernel_form():
    # the SQP model works in token coefficients; the dense form reaches them by least squares
    train, _ = digits_train_test(20, 0.1, 2, 1002, lift=64, lift_seed=0)
    X, y = train.X, train.y.astype(float)
    R = 100 / math.sqrt(token_scale(X))
    c0 = np.random.default_rng(1).standard_normal((20, 4))
    runs = []
    for form in (DenseForm(X), KernelForm(X, TokenGram(X))):
        p0 = form.from_coefficients(c0)
        p0 = p0 * (R / math.sqrt(form.inner(p0, p0)))
        # the LDP's v-steps: with the active engine's (equal to rounding) the dense form
        # stops at step 15 on a point within gtol of stationarity (norm 6.7798) and the
        # kernel form goes on to 6.7298, both "local_optimal" by the same test
        runs.append(descend(form, y, p0, R, sqp=True, sqp_after=0, vstep_solver="ldp"))
    for run in runs:
        assert run.status == "local_optimal" and "projected gradient" in run.reason
    assert runs[0].norm == pytest.approx(runs[1].norm, rel=1e-7)


def test_newton_steps_were_removed_and_the_keyword_warns():
    # descend(newton=...) of before the strategy table still runs, ignoring it
    ds = PaperDistribution(d=30, T=3, snr=0.5, eta=0.1).sample(8, seed=4)
    X, y = ds.X, ds.y.astype(float)
    form = KernelForm(X, TokenGram(X))
    plain = descend(form, y, form.zeros(), 1.0, max_iter=5)
    with pytest.warns(DeprecationWarning, match="Newton steps"):
        old = descend(form, y, form.zeros(), 1.0, max_iter=5, newton=True)
    assert old.norm == plain.norm and old.n_iter == plain.n_iter
