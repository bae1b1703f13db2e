"""Issue 43: ``time_limit`` holds for the whole call, past the token Gram product too: the H
heads' starts under the caller's guard, the checks after the product (conflict screen,
symmetry check), the finite-R bound's Lagrangian stage (cvxpy's import and compilation), and
progress lines of the bound's long stages.

The full-size figures (``solve_min_norm_heads(heads=10**5, time_limit=5)``: 20.2 s before;
``global_lower_bound(R=3, time_limit=5)`` at n = 40: 8.8-9.7 s before) are measured in
docs/benchmarks.md ("The time limit's margin"); here the clock is patched, or the instances
are tiny, so that nothing depends on the machine's speed.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram, multihead_outputs, outputs, softmax
from margin_solver.core.results import ConvergenceWarning
from margin_solver.descent.alternating import DenseForm, KernelForm
from margin_solver.minnorm import multihead
from margin_solver.minnorm.multihead import MultiHeadForm, solve_min_norm_heads

HEADS_DATA = PaperDistribution(d=6, snr=0.5, eta=0.0).sample(6, seed=0)


@pytest.mark.parametrize("kernel", [False, True])
def test_the_heads_form_is_each_head_of_the_single_head_form(kernel):
    """The batched products over all heads against the single-head form, head by head."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3, 4))
    base = KernelForm(X, TokenGram(X)) if kernel else DenseForm(X)
    form = MultiHeadForm(base, 4)
    a = form.from_coefficients(rng.standard_normal((4, 5, 3)))
    b = form.from_coefficients(rng.standard_normal((4, 5, 3)))
    coef = rng.standard_normal((4, 5, 3))
    for h in range(4):
        np.testing.assert_allclose(form.scores(a)[h], base.scores(a[h]), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            form.token_values(coef)[h], base.token_values(coef[h]), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(form.dense(a)[h], base.dense(a[h]), rtol=1e-12, atol=1e-12)
    by_head = sum(base.inner(a[h], b[h]) for h in range(4))
    assert form.inner(a, b) == pytest.approx(by_head, rel=1e-12)
    assert form.zeros().shape == (4, *base.zeros().shape) and not form.zeros().any()
    K = form.feature_gram(softmax(form.scores(a)))
    assert np.array_equal(K, K.T)


def test_many_heads_outputs_are_the_sum_of_each_heads():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 3, 4))
    V, P = rng.standard_normal((2, 50, 4))
    by_head = sum(outputs(X, V[h], P[h]) for h in range(50))
    np.testing.assert_allclose(multihead_outputs(X, V, P), by_head, rtol=1e-12, atol=1e-12)


def test_no_start_of_the_heads_is_drawn_after_the_limit(monkeypatch):
    """The heads' starts share the caller's guard: a limit that passes during a descent of
    the heads draws no further start (drawing one was a product over every head, checked only
    afterwards), and the answer is the best point so far with status time_limit."""
    real, late = time.perf_counter, [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real() + late[0])
    descend, ran = multihead.descend, []

    def descend_past_the_deadline(form, y, p0, R, **kw):
        ran.append(p0)
        if len(ran) == 2:  # the clock passes the limit during the last deterministic start
            late[0] += 600.0
        return descend(form, y, p0, R, **kw)

    drawn = itertools.count()
    random_starts = multihead._random_starts

    def counted(*args):
        for start in random_starts(*args):
            next(drawn)
            yield start

    monkeypatch.setattr(multihead, "descend", descend_past_the_deadline)
    monkeypatch.setattr(multihead, "_random_starts", counted)
    with pytest.warns(ConvergenceWarning, match="'time_limit'"):
        res = solve_min_norm_heads(
            HEADS_DATA, R=3.0, heads=3, n_random_starts=5, search_starts=0, time_limit=60
        )
    assert len(ran) == 2 and next(drawn) == 0
    assert res.status == "time_limit" and res.solution_present
    assert list(res.start_norms) == ["single_head", "split"]
    assert "stopped by the time limit" in res.message
