"""Tests for the v-step (margin_solver.svm.vstep): minimize ||v|| s.t. y_i z_i^T v >= 1."""

import doctest
import json
import logging
import subprocess
import sys
import warnings

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin_solver.core.results import FAILED, INFEASIBLE, OPTIMAL_INACCURATE
from margin_solver.core.validation import InvalidInputError
from margin_solver.svm import conic, vstep
from margin_solver.svm.vstep import ENGINES, solve_vstep

# z1 = (1, 0), y = +1 forces v1 >= 1; z2 = (0, 2), y = -1 forces v2 <= -1/2; z3 = (2, 0),
# y = +1 is then satisfied with margin 2. So v = (1, -1/2), ||v||^2 = 5/4, and
# v = a1 z1 - a2 z2 gives alpha = (1, 1/4, 0) with sum(alpha) = 5/4 = ||v||^2.
HAND_Z = np.array([[1.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
HAND_Y = np.array([1.0, -1.0, 1.0])


def gaussian_instance(n, d, seed):
    """Random Gaussian features with random labels: separable almost surely when d >= n."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.choice([-1.0, 1.0], size=n)


def planted_instance(n, d, seed):
    """n > d samples labelled by a random direction: separable, with a singular Gram matrix."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    return Z, np.sign(Z @ rng.standard_normal(d))


def assert_kkt(res, Z, y):
    """The KKT conditions and certificate of the hard-margin SVM without bias."""
    assert res.status == "optimal", res.message
    margins = y * (Z @ res.v)
    assert margins.min() >= 1 - 1e-10
    assert res.min_margin == pytest.approx(margins.min(), abs=1e-10)
    assert np.all(res.alpha >= 0)
    # Complementary slackness alpha_i (margin_i - 1) = 0, in product form: it also holds for
    # unrefined interior-point answers, where a sample just off the margin keeps a dual of
    # order gap / slack.
    assert np.max(res.alpha * (margins - 1)) <= 1e-8 * res.alpha.sum()
    # Stationarity v = sum_i alpha_i y_i z_i, and ||v||^2 = sum(alpha) at the optimum.
    np.testing.assert_allclose(Z.T @ (res.alpha * y), res.v, atol=1e-9 * np.linalg.norm(res.v))
    assert res.norm == pytest.approx(np.linalg.norm(res.v), rel=1e-10)
    assert res.norm**2 == pytest.approx(res.alpha.sum(), rel=1e-9)
    assert -1e-10 <= res.gap <= 1e-9
    assert res.refined
    np.testing.assert_allclose(Z.T @ res.coef, res.v, rtol=1e-12, atol=1e-12)


def assert_engines_agree(results):
    """Objectives to 1e-6 and v to 1e-5 (relative to ||v||) against the exact LDP answer."""
    ref = next(res for res in results if res.solver == "ldp")
    for res in results:
        assert res.norm**2 == pytest.approx(ref.norm**2, rel=1e-6), (res.solver, ref.solver)
        np.testing.assert_allclose(res.v, ref.v, atol=1e-5 * ref.norm)


# --- known answers ----------------------------------------------------------------------


@pytest.mark.parametrize("solver", ENGINES)
def test_hand_example(solver):
    res = solve_vstep(HAND_Z, HAND_Y, solver)
    assert res.status == "optimal" and res.success
    assert res.solver == solver and res.fallbacks == []
    np.testing.assert_allclose(res.v, [1.0, -0.5], atol=1e-8)
    np.testing.assert_allclose(res.alpha, [1.0, 0.25, 0.0], atol=1e-6)
    assert res.norm == pytest.approx(np.sqrt(1.25), rel=1e-9)
    assert res.min_margin == pytest.approx(1.0, abs=1e-12)
    assert_kkt(res, HAND_Z, HAND_Y)


def test_gram_only_input_gives_coefficients_not_v():
    res = solve_vstep(None, HAND_Y, "ecos", K=HAND_Z @ HAND_Z.T)
    assert res.status == "optimal" and res.v is None
    np.testing.assert_allclose(HAND_Z.T @ res.coef, [1.0, -0.5], atol=1e-8)
    assert res.norm == pytest.approx(np.sqrt(1.25), rel=1e-9)


def test_given_gram_with_features_matches_computed_gram():
    Z, y = gaussian_instance(8, 40, seed=3)
    with_k = solve_vstep(Z, y, "ldp", K=Z @ Z.T)
    np.testing.assert_allclose(with_k.v, solve_vstep(Z, y, "ldp").v, rtol=1e-10)


def test_scaling_features_scales_v_inversely():
    Z, y = gaussian_instance(6, 15, seed=4)
    base = solve_vstep(Z, y, "ecos")
    for factor in (1e-4, 1e4):
        scaled = solve_vstep(factor * Z, y, "ecos")
        assert scaled.status == "optimal"
        np.testing.assert_allclose(scaled.v * factor, base.v, rtol=1e-6, atol=1e-9)


def test_docstring_example_runs():
    assert doctest.testmod(vstep, extraglobs={"np": np}).failed == 0


# --- cross-checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "Z, y",
    [
        gaussian_instance(10, 50, seed=0),
        gaussian_instance(12, 12, seed=1),
        planted_instance(30, 5, seed=2),
    ],
    ids=["d>n", "d=n", "planted-n>d"],
)
def test_engines_agree_and_satisfy_kkt(Z, y):
    results = [solve_vstep(Z, y, solver, fallback=False) for solver in ENGINES]
    for res in results:
        assert_kkt(res, Z, y)
    assert_engines_agree(results)


@pytest.mark.parametrize("seed", [0, 1])
def test_engines_agree_before_the_exact_support_solve(monkeypatch, seed):
    """The independent cross-check: the engines' own answers, without the KKT refinement."""
    monkeypatch.setattr(vstep, "_solve_on_support", lambda data, out: None)
    Z, y = gaussian_instance(10, 10 + 5 * seed, seed)
    results = [solve_vstep(Z, y, solver, fallback=False) for solver in ENGINES]
    for res in results:
        # the active set's answer is a KKT solve on its support by construction
        assert res.status == "optimal" and res.refined == (res.solver == "active")
        assert 0 <= res.gap <= 1e-6 and res.min_margin == pytest.approx(1.0, abs=1e-12)
    assert_engines_agree(results)


def test_suboptimal_engine_answer_is_not_passed_off_as_optimal(monkeypatch):
    # A feasible but suboptimal point, v = (2, -2) (rescaled to (1, -1)), with a dual that names no
    # support (or only the inactive sample 2): no exact support solve, and the gap exposes it.
    coef = np.linalg.lstsq(HAND_Z.T, [2.0, -2.0], rcond=None)[0]
    for alpha in (np.zeros(3), np.array([0.0, 0.0, 1.0])):
        bogus = vstep._EngineOutput("optimal", coef, alpha)
        monkeypatch.setitem(vstep._ENGINES, "ecos", lambda data, tol, out=bogus: out)
        res = solve_vstep(HAND_Z, HAND_Y, "ecos", fallback=False)
        assert res.status == OPTIMAL_INACCURATE and not res.refined
        assert res.gap > 0.1 and res.norm == pytest.approx(np.sqrt(2))
        assert solve_vstep(HAND_Z, HAND_Y, "ecos").solver == "clarabel"


def test_planted_instance_is_rank_deficient():
    # Guards the test above: it is meant to exercise the zero-padded columns of G.
    Z, y = planted_instance(30, 5, seed=2)
    assert np.count_nonzero(vstep._VStepData(Z, y, None).factor.root) == 5


def test_symmetrised_svc_with_intercept_equals_no_bias_svm():
    """sklearn's SVC fits an intercept; on {(z, y)} and {(-z, -y)} it must come out 0.

    (w, b) feasible on the symmetrised data implies (w, -b) feasible, hence (w, 0) by
    convexity with the same ||w||; so the optimal w is the bias-free one, and b = 0 because
    the feasible b form an interval [-beta, beta] with beta = min margin - 1 = 0.
    """
    svm = pytest.importorskip("sklearn.svm")
    Z, y = gaussian_instance(9, 20, seed=5)
    clf = svm.SVC(kernel="linear", C=1e8, tol=1e-10).fit(np.vstack([Z, -Z]), np.r_[y, -y])
    res = solve_vstep(Z, y)
    assert abs(clf.intercept_[0]) < 1e-6
    np.testing.assert_allclose(clf.coef_[0], res.v, rtol=1e-5, atol=1e-6)


# derandomize: a fixed example sequence, so a numerical tolerance cannot make CI flaky.
@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(2, 12), extra=st.integers(0, 18), seed=st.integers(0, 2**32 - 1))
def test_property_random_separable_instances(n, extra, seed):
    Z, y = gaussian_instance(n, n + extra, seed)
    results = [solve_vstep(Z, y, solver, fallback=False) for solver in ENGINES]
    for res in results:
        assert_kkt(res, Z, y)
    assert_engines_agree(results)


# --- infeasible inputs ------------------------------------------------------------------


@pytest.mark.parametrize("solver", ENGINES)
def test_duplicate_features_with_opposite_labels(solver):
    Z, y = gaussian_instance(5, 8, seed=6)
    Z[3] = Z[1]
    y[3] = -y[1]
    res = solve_vstep(Z, y, solver)
    assert res.status == INFEASIBLE and not res.success
    assert res.infeasible_samples == [1, 3]
    assert "opposite labels" in res.message and "(1, 3)" in res.message
    assert res.v is None and np.isnan(res.norm)


@pytest.mark.parametrize("solver", ENGINES)
def test_zero_feature_row(solver):
    Z, y = gaussian_instance(4, 6, seed=7)
    Z[2] = 0.0
    res = solve_vstep(Z, y, solver)
    assert res.status == INFEASIBLE
    assert res.infeasible_samples == [2]
    assert "zero features" in res.message


@pytest.mark.parametrize("solver", ENGINES)
def test_general_infeasibility_is_certified_by_ldp(solver):
    # z3 = -(z1 + z2) with all labels +1: margins of z1, z2 >= 1 force z3's margin <= -2.
    Z, _ = gaussian_instance(2, 5, seed=8)
    Z = np.vstack([Z, -Z.sum(axis=0), np.eye(5)[0] * 3])
    y = np.array([1.0, 1.0, 1.0, -1.0])
    res = solve_vstep(Z, y, solver)
    assert res.status == INFEASIBLE
    assert res.infeasible_samples == [0, 1, 2]
    # the active set never claims infeasibility: the LDP after it gives the proof
    assert res.solver == ("ldp" if solver == "active" else solver)
    assert "certificate" in res.message


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"solver": "gurobi"}, r"Unknown solver 'gurobi'; expected one of \['ecos', 'clarabel'"),
        ({"Z": np.ones(3)}, r"Expected Z of shape \(n_samples, n_features\), got .*\(3,\)"),
        ({"Z": [[1.0, np.nan], [0.0, 1.0], [1.0, 1.0]]}, "Z contains NaN"),
        ({"y": [1, 0, 2]}, r"y must hold two labels \(any two distinct values\), got 3"),
        ({"y": [1, -1]}, "y has 2 labels but X has 3 samples"),
        ({"Z": None}, "Give the features Z or their Gram matrix"),
        ({"K": np.eye(2)}, r"Expected K of shape \(3, 3\)"),
        ({"K": np.triu(np.ones((3, 3)))}, "K must be symmetric"),
        ({"K": -np.eye(3)}, r"K must be positive semidefinite .* K\[0, 0\] = -1 < 0"),
        ({"K": np.full((3, 3), np.inf)}, "K contains inf"),
        ({"tol": -1.0}, "tol must be a positive finite number"),
        ({"Z": None, "K": np.eye(3), "solver": "primal"}, "solver='primal' needs the features Z"),
    ],
)
def test_invalid_input_messages(kwargs, match):
    args = {"Z": HAND_Z, "y": HAND_Y} | kwargs
    with pytest.raises(InvalidInputError, match=match):
        solve_vstep(**args)


# --- fallbacks ----------------------------------------------------------------------------


def _raise_solver_error(data, tol):
    raise conic.SolverFailure("ECOS crashed")


def test_fallback_when_engine_raises(monkeypatch):
    monkeypatch.setitem(vstep._ENGINES, "ecos", _raise_solver_error)
    res = solve_vstep(HAND_Z, HAND_Y, "ecos")
    assert res.status == "optimal" and res.solver == "clarabel"
    assert res.fallbacks == ["ecos: raised SolverFailure: ECOS crashed"]
    assert "after fallbacks: ecos: raised SolverFailure" in res.message
    np.testing.assert_allclose(res.v, [1.0, -0.5], atol=1e-8)


def test_fallback_when_engine_is_inaccurate(monkeypatch):
    honest = vstep._ENGINES["ecos"]

    def inaccurate(data, tol):
        return honest(data, tol)._replace(status=OPTIMAL_INACCURATE)

    monkeypatch.setitem(vstep._ENGINES, "ecos", inaccurate)
    res = solve_vstep(HAND_Z, HAND_Y, "ecos")
    assert res.status == "optimal" and res.solver == "clarabel"
    assert res.fallbacks[0].startswith("ecos: engine status 'optimal_inaccurate'")
    # Without fallback the inaccurate answer is returned as such, not hidden.
    alone = solve_vstep(HAND_Z, HAND_Y, "ecos", fallback=False)
    assert alone.status == OPTIMAL_INACCURATE and alone.success and alone.solver == "ecos"
    assert "only an inaccurate solution" in alone.message


def test_fallback_when_engine_claims_infeasible_without_certificate(monkeypatch):
    monkeypatch.setitem(vstep._ENGINES, "ecos", lambda data, tol: vstep._EngineOutput(INFEASIBLE))
    res = solve_vstep(HAND_Z, HAND_Y, "ecos")
    assert res.status == "optimal" and res.solver == "clarabel"
    assert res.fallbacks == ["ecos: reported infeasible but LDP found no certificate"]


def test_fallback_order_starts_from_requested_engine(monkeypatch):
    monkeypatch.setitem(vstep._ENGINES, "clarabel", _raise_solver_error)
    monkeypatch.setitem(vstep._ENGINES, "ecos", _raise_solver_error)
    res = solve_vstep(HAND_Z, HAND_Y, "clarabel")
    assert res.solver == "ldp"
    assert [f.split(":")[0] for f in res.fallbacks] == ["clarabel", "ecos"]


def test_all_engines_failing_is_a_status_not_a_traceback(monkeypatch):
    for name in ENGINES:
        monkeypatch.setitem(vstep._ENGINES, name, _raise_solver_error)
    res = solve_vstep(HAND_Z, HAND_Y, "ecos")
    assert res.status == "failed" and not res.success and res.v is None
    assert len(res.fallbacks) == 3 and res.message.startswith("every engine failed")


def test_cvxpy_solver_error_is_an_engine_failure(monkeypatch):
    def crash(self, *args, **kwargs):
        raise cp.error.SolverError("solver crashed")

    monkeypatch.setattr(cp.Problem, "solve", crash)
    res = solve_vstep(HAND_Z, HAND_Y, "ecos")  # ecos and clarabel both crash
    assert res.status == "optimal" and res.solver == "ldp"
    assert res.fallbacks == [
        "ecos: raised SolverFailure: solver crashed",
        "clarabel: raised SolverFailure: solver crashed",
    ]


def test_missing_solver_names_the_package(monkeypatch):
    monkeypatch.setattr(cp, "installed_solvers", lambda: ["CLARABEL", "SCS"])
    res = solve_vstep(HAND_Z, HAND_Y, "ecos", fallback=False)
    assert res.status == "failed"
    assert "solver ECOS is not installed in cvxpy; install it with `pip install ecos`" in (
        res.message
    )
    assert solve_vstep(HAND_Z, HAND_Y, "ecos").solver == "clarabel"


# --- caching and results ------------------------------------------------------------------


def test_cached_dpp_model_is_reused_without_recanonicalisation():
    n = 7  # a size no other test uses, so the first solve builds the model
    Z, y = gaussian_instance(n, 20, seed=9)
    first = solve_vstep(Z, y, "ecos")
    model = conic.gram_model(n, "ECOS")
    assert model.problem.is_dcp(dpp=True)
    compiled = model.problem._cache.param_prog
    misses = conic.gram_model.cache_info().misses
    Z2, y2 = gaussian_instance(n, 20, seed=10)
    second = solve_vstep(Z2, y2, "ecos")
    assert conic.gram_model.cache_info().misses == misses
    assert conic.gram_model(n, "ECOS") is model
    assert model.problem._cache.param_prog is compiled
    assert second.status == "optimal" and not np.allclose(second.v, first.v)
    assert second.norm == pytest.approx(solve_vstep(Z2, y2, "ldp").norm, rel=1e-6)


def test_result_serialises_and_prints():
    res = solve_vstep(HAND_Z, HAND_Y, "ecos")
    data = json.loads(res.to_json())
    assert data["success"] is True and data["solver"] == "ecos"
    assert data["v"] == pytest.approx([1.0, -0.5], abs=1e-8)
    assert repr(res).splitlines()[1].strip() == (
        "message: optimal (engine ecos), KKT system solved exactly on its 2 support vectors"
    )


def test_nearly_infeasible_ldp_divides_by_the_residual_not_a_cancelled_sum():
    # Two almost equal features with opposite labels: ||w|| ~ 1e7, so the NNLS residual r has
    # ||r||^2 = 1 - sum(u) ~ 1e-15, which float64 used to round to exactly 0 (seed 8 gave a
    # divide-by-zero RuntimeWarning and an infinite dual).
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for seed in range(12):
            rng = np.random.default_rng(seed)
            for gap in np.geomspace(1e-7, 3e-6, 12):
                Z = rng.standard_normal((6, 5))
                Z[1] = Z[0] + gap * rng.standard_normal(5)
                res = solve_vstep(Z, [1, -1, 1, -1, 1, -1], solver="ldp", fallback=False)
                if res.status == INFEASIBLE:
                    continue
                if res.status == FAILED:
                    # below what float64 resolves on some CPUs (seed 8, gap 4.7e-7 here), or
                    # within the rounding of K (gap ~1e-7): an honest failure, with no point,
                    # rather than a wrong one
                    assert res.v is None
                    assert "does not separate the samples" in res.message or (
                        "cannot tell" in res.message and res.norm_bound > 1e6
                    )
                    continue
                assert np.isfinite(res.alpha).all() and np.isfinite(res.norm)
                assert res.min_margin == pytest.approx(1.0, rel=1e-12)


def test_ldp_dual_identity_on_a_well_posed_problem():
    rng = np.random.default_rng(3)
    G = rng.standard_normal((8, 5)) + 2.0  # a common direction: feasible, ||w|| of order 1
    u, alpha = vstep._ldp(G)
    np.testing.assert_allclose(alpha, u / (1.0 - u.sum()), rtol=1e-10)
    w = G.T @ alpha
    assert (G @ w).min() == pytest.approx(1.0, rel=1e-10)


def test_engine_failures_are_info_unless_no_engine_succeeds(monkeypatch, caplog):
    monkeypatch.setitem(vstep._ENGINES, "ecos", _raise_solver_error)
    with caplog.at_level(logging.INFO, logger="margin_solver"):
        assert solve_vstep(HAND_Z, HAND_Y, "ecos").status == "optimal"
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="margin_solver"):
        assert solve_vstep(HAND_Z, HAND_Y, "ecos", fallback=False).status == "failed"
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.WARNING]


# --- the v-step from a guessed support (the min-norm descent's inner loop) -------------------


@pytest.mark.parametrize("n, d, seed", [(5, 40, 0), (30, 200, 1), (40, 30, 2), (60, 400, 3)])
def test_solve_on_the_true_support_equals_the_full_solve(n, d, seed):
    Z, y = gaussian_instance(n, d, seed) if d >= n else planted_instance(n, d, seed)
    K = Z @ Z.T
    full = solve_vstep(None, y, solver="ldp", K=K)
    warm = vstep.solve_vstep_on_support(K, y, full.alpha > 0)
    assert warm is not None and warm.status == "optimal" and warm.solver == "support"
    assert warm.refined and warm.gap <= 1e-9
    np.testing.assert_allclose(warm.alpha, full.alpha, rtol=1e-8, atol=1e-10 * full.alpha.max())
    assert warm.norm == pytest.approx(full.norm, rel=1e-10)
    assert warm.min_margin == pytest.approx(1.0, abs=1e-12)


def test_solve_on_a_wrong_support_is_corrected_or_left_to_the_full_solve():
    # HAND: the optimum has support {0, 1}; sample 2 has margin 2.
    K = HAND_Z @ HAND_Z.T
    exact = np.array([1.0, 0.25, 0.0])
    # {0} gives v = (1, 0), whose margin on sample 1 is 0 < 1: the active set adds sample 1.
    only_first = np.array([True, False, False])
    np.testing.assert_allclose(vstep.solve_vstep_on_support(K, HAND_Y, only_first).alpha, exact)
    assert vstep._kkt_on_support(K, HAND_Y, only_first, max_solves=1) is None  # guess alone
    np.testing.assert_allclose(vstep._kkt_on_support(K, HAND_Y, only_first, 2), exact)
    # {0, 1, 2}: z_3 = 2 z_1, so Q_SS is singular: left to the full solve.
    assert vstep.solve_vstep_on_support(K, HAND_Y, np.ones(3, dtype=bool)) is None
    # from no guess at all the active set builds the support (from alpha = 0)
    nothing = np.zeros(3, dtype=bool)
    np.testing.assert_allclose(vstep.solve_vstep_on_support(K, HAND_Y, nothing).alpha, exact)
    right = vstep.solve_vstep_on_support(K, HAND_Y, np.array([True, True, False]))
    np.testing.assert_allclose(right.alpha, exact, rtol=1e-12)


@settings(max_examples=60, deadline=None, derandomize=True)  # as above: no flaky tolerance
@given(seed=st.integers(0, 2**32 - 1), wrong=st.floats(0.0, 0.5))
def test_active_set_from_any_guess_reaches_the_ldp_optimum(seed, wrong):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    Z = rng.standard_normal((n, int(rng.integers(n, 3 * n + 2)))) + 2 * rng.random() * (
        rng.standard_normal()
    )
    y = rng.choice([-1.0, 1.0], size=n)
    K = Z @ Z.T
    ldp = solve_vstep(None, y, solver="ldp", K=K)
    guess = (ldp.alpha > 0) ^ (rng.random(n) < wrong)
    alpha = vstep._kkt_on_support(K, y, guess, max_solves=10 * n)
    assert alpha is not None
    np.testing.assert_allclose(alpha, ldp.alpha, rtol=1e-7, atol=1e-10 * ldp.alpha.max())
    warm = vstep.solve_vstep_on_support(K, y, guess)
    assert warm is None or warm.norm == pytest.approx(ldp.norm, rel=1e-10)


def test_solve_on_support_of_infeasible_data_returns_none():
    # Equal features with opposite labels: Q_SS is singular, no KKT point exists.
    Z = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]])
    y = np.array([1.0, -1.0, 1.0])
    assert vstep.solve_vstep_on_support(Z @ Z.T, y, np.ones(3, dtype=bool)) is None
    assert solve_vstep(Z, y, solver="ldp").status == INFEASIBLE


def test_ldp_factors_well_conditioned_gram_by_cholesky_and_singular_by_eigh():
    Z, y = gaussian_instance(20, 60, 4)
    assert vstep._VStepData(Z, y, None).cholesky_G is not None
    Z, y = planted_instance(20, 5, 4)  # rank 5 < n
    assert vstep._VStepData(Z, y, None).cholesky_G is None
    assert solve_vstep(Z, y, solver="ldp").status == "optimal"


@pytest.mark.parametrize("n, d, seed", [(10, 40, 0), (50, 60, 1), (80, 2000, 2)])
def test_ldp_on_cholesky_factor_equals_ldp_on_eigen_factor(monkeypatch, n, d, seed):
    Z, y = gaussian_instance(n, d, seed)
    chol = solve_vstep(Z, y, solver="ldp", fallback=False)
    monkeypatch.setattr(vstep._VStepData, "cholesky_G", property(lambda self: None))
    eig = solve_vstep(Z, y, solver="ldp", fallback=False)
    for res in (chol, eig):
        assert_kkt(res, Z, y)
    assert chol.norm == pytest.approx(eig.norm, rel=1e-12)
    np.testing.assert_allclose(chol.alpha, eig.alpha, rtol=1e-9, atol=1e-12 * eig.alpha.max())


def test_cvxpy_is_imported_only_when_a_conic_engine_runs():
    code = (
        "import sys, numpy as np; import margin_solver as ms; "
        "from margin_solver.core.data import PaperDistribution; "
        "ds = PaperDistribution(d=60, T=2, snr=0.5).sample(8, seed=0); "
        "r = ms.solve_min_norm(ds, R=5.0, certify=True); "
        "print('cvxpy' in sys.modules, r.status); "
        "ms.solve_vstep(np.eye(3), [1, -1, 1], solver='ecos'); print('cvxpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "optimal", "True"]


@pytest.mark.parametrize("seed", range(3))
def test_trusted_vstep_gives_the_validated_answer_bit_for_bit(seed):
    # the inner loops skip validation: on a Gram matrix the validated door accepts, the
    # trusted worker must return exactly what the door returns (and infeasibility alike)
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((12, 5 + 10 * seed))
    K = Z @ Z.T
    y = np.where(rng.random(12) < 0.5, -1.0, 1.0)
    door = solve_vstep(None, y, "ldp", K=K)
    trusted = vstep.solve_trusted_vstep(K, y)
    assert door.status == trusted.status
    assert door.infeasible_samples == trusted.infeasible_samples
    if door.coef is not None:
        assert np.array_equal(door.coef, trusted.coef) and np.array_equal(door.alpha, trusted.alpha)
        assert door.norm == trusted.norm
