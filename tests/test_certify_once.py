"""solve_min_norm(certify=True) certifies the solve's own best point (issues 12 and 19): LB
before the starts, the finite-R stages after the search against the best point found, the
hard-selection alternation computed once, and no descent of the bound's own."""

import math

import numpy as np
import pytest

import margin_solver.bounds.lower
from margin_solver.bench.measure.search_quality import make_instance
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.kernel import TokenGram
from margin_solver.core.results import ConvergenceWarning
from margin_solver.minnorm.solve import solve_min_norm

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")


def _cancer_rows():
    """Standardised breast-cancer features, rows ``default_rng(0).permutation(569)[:12]``,
    cut into T = 3 tokens of d = 10."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    features = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
    rows = np.random.default_rng(0).permutation(len(data.target))[:12]
    return features[rows, :30].reshape(12, 3, 10), np.where(data.target[rows] == 1, 1.0, -1.0)


def test_a_point_only_the_search_finds_is_certified_by_lb():
    # only the search's realisable starts reach the optimum here; the bound's own descents
    # stopped at 1.2755 against 0.8453, and before this change its box search ran to the
    # 2000-SVM stall stop (12.6 s at load 6) before the solve's point could close the gap
    X, y = _cancer_rows()
    res = solve_min_norm(X, y, R=1e4 / math.sqrt(10), certify=True)
    assert res.status == "optimal" and res.certified
    assert res.start.startswith("realisable")
    assert 0 <= res.gap <= res.gap_tol
    assert res.lower_bound == pytest.approx(0.845307, rel=1e-5)
    # LB alone closes it: no linearised, Lagrangian or box stage was needed
    assert res.bound.method == "hard-selection" and res.bound.bound_kind == "finite-R"


def _counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("certify", [True, False])
def test_the_bound_runs_no_descent_and_one_alternation(monkeypatch, certify, counted_bound):
    # n = 12, T = 2: LB by branch-and-bound (T^n > 256), d <= n T so the search runs; the
    # starts, the search's guide, LB and the finite-R bound all use the one alternation
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((12, 2, 6)), rng.choice([-1.0, 1.0], 12)
    descents = _counting(monkeypatch, margin_solver.bounds.lower, "descend")
    alternations = _counting(monkeypatch, margin_solver.bounds.lower, "hard_selection_alternation")
    res = solve_min_norm(X, y, R=10 / math.sqrt(6), certify=certify)
    assert res.solution_present
    assert len(res.start_norms) > 5  # the search ran
    assert descents == [] and len(alternations) == 1
    if certify:  # the bound is the finite-R one, against the solve's best point
        # (the box search may lower its copy of the incumbent, never raise it)
        assert res.bound.bound_kind == "finite-R"
        assert res.bound.incumbent <= min(res.start_norms.values()) * (1 + 1e-12)
        assert res.lower_bound <= res.norm * (1 + 1e-9)
    else:  # the public bound still finds its own incumbent by descending
        with pytest.warns(ConvergenceWarning):
            bound = global_lower_bound(X, y, R=10 / math.sqrt(6))
        assert len(descents) >= 1 and math.isfinite(bound.incumbent)
        assert bound.value <= res.norm * (1 + 1e-9)


def test_linearised_stage_takes_a_sample_whose_mean_token_is_zero():
    # integer tokens (search-quality instance 157): sample 0's tokens sum to 0, so at uniform
    # attention its feature is 0 and no v interpolates; rounding made K_00 = -1.1e-16, which
    # the v-step rejected (an InvalidInputError out of certify=True)
    X, y = make_instance("integer", 8, 3, 3, 20261287)
    assert np.all(X[0].sum(axis=0) == 0)
    value = margin_solver.bounds.lower._linearised(
        TokenGram(X).H, y, 3, 10 / math.sqrt(3), 1.0, 0.0, math.inf
    )
    assert value == 0.0
