"""The P_R solver: feasibility of its answer, the certificate, both forms, starts, errors."""

import json
import math

import numpy as np
import pytest

from margin_solver.analysis.metrics import evaluate
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.kernel import TokenGram, margins
from margin_solver.core.validation import InvalidInputError
from margin_solver.descent.alternating import (
    DenseForm,
    KernelForm,
    evaluate_phi,
    gradient_coefficients,
)
from margin_solver.minnorm.solve import solve_min_norm

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")


def paper(n, kappa, d, T=2, seed=0, n_test=None):
    dist = PaperDistribution(d=d, T=T, snr=math.sqrt(kappa / n), eta=0.15)
    if n_test is None:
        return dist.sample(n, seed=seed)
    return dist.sample_train_test(n, n_test, seed=seed)


@pytest.mark.parametrize("kappa", [4.0, 0.1])
@pytest.mark.parametrize("R_scale", [1.0, 30.0, 1000.0])
def test_answer_is_feasible(kappa, R_scale):
    ds = paper(16, kappa, d=150, seed=1)
    R = R_scale / math.sqrt(ds.d)
    res = solve_min_norm(ds, R=R)
    assert res.status == "local_optimal" and not res.certified
    m = margins(ds.X, ds.y.astype(float), res.v, res.p)
    assert m.min() >= 1 - 1e-7
    assert res.min_margin == pytest.approx(m.min(), rel=1e-12)
    assert np.linalg.norm(res.p) <= R * (1 + 1e-12)
    assert np.linalg.norm(res.v) == pytest.approx(res.norm, rel=1e-9)
    assert res.normalized_margin == pytest.approx(res.min_margin / res.norm)
    assert res.attention.shape == (16, 2)
    assert np.array_equal(res.selected_token, np.argmax(ds.X @ res.p, axis=1))
    assert len(res.history["norm"]) == len(res.history["pg_norm"]) == res.nit + 1
    assert res.history["norm"][-1] == pytest.approx(res.norm)
    assert np.all(np.diff(res.history["norm"]) <= 1e-12)  # accepted steps only decrease phi
    assert res.norm == pytest.approx(min(res.start_norms.values()), rel=1e-12)
    assert res.norm == np.linalg.norm(res.v)
    assert res.lower_bound is None and math.isnan(res.gap)


@pytest.mark.parametrize("kappa", [4.0, 0.1])
def test_large_R_reaches_the_certified_bound(kappa):
    ds = paper(12, kappa, d=300, seed=2)
    res = solve_min_norm(ds, R=1000 / math.sqrt(ds.d), certify=True)
    assert res.bound.status == "optimal"
    assert res.lower_bound == res.bound.value
    assert -1e-9 <= res.gap <= 1e-3  # a norm equal to the bound can round below it
    assert res.gap == pytest.approx((res.norm - res.lower_bound) / res.norm)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_never_below_the_bound(seed, counted_bound):
    rng = np.random.default_rng(seed)
    kappa = float(rng.choice([0.1, 1.0, 4.0]))
    ds = paper(10, kappa, d=int(rng.integers(20, 200)), T=int(rng.integers(2, 4)), seed=seed)
    for R_scale in (0.3, 3.0, 30.0):
        # the first starts only: on these instances the search ends at the same norms
        res = solve_min_norm(
            ds, R=R_scale / math.sqrt(ds.d), certify=True, n_random_starts=1, search_starts=0
        )
        assert res.norm >= res.lower_bound * (1 - 1e-9)


@pytest.mark.parametrize("R_scale", [1.0, 10.0, 100.0])
def test_kernel_and_dense_forms_agree(R_scale):
    ds = paper(10, 1.0, d=40, seed=5)  # d > nT: auto would pick kernel
    R = R_scale / math.sqrt(ds.d)
    kernel = solve_min_norm(ds, R=R, form="kernel")
    dense = solve_min_norm(ds, R=R, form="dense")
    assert kernel.form == "kernel" and dense.form == "dense"
    assert dense.norm == pytest.approx(kernel.norm, rel=1e-8)
    assert dense.start == kernel.start
    np.testing.assert_allclose(dense.p, kernel.p, rtol=1e-6, atol=1e-9 * R)


def test_kernel_identities_at_a_fixed_p():
    ds = paper(8, 1.0, d=30, T=3, seed=6)
    y = ds.y.astype(float)
    dense, kernel = DenseForm(ds.X), KernelForm(ds.X, TokenGram(ds.X))
    c = np.random.default_rng(0).standard_normal((8, 3)) * 0.05
    pd = evaluate_phi(dense, y, dense.from_coefficients(c))
    pk = evaluate_phi(kernel, y, c)
    assert pk.phi == pytest.approx(pd.phi, rel=1e-10)
    gd = dense.from_coefficients(gradient_coefficients(dense, pd))
    gk = TokenGram.materialize(ds.X, gradient_coefficients(kernel, pk))
    np.testing.assert_allclose(gk, gd, rtol=1e-8, atol=1e-12)


def test_gradient_matches_finite_differences():
    ds = paper(8, 1.0, d=12, seed=7)
    y = ds.y.astype(float)
    form = DenseForm(ds.X)
    p = np.random.default_rng(1).standard_normal(12) * 0.1
    point = evaluate_phi(form, y, p)
    grad = form.from_coefficients(gradient_coefficients(form, point))
    h = 1e-6
    for k in range(12):
        e = np.zeros(12)
        e[k] = h
        fd = (evaluate_phi(form, y, p + e).phi - evaluate_phi(form, y, p - e).phi) / (2 * h)
        assert fd == pytest.approx(grad[k], rel=1e-4, abs=1e-8)


def test_benign_and_harmful_regimes_end_to_end():
    benign_train, benign_test = paper(40, 4.0, d=2000, seed=2, n_test=500)
    harmful_train, harmful_test = paper(40, 0.1, d=2000, seed=2, n_test=500)
    R = 100 / math.sqrt(2000)
    benign = evaluate(*_vp(solve_min_norm(benign_train, R=R)), benign_test)
    harmful = evaluate(*_vp(solve_min_norm(harmful_train, R=R)), harmful_test)
    assert benign.error_clean < 0.05
    assert harmful.error_clean > 0.3
    assert benign.attn_signal_clean > 0.9
    assert harmful.attn_signal_clean < 0.6


def _vp(res):
    return res.v, res.p


def test_arrays_and_dataset_give_the_same_answer():
    ds = paper(8, 1.0, d=30, seed=8)
    a = solve_min_norm(ds.X, ds.y, 0.5)
    b = solve_min_norm(ds, R=0.5)
    assert a.norm == b.norm


def test_random_starts_are_seeded():
    ds = paper(8, 1.0, d=30, seed=9)
    a = solve_min_norm(ds, R=0.5, n_random_starts=3, seed=4)
    b = solve_min_norm(ds, R=0.5, n_random_starts=3, seed=4)
    assert a.start_norms == b.start_norms
    assert {"zero", "first_step", "random_0", "random_1", "random_2"} <= set(a.start_norms)


def test_infeasible_data_is_a_status():
    X = np.array([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]])
    for certify in (False, True):
        res = solve_min_norm(X, [1, -1, 1], 1.0, certify=certify)
        assert res.status == "infeasible"
        assert not res.success
        assert res.v is None and res.norm == math.inf
        assert "infeasible" in res.message
        json.loads(res.to_json())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"R": 0.0}, "R must be a positive finite number"),
        ({"R": -1.0}, "R must be a positive finite number"),
        ({"R": float("nan")}, "R must be a positive finite number"),
        ({"R": float("inf")}, "R must be a positive finite number"),
        ({"R": None}, "R .* is required"),
        ({"R": 1.0, "form": "sparse"}, "Unknown form 'sparse'"),
        ({"R": 1.0, "n_random_starts": -1}, "n_random_starts must be an integer >= 0"),
        ({"R": 1.0, "max_iter": 0}, "max_iter must be an integer >= 1"),
    ],
)
def test_bad_options(kwargs, match):
    ds = paper(4, 1.0, d=10)
    with pytest.raises(InvalidInputError, match=match):
        solve_min_norm(ds, **kwargs)


def test_bad_shapes():
    with pytest.raises(InvalidInputError, match=r"Expected X of shape \(n_samples, n_tokens"):
        solve_min_norm(np.ones((4, 5)), [1, -1, 1, -1], 1.0)
    with pytest.raises(InvalidInputError, match="y has 3 labels but X has 4 samples"):
        solve_min_norm(np.ones((4, 2, 5)), [1, -1, 1], 1.0)
    with pytest.raises(InvalidInputError, match="y is required"):
        solve_min_norm(np.ones((4, 2, 5)), R=1.0)
    ds = Dataset(np.ones((2, 2, 3)), [1, -1])
    with pytest.raises(InvalidInputError, match="not a Dataset and y"):
        solve_min_norm(ds, ds.y, 1.0)


def test_digits_instance_converges_within_the_cap_and_beats_plain_gradient_steps():
    # Lifted digit patches are strongly correlated (token Gram condition number ~1e6), so
    # phi is ill-conditioned: the plain projected-gradient schedule (memory=0, use_bb=False,
    # the method before the quasi-Newton direction) zigzags and hits max_iter=500 here.
    from margin_solver.bench.realdata import digits_train_test
    from margin_solver.bounds.lower import first_step_margins
    from margin_solver.descent.alternating import descend
    from margin_solver.gd.endpoints import token_scale
    from margin_solver.svm.selection import attention_svm, hard_selection_alternation

    train, _ = digits_train_test(20, 0.1, 0, 1000, lift=256, lift_seed=0)
    R = 100 / math.sqrt(token_scale(train.X))
    res = solve_min_norm(train, R=R, n_random_starts=0)
    assert res.status == "local_optimal" and res.nit < 500
    assert res.min_margin >= 1 - 1e-7 and res.p_norm <= R * (1 + 1e-9)

    X, y, T = train.X, train.y.astype(float), train.T
    gram = TokenGram(X)
    form = KernelForm(X, gram)
    hard = hard_selection_alternation(gram.H, y, T, first_step_margins(gram.H, y, T))
    p0 = form.from_coefficients(attention_svm(gram.H, T, hard.tokens, R))
    plain = descend(form, y, p0, R, memory=0, use_bb=False, sqp=False)
    quasi = descend(form, y, p0, R, sqp=False)
    assert plain.status == "max_iter" and quasi.status == "local_optimal"
    assert quasi.norm <= plain.norm


@pytest.mark.parametrize("kappa, R_scale", [(4.0, 10.0), (0.1, 1.0), (1.0, 100.0)])
def test_support_warm_starts_do_not_change_the_descent(monkeypatch, kappa, R_scale):
    from margin_solver.descent import alternating
    from margin_solver.svm import vstep

    ds = paper(20, kappa, d=500, T=3, seed=7)
    y, R = ds.y.astype(float), R_scale / math.sqrt(ds.d)
    form = KernelForm(ds.X, TokenGram(ds.X))
    warm = alternating.descend(form, y, form.zeros(), R)
    assert warm.n_on_support > 0.5 * warm.n_eval  # the point of the warm start
    monkeypatch.setattr(vstep, "solve_vstep_on_support", lambda *args, **kwargs: None)
    cold = alternating.descend(form, y, form.zeros(), R)
    assert cold.n_on_support == 0
    assert (warm.n_iter, warm.n_eval, warm.status) == (cold.n_iter, cold.n_eval, cold.status)
    np.testing.assert_allclose(warm.norm_history, cold.norm_history, rtol=1e-9)
    np.testing.assert_allclose(
        warm.point.vstep.alpha,
        cold.point.vstep.alpha,
        rtol=1e-7,
        atol=1e-9 * cold.point.vstep.alpha.max(),
    )


def test_progress_bars_show_the_bound_and_the_starts_and_change_nothing(capsys):
    from margin_solver.bounds.lower import global_lower_bound

    ds = paper(14, 4.0, d=200, T=2, seed=3)
    quiet = solve_min_norm(ds, R=3.0, certify=True, bound_method="bnb")
    loud = solve_min_norm(ds, R=3.0, certify=True, bound_method="bnb", progress=True)
    err = capsys.readouterr().err
    # nearly hard at this R: the root heuristic certifies LB's selection, no start runs
    assert "lower bound (finite R)" in err and "P_R root heuristic" in err
    assert "P_R starts" not in err and f"best={loud.norm:.6g}" in err
    assert loud.norm == quiet.norm and loud.lower_bound == quiet.lower_bound
    plain = solve_min_norm(ds, R=3.0, progress=True)
    err = capsys.readouterr().err
    assert "P_R starts" in err and "5/5" in err and f"best={plain.norm:.6g}" in err
    small = paper(6, 4.0, d=50, T=2, seed=3)
    enum = global_lower_bound(small.X, small.y, method="enumerate", progress=True)
    assert "lower bound (enumeration)" in capsys.readouterr().err
    assert enum.value == global_lower_bound(small.X, small.y, method="enumerate").value


def test_options_choose_the_descent_variant_as_the_descend_keywords_do(monkeypatch):
    # options={"memory": 0, "use_bb": False} must run exactly the plain projected-gradient
    # descent that passing those keywords to descend runs (what benchmarks patched before)
    import margin_solver.minnorm.solve as minnorm
    from margin_solver.descent.alternating import descend

    ds = paper(12, 4.0, d=120, seed=3)
    # soft enough that the winner is descended: at R sqrt(d) = 30 it is nearly hard and
    # polished by linearised SVM steps (search.hard_polish), which have no such options
    R = 10 / math.sqrt(ds.d)
    # the first starts only: they descend as the search's starts do (the patch reaches both)
    plain = solve_min_norm(ds, R=R, search_starts=0, options={"memory": 0, "use_bb": False})
    default = solve_min_norm(ds, R=R, search_starts=0)
    monkeypatch.setattr(
        minnorm, "descend", lambda *a, **k: descend(*a, **{**k, "memory": 0, "use_bb": False})
    )
    import margin_solver.minnorm.search  # the search's starts descend too (issue 19)

    monkeypatch.setattr(margin_solver.minnorm.search, "descend", minnorm.descend)
    patched = solve_min_norm(ds, R=R, search_starts=0)
    assert plain.norm == patched.norm and plain.history == patched.history
    assert plain.history != default.history  # the option does change the descent


@pytest.mark.parametrize(
    "options, match",
    [
        ({"memroy": 0}, r"Unknown options key\(s\) \['memroy'\]"),
        ({"memory": -1}, r"options\['memory'\] must be an integer >= 0"),
        ({"use_bb": 1}, r"options\['use_bb'\] must be True or False"),
        ({"window": 0}, r"options\['window'\] must be an integer >= 1"),
        ({"vstep_solver": "primal"}, r"options\['vstep_solver'\] must be one of"),
        ([("memory", 0)], "options must be a mapping"),
    ],
)
def test_bad_options_are_refused_at_the_door(options, match):
    ds = paper(6, 4.0, d=30)
    with pytest.raises(InvalidInputError, match=match):
        solve_min_norm(ds, R=1.0, options=options)
