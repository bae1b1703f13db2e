"""Nearly hard attention stays cheap (issue 12, part 4): linearised-SVM polish of nearly hard
starts, and descents tested at every step that stop or switch to it.

On the paper's model at large R sqrt(d) the realisation of the hard-selection alternation's
selection leaves little of each sample's attention off the selected token; the quasi-Newton
descent from there changes the v-step's support at every trial point, while the polish
(:func:`margin_solver.minnorm.search.hard_polish`) sees every margin at once.
"""

import math

import numpy as np
import pytest

from margin_solver.bounds.lower import first_step_margins
from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram, softmax
from margin_solver.core.strategy import DEFAULT_STRATEGY
from margin_solver.descent.alternating import STOPPED, KernelForm, descend, evaluate_phi
from margin_solver.minnorm.search import (
    _dual_norm_bound,
    hard_descend,
    hard_polish,
    hard_value,
    settled_run,
)
from margin_solver.svm.selection import attention_svm, hard_selection_alternation, selection_svm


def instance(R_sqrt_d: float, n: int = 12, T: int = 3, d: int = 400):
    ds = PaperDistribution(d=d, T=T, snr=math.sqrt(5.0 / n), eta=0.15).sample(n, seed=3)
    y = ds.y.astype(np.float64)
    gram = TokenGram(ds.X)
    hard = hard_selection_alternation(gram.H, y, T, first_step_margins(gram.H, y, T))
    R = R_sqrt_d / math.sqrt(d)
    return KernelForm(ds.X, gram), gram.H, y, T, R, hard


def test_a_nearly_hard_realisation_is_polished_to_the_descents_norm_or_below():
    # R sqrt(d) = 30: nearly hard (leak < 1e-3), 6e-4 above the selection's SVM norm; the
    # descent takes 134 steps (249 v-steps) from there
    form, H, y, T, R, hard = instance(30.0)
    c = attention_svm(H, T, hard.tokens, R)
    assert hard_value(H, y, T, softmax(form.scores(c))) == pytest.approx(hard.norm)
    start = evaluate_phi(form, y, c)
    run = settled_run(form, H, y, T, c, R)
    full = descend(form, y, c, R, sqp=False)
    assert run is not None and "linearised SVM steps" in run.reason
    assert run.status == "local_optimal" and ("gtol" in run.reason or "rtol" in run.reason)
    assert run.norm < math.sqrt(2 * start.phi)
    assert run.norm <= full.norm * (1 + 1e-9)
    assert run.n_eval < full.n_eval
    assert np.max(1 - np.max(run.point.attention, axis=1)) <= DEFAULT_STRATEGY.hard_leak
    assert run.norm_history[-1] == pytest.approx(run.norm, rel=1e-12)


def test_the_polish_reports_its_step_cap():
    form, H, y, T, R, hard = instance(30.0)
    start = evaluate_phi(form, y, attention_svm(H, T, hard.tokens, R))
    run = hard_polish(form, y, start, R, max_iter=2)
    assert run.status == "max_iter" and run.n_iter == 2 and "max_iter=2" in run.reason
    assert run.norm < math.sqrt(2 * start.phi)
    assert len(run.norm_history) == 3 and run.norm_history == sorted(run.norm_history)[::-1]


def test_soft_attention_is_not_polished():
    form, H, y, T, R, hard = instance(1.0)
    c = attention_svm(H, T, hard.tokens, R)
    assert hard_value(H, y, T, softmax(form.scores(c))) is None
    assert settled_run(form, H, y, T, c, R) is None


def test_the_descent_switches_to_the_polish_once_nearly_hard():
    form, H, y, T, R, hard = instance(100.0)
    rng = np.random.default_rng(0)
    c = rng.standard_normal((len(y), T))
    c *= R / math.sqrt(c.reshape(-1) @ H @ c.reshape(-1))
    full = descend(form, y, c, R, sqp=False)
    rounds = hard_descend(form, H, y, T, c, R)
    assert "linearised SVM steps" in rounds.reason
    # both stop once phi decreased by less than rtol = 1e-7 (relative) in 10 steps: the
    # polish ends within that precision of the descent, or lower
    assert rounds.norm <= full.norm * (1 + 1e-7)
    # a start whose selection cannot beat a better one found elsewhere stops as soon as it
    # is nearly hard
    dominated = hard_descend(form, H, y, T, c, R, best_norm=0.5 * full.norm)
    assert dominated.n_iter <= rounds.n_iter and "no better" in dominated.reason
    # its point is no local optimum, and its status does not say it is
    assert dominated.status == "stopped" and dominated.reason.startswith("stopped:")
    assert rounds.status == "local_optimal"


def test_the_selection_family_gives_up_after_its_misses_when_nearly_hard(monkeypatch):
    # with a best run below every selection's SVM norm each nearly hard selection is a miss
    # (its realisation would end near that norm): the family ends after
    # hard_selection_misses value vectors in a row gave nothing better, not after the 20 of
    # soft attention, where the same selections are realised and descended
    from dataclasses import replace
    from types import SimpleNamespace

    import margin_solver.minnorm.search as search

    form, H, y, T, R, hard_svm = instance(100.0)
    calls = []
    alternation = search.hard_selection_alternation

    def counted(*args, **kwargs):
        calls.append(1)
        return alternation(*args, **kwargs)

    monkeypatch.setattr(search, "hard_selection_alternation", counted)
    run = descend(form, y, attention_svm(H, T, hard_svm.tokens, R), R, max_iter=2)
    best = SimpleNamespace(norm=1e-3 * hard_svm.norm, point=run.point)

    def family(hard: bool, strategy=DEFAULT_STRATEGY) -> list:
        calls.clear()
        return list(
            search.search_starts(
                form,
                H,
                y,
                T,
                R,
                best,
                ideas=("selection",),
                max_starts=3,
                hard=hard,
                rng=np.random.default_rng(0),
                strategy=strategy,
            )
        )

    table = DEFAULT_STRATEGY
    assert family(True) == [] and len(calls) == table.hard_selection_misses + 1
    assert table.hard_selection_misses < table.selection_misses
    # the table's value is the one the family reads
    assert family(True, replace(table, hard_selection_misses=2)) == [] and len(calls) == 3
    assert [name for name, _ in family(False)][:1] == ["selection_0"]


def test_a_callers_test_stops_the_descent_at_an_accepted_step():
    form, H, y, T, R, hard = instance(100.0)
    c = attention_svm(H, T, hard.tokens, R)
    seen = []

    def until(point):
        seen.append(point.phi)
        return "enough" if len(seen) == 2 else None

    run = descend(form, y, np.zeros_like(c), R, until=until, sqp=False)
    assert run.status == STOPPED and run.reason == "enough" and run.n_iter == 2
    assert run.point.phi == seen[-1] and len(run.norm_history) == 3


@pytest.mark.parametrize("seed", range(4))
def test_the_dual_norm_bound_is_below_the_selection_svm_and_meets_it_at_its_dual(seed):
    # weak duality: sum(alpha) / sqrt(alpha^T Q alpha) <= ||v*|| for every alpha >= 0, with
    # equality at the SVM's own dual
    form, H, y, T, R, hard = instance(100.0)
    rng = np.random.default_rng(seed)
    samples = np.sort(rng.choice(len(y), size=8, replace=False))
    tokens = hard.tokens[samples]
    svm = selection_svm(H, y, T, tokens, samples)
    assert svm.feasible
    for _ in range(20):
        alpha = rng.exponential(size=samples.size) * (rng.random(samples.size) < 0.7)
        assert _dual_norm_bound(H, y, T, samples, tokens, alpha) <= svm.norm * (1 + 1e-12)
    dual = svm.coef * y[samples]  # coef = alpha * y
    assert _dual_norm_bound(H, y, T, samples, tokens, dual) == pytest.approx(svm.norm, rel=1e-9)
    assert _dual_norm_bound(H, y, T, samples, tokens, np.zeros(samples.size)) == 0.0
