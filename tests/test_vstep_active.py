"""The active-set v-step engine ("active", issue 44): the LDP's answers, from any start, bit for
bit again on the same input, and the LDP's proof where there is no interpolator."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin_solver.core.results import INFEASIBLE, OPTIMAL
from margin_solver.svm import vstep
from margin_solver.svm.vstep import solve_trusted_vstep, solve_vstep, solve_vstep_from_support


def random_problem(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels that can be separated: Gaussian with d >= n and random labels, or
    n > d labelled by a random direction (a singular Gram matrix); random scale and offset."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    d = int(rng.integers(n, 3 * n + 2)) if rng.random() < 0.5 else int(rng.integers(1, n + 1))
    Z = rng.standard_normal((n, d)) + rng.uniform(0, 2) * rng.standard_normal(d)
    Z *= 10.0 ** rng.uniform(-2, 2)
    if d >= n:
        return Z, rng.choice([-1.0, 1.0], size=n)
    return Z, np.where(Z @ rng.standard_normal(d) >= 0, 1.0, -1.0)


def assert_same_answer(res, ref):
    assert res.status == OPTIMAL and res.refined, res.message
    assert res.norm**2 == pytest.approx(ref.norm**2, rel=1e-8)
    assert res.min_margin == pytest.approx(1.0, abs=1e-12) and -1e-12 <= res.gap <= 1e-9


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_objective_equals_the_ldp_and_the_kkt_conditions_hold(seed):
    Z, y = random_problem(seed)
    ldp = solve_vstep(Z, y, "ldp", fallback=False)
    res = solve_vstep(Z, y, "active", fallback=False)
    assert ldp.status == OPTIMAL
    assert res.solver == "active"
    assert_same_answer(res, ldp)
    # the KKT conditions, recomputed on the features: primal feasibility, dual feasibility,
    # complementarity and stationarity (v = sum_i alpha_i y_i z_i)
    margins = y * (Z @ res.v)
    assert margins.min() >= 1 - 1e-9 and np.all(res.alpha >= 0)
    on = res.alpha > 0
    np.testing.assert_allclose(margins[on], 1.0, atol=1e-9)
    np.testing.assert_allclose(Z.T @ (res.alpha * y), res.v, atol=1e-9 * np.linalg.norm(res.v))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), flip=st.floats(0.0, 1.0))
def test_warm_start_from_any_support_gives_the_cold_answer(seed, flip):
    Z, y = random_problem(seed)
    K = Z @ Z.T
    cold = solve_trusted_vstep(K, y, "active")
    guess = (cold.alpha > 0) ^ (np.random.default_rng(seed).random(len(y)) < flip)
    warm = solve_vstep_from_support(K, y, guess, "active")
    assert_same_answer(warm, cold)
    np.testing.assert_allclose(warm.coef, cold.coef, rtol=1e-7, atol=1e-9 * np.abs(cold.coef).max())


@pytest.mark.parametrize("seed", range(4))
def test_same_input_same_bits(seed):
    Z, y = random_problem(seed)
    K = Z @ Z.T
    guess = np.random.default_rng(seed).random(len(y)) < 0.5
    for run in (
        lambda: solve_trusted_vstep(K.copy(), y.copy(), "active"),
        lambda: solve_vstep_from_support(K.copy(), y.copy(), guess, "active"),
    ):
        a, b = run(), run()
        assert a.solver == b.solver and a.status == b.status and a.norm == b.norm
        assert np.array_equal(a.alpha, b.alpha) and np.array_equal(a.coef, b.coef)


def infeasible_problems():
    rng = np.random.default_rng(3)
    # equal features with opposite labels (the obvious conflict, found before any engine)
    Z = rng.standard_normal((6, 4))
    Z[3] = Z[1]
    yield Z, np.array([1.0, 1.0, -1.0, -1.0, 1.0, -1.0])
    # z3 = -(z1 + z2), all labels +1: the engine ends on a ray, the LDP proves it
    Z = rng.standard_normal((2, 5))
    yield np.vstack([Z, -Z.sum(axis=0), 3 * np.eye(5)[0]]), np.array([1.0, 1.0, 1.0, -1.0])
    # many more samples than dimensions, random labels: not separable
    for d in (1, 2, 3):
        yield rng.standard_normal((12 * d, d)), rng.choice([-1.0, 1.0], size=12 * d)


@pytest.mark.parametrize("Z, y", list(infeasible_problems()))
def test_reports_infeasible_exactly_where_the_ldp_does(Z, y):
    ldp = solve_vstep(Z, y, "ldp")
    res = solve_vstep(Z, y, "active")
    assert ldp.status == INFEASIBLE
    assert res.status == ldp.status and res.infeasible_samples == ldp.infeasible_samples
    # the engine itself never claims infeasibility: the LDP after it gives the proof
    assert res.solver in (None, "ldp") and res.norm_bound == np.inf
    # ... by design, so the hand-over is not an engine fallback (nor a logged warning)
    assert res.fallbacks == [] == ldp.fallbacks


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_status_is_the_ldps_on_random_labels_near_the_separability_threshold(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    Z = rng.standard_normal((int(rng.integers(d + 1, 4 * d + 3)), d))
    y = rng.choice([-1.0, 1.0], size=len(Z))
    ldp, res = solve_vstep(Z, y, "ldp"), solve_vstep(Z, y, "active")
    assert res.status == ldp.status and res.infeasible_samples == ldp.infeasible_samples
    if ldp.status == OPTIMAL:
        assert_same_answer(res, ldp)


def test_updated_factor_matches_a_fresh_factorisation():
    Z, y = np.random.default_rng(0).standard_normal((25, 60)), np.ones(25)
    y[::2] = -1.0
    K = Z @ Z.T
    state = vstep._ActiveSet(K, y, budget=100, refactor=False)
    state.start(np.array([3, 7, 1, 12], dtype=np.intp), ordered=True)
    for j in (20, 5, 9, 0):
        assert state.add(j) is None
    assert state.drop(np.array([1, 4]))  # samples 7 and 20
    assert state.P.tolist() == [3, 1, 12, 5, 9, 0]
    Q_PP = state._block(state.P)
    lower = state._lower()
    np.testing.assert_allclose(lower @ lower.T, Q_PP, atol=1e-12 * Q_PP.max())
    np.testing.assert_allclose(state.solve(), np.linalg.solve(Q_PP, np.ones(6)), rtol=1e-10)
    # a block of samples out at once: the leading rows kept, the trailing block refactored
    for j in (2, 4, 6):
        assert state.add(j) is None
    assert state.drop_block(np.array([2, 6, 8]))  # samples 12, 2 and 6
    assert state.P.tolist() == [3, 1, 5, 9, 0, 4]
    Q_PP = state._block(state.P)
    lower = state._lower()
    np.testing.assert_allclose(lower @ lower.T, Q_PP, atol=1e-12 * Q_PP.max())
    np.testing.assert_allclose(state.solve(), np.linalg.solve(Q_PP, np.ones(6)), rtol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_a_guess_ordered_by_duals_gives_the_unordered_answer(seed):
    # the warm start from a perturbed problem's duals, taken largest first, with block drops
    rng = np.random.default_rng(seed)
    n, d = 60, 90
    Z = rng.standard_normal((n, d)) + 0.4 * rng.standard_normal(d)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    near = solve_vstep(Z + 0.3 * rng.standard_normal((n, d)), y, "active")
    K = Z @ Z.T
    ordered = vstep.solve_vstep_on_support(K, y, near.alpha, engine="active")
    plain = vstep.solve_vstep_on_support(K, y, near.alpha > 0, engine="active")
    assert ordered is not None and plain is not None
    assert_same_answer(ordered, plain)
    assert_same_answer(ordered, solve_vstep(Z, y, "ldp"))


def test_a_dependent_sample_is_swapped_in_along_the_dual_ray():
    # rank 2 < n = 6 and separable: the method must pass supports of size 2 only
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((6, 2))
    y = np.sign(Z @ np.array([1.0, -0.5]))
    ldp = solve_vstep(Z, y, "ldp", fallback=False)
    res = solve_vstep(Z, y, "active", fallback=False)
    assert res.solver == "active" and np.count_nonzero(res.alpha) <= 2
    assert_same_answer(res, ldp)


def test_scaling_benchmark_writes_rows_the_page_renders(tmp_path):
    from margin_solver.bench.measure import vstep_scaling
    from margin_solver.bench.page import render

    out = tmp_path / "vstep_scaling.json"
    assert vstep_scaling.main(["--n", "30", "--d", "60", "--repeats", "1", "--out", str(out)]) == 0
    page = render(
        "<!-- table: vstep_scaling columns=n,engine,status -->\n<!-- /table -->", tmp_path
    )
    assert "| 30 | active-warm | optimal |" in page and "| 30 | linearsvc | - |" in page
    rows = json.loads(out.read_text())["rows"]
    assert [row["engine"] for row in rows] == ["active", "active-warm", "ldp", "linearsvc"]
    assert all(abs(row["rel_objective_diff"]) <= 1e-8 for row in rows[:3])


def test_the_solve_s_svms_run_on_its_strategy_s_engine(monkeypatch):
    # every attention SVM of the solve and every selection SVM of its search runs on
    # options' vstep_solver (LB's own SVMs keep the default)
    from margin_solver.core.data import PaperDistribution
    from margin_solver.minnorm import search, solve
    from margin_solver.minnorm.solve import solve_min_norm

    engines = {"attention": [], "selection": []}
    for module, name, kind in (
        (search, "attention_svm", "attention"),
        (solve, "attention_svm", "attention"),
        (search, "selection_svm", "selection"),
        (search, "hard_selection_alternation", "selection"),
    ):
        real = getattr(module, name)
        monkeypatch.setattr(
            module,
            name,
            lambda *a, real=real, kind=kind, **kw: (
                engines[kind].append(kw.get("solver", "ldp")) or real(*a, **kw)
            ),
        )
    # d <= n T: the search runs
    data = PaperDistribution(d=10, T=2, snr=1.0, eta=0.1).sample(6, seed=3)
    active = solve_min_norm(data, R=1.0, search_starts=1)  # the default engine
    used = {kind: set(found) for kind, found in engines.items()}
    for found in engines.values():
        found.clear()
    ldp = solve_min_norm(data, R=1.0, search_starts=1, options={"vstep_solver": "ldp"})
    assert used == {"attention": {"active"}, "selection": {"active"}}
    assert {kind: set(found) for kind, found in engines.items()} == {
        "attention": {"ldp"},
        "selection": {"ldp"},
    }
    assert active.norm == pytest.approx(ldp.norm, rel=1e-9) and active.status == ldp.status
