"""Hardening (issue 7): every public entry point, fed malformed or extreme input, raises an
InvalidInputError whose message names the problem, or returns an answer verified here; never a
traceback from numpy, scipy or cvxpy, never a silent NaN. Table-driven: bad inputs x entry
points, edge cases x verifiers, scales x homogeneity laws, plus the solver fallbacks of
solve_min_norm."""

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

from margin_solver import (
    Dataset,
    InvalidInputError,
    PaperDistribution,
    SingleHeadAttentionClassifier,
    check_conditions,
    compare,
    evaluate,
    global_lower_bound,
    gradient_descent,
    load_dataset,
    solve_min_norm,
    solve_vstep,
)
from margin_solver.core.kernel import margins, outputs
from margin_solver.core.results import INFEASIBLE, OPTIMAL_INACCURATE
from margin_solver.descent.alternating import DenseForm, evaluate_phi, gradient_coefficients
from margin_solver.svm import vstep as vstep_module
from margin_solver.theory import Constants

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")

BASE = PaperDistribution(d=6, T=2, snr=0.8, eta=0.0).sample(6, seed=0)
X0, Y0 = BASE.X, BASE.y
FITTED = SingleHeadAttentionClassifier().fit(X0, Y0)


def _features(X):
    """The last token of each sample as v-step features: (n, T, d) -> (n, d), and a malformed
    X stays malformed (2-D -> 1-D, NaN in the last token kept, ...)."""
    try:
        return np.asarray(X)[:, -1]
    except (IndexError, ValueError):  # None, ragged, T = 0: hand over as is
        return X


def _load_raw(tmp_path, X, y):
    path = tmp_path / "raw.npz"
    np.savez(path, X=np.asarray(X, dtype=object) if _ragged(X) else X, y=y)
    return load_dataset(path)


def _ragged(X):
    try:
        np.asarray(X)
    except ValueError:
        return True
    return False


# --- 1. malformed input x every entry point: InvalidInputError naming the problem ---------

# name -> (part changed, make(X, y) -> (X, y), pattern the message must contain)
BAD_INPUTS = {
    "X 2-D": ("X", lambda X, y: (X[:, 0], y), r"shape"),
    "X 4-D": ("X", lambda X, y: (X[..., None], y), r"shape"),
    "X ragged": ("X", lambda X, y: ([[[1.0]], [[1.0, 2.0]]], y[:2]), r"numeric|[Oo]bject"),
    "X NaN": ("X", lambda X, y: (np.where(X[1, 1, 3] == X, np.nan, X), y), r"NaN"),
    "X inf": ("X", lambda X, y: (np.where(X[1, 1, 3] == X, -np.inf, X), y), r"inf"),
    "X no samples": ("X", lambda X, y: (X[:0], y[:0]), r"no samples|empty|at least"),
    "X no tokens": ("X", lambda X, y: (X[:, :0], y), r"T >= 1|empty|shape"),
    "X no features": ("X", lambda X, y: (X[:, :, :0], y), r"feature|empty"),
    "X strings": ("X", lambda X, y: (X.astype(str), y), r"numeric"),
    "X complex": ("X", lambda X, y: (X + 1j, y), r"numeric"),
    "X objects": ("X", lambda X, y: (X.astype(object), y), r"numeric|[Oo]bject"),
    "X None": ("X", lambda X, y: (None, y), r"numeric|[Oo]bject|Give the features"),
    # any two labels are taken (tests/test_any_labels.py); three are refused, naming them
    "y three labels": (
        "y",
        lambda X, y: (X, np.where(np.arange(len(y)) == 0, 2, y)),
        r"two labels \(any two distinct values\), got 3|binary",
    ),
    "y NaN": ("y", lambda X, y: (X, np.where(np.arange(len(y)) == 2, np.nan, y)), r"NaN"),
    "y too short": ("y", lambda X, y: (X, y[:-1]), r"labels but X has"),
    "y 2-D": ("y", lambda X, y: (X, np.stack([y, y], axis=1)), r"shape"),
    "y one string": ("y", lambda X, y: (X, np.array(["yes"] * len(y))), r"one label only|class"),
}

# Scales float64 products cannot carry: refused by the solvers (a Dataset keeps any finite
# scale, for the scale-free condition checker).
OUT_OF_RANGE = {
    "X * 1e200": ("X", lambda X, y: (X * 1e200, y), r"largest \|entry\|"),
    "X * 1e-200": ("X", lambda X, y: (X * 1e-200, y), r"largest \|entry\|"),
}

# name -> (parts it reads, call(X, y, tmp_path))
DATA_ENTRY_POINTS = {
    "Dataset": ("Xy", lambda X, y, tmp: Dataset(X, y)),
    "load_dataset": ("Xy", lambda X, y, tmp: _load_raw(tmp, X, y)),
    "solve_vstep": ("Xy", lambda X, y, tmp: solve_vstep(_features(X), y)),
    "solve_min_norm": ("Xy", lambda X, y, tmp: solve_min_norm(X, y, R=1.0)),
    "global_lower_bound": ("Xy", lambda X, y, tmp: global_lower_bound(X, y)),
    "gradient_descent": ("Xy", lambda X, y, tmp: gradient_descent(X, y)),
    "classifier.fit": ("Xy", lambda X, y, tmp: SingleHeadAttentionClassifier().fit(X, y)),
    "classifier.fit gd": (
        "Xy",
        lambda X, y, tmp: SingleHeadAttentionClassifier(method="gd").fit(X, y),
    ),
    "classifier.score": ("Xy", lambda X, y, tmp: FITTED.score(X, y)),
    "classifier.predict": ("X", lambda X, y, tmp: FITTED.predict(X)),
    "classifier.decision_function": ("X", lambda X, y, tmp: FITTED.decision_function(X)),
}
SOLVERS = (
    "solve_vstep",
    "solve_min_norm",
    "global_lower_bound",
    "gradient_descent",
    "classifier.fit",
)


# The scikit-learn classifier takes any two labels and reads 2-D X as rows of tokens (issue 16).
_CLASSIFIER_ACCEPTS = {
    "X 2-D": ("classifier.fit", "classifier.fit gd"),
    **dict.fromkeys(
        ("y one string", "y three labels"),
        ("classifier.score",),
    ),
}


def _cases(table, entry_points):
    return [
        pytest.param(case, entry, id=f"{case}-{entry}")
        for case, (part, _, _) in table.items()
        for entry in entry_points
        if part in DATA_ENTRY_POINTS[entry][0] and entry not in _CLASSIFIER_ACCEPTS.get(case, ())
    ]


# refused before any numpy cast warns (NaN labels warned inside scikit-learn's target check
# on their way to its error: issue 43)
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize(
    ("case", "entry"),
    _cases(BAD_INPUTS, DATA_ENTRY_POINTS) + _cases(OUT_OF_RANGE, SOLVERS),
)
def test_bad_input_is_an_invalid_input_error_naming_the_problem(case, entry, tmp_path):
    _, make, pattern = {**BAD_INPUTS, **OUT_OF_RANGE}[case]
    X, y = make(X0, Y0)
    with pytest.raises(InvalidInputError, match=pattern):
        DATA_ENTRY_POINTS[entry][1](X, y, tmp_path)


BAD_VECTORS = {
    "too short": (np.ones(BASE.d - 1), r"shape"),
    "2-D": (np.ones((BASE.d, 1)), r"shape"),
    "NaN": (np.r_[np.nan, np.ones(BASE.d - 1)], r"NaN"),
    "inf": (np.r_[np.ones(BASE.d - 1), np.inf], r"inf"),
    "strings": (np.array(["1"] * BASE.d), r"numeric|flat list"),
    "None": (None, r"numeric|missing|no dense"),
    "huge": (np.full(BASE.d, 1e200), r"largest \|entry\|"),
}
GOOD = np.ones(BASE.d)
MODEL_ENTRY_POINTS = {
    "evaluate v": lambda bad: evaluate(bad, GOOD, BASE),
    "evaluate p": lambda bad: evaluate(GOOD, bad, BASE),
    "compare": lambda bad: compare(SimpleNamespace(v=GOOD, p=bad), FITTED, BASE),
    "check_conditions": lambda bad: check_conditions(BASE, solution={"v": bad, "p": GOOD}),
}


@pytest.mark.parametrize("entry", MODEL_ENTRY_POINTS)
@pytest.mark.parametrize("case", BAD_VECTORS)
def test_bad_model_vectors_are_refused(case, entry):
    bad, pattern = BAD_VECTORS[case]
    with pytest.raises(InvalidInputError, match=pattern):
        MODEL_ENTRY_POINTS[entry](bad)


@pytest.mark.parametrize(
    "call",
    [
        lambda: evaluate(GOOD, GOOD, X0),
        lambda: compare(FITTED, FITTED, X0),
        lambda: compare(FITTED, FITTED, BASE, test=X0),
        lambda: check_conditions(X0),
        lambda: check_conditions(BASE, test=Y0),
        lambda: gradient_descent(BASE, test=X0),
    ],
    ids=["evaluate", "compare train", "compare test", "check_conditions", "check test", "gd test"],
)
def test_arrays_where_a_dataset_is_expected_are_refused(call):
    with pytest.raises(InvalidInputError, match="Dataset"):
        call()


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: PaperDistribution(d=0, snr=1.0), r"d must be an integer >= 1"),
        (lambda: PaperDistribution(d=2.5, snr=1.0), r"d must be an integer"),
        (lambda: PaperDistribution(d=5, T=0, snr=1.0), r"T must be an integer >= 1"),
        (lambda: PaperDistribution(d=5), r"exactly one of rho and snr"),
        (lambda: PaperDistribution(d=5, snr=math.nan), r"snr must be a finite number"),
        (lambda: PaperDistribution(d=5, snr="high"), r"snr must be a number"),
        (lambda: PaperDistribution(d=5, rho=-1.0), r"rho must be a finite number >= 0"),
        (lambda: PaperDistribution(d=5, snr=1.0, eta=0.5), r"eta must lie in \[0, 0.5\)"),
        (lambda: PaperDistribution(d=5, snr=1.0, eta="some"), r"eta must be a number"),
        (lambda: PaperDistribution(d=5, snr=1.0, sigma=0.0), r"sigma must be a positive"),
        (lambda: PaperDistribution(d=1, snr=1.0), r"needs d >= 2"),
        # issue 11
        (lambda: PaperDistribution(d=1, snr=1.0, signal="random"), r"'random' needs d >= 2"),
        (lambda: PaperDistribution(d=5, snr=1e300), r"signal norm rho = 2.24e\+300 exceeds"),
        (lambda: solve_min_norm(BASE, R=1e300), r"R = 1e\+300 is outside"),
        (lambda: solve_min_norm(BASE, R=1e154), r"R = 1e\+154 is outside"),
        (lambda: solve_min_norm(BASE, R=1e-200), r"R = 1e-200 is outside"),
        (lambda: gradient_descent(BASE, R=1e300), r"R = 1e\+300 is outside"),
        (lambda: Constants(seed=-1), r"Constants.seed must be"),
        (lambda: PaperDistribution(d=5, snr=1.0).sample(0), r"n must be an integer >= 1"),
        (lambda: PaperDistribution(d=5, snr=1.0).sample(4, seed="x"), r"seed must be"),
        (lambda: PaperDistribution(d=5, snr=1.0).sample_train_test(4, 4, seed=-1), r"seed must be"),
        (lambda: Dataset(X0, Y0, params=[("snr", 1.0)]), r"params must be a dict"),
        (lambda: Dataset(X0, Y0, signal_index=np.full(6, 2)), r"signal_index must lie in \[0, T\)"),
        (lambda: solve_min_norm(BASE, R=None), r"R .* is required"),
        (lambda: solve_min_norm(BASE, R=math.inf), r"R must be a positive finite"),
        (lambda: solve_min_norm(BASE, R=1.0, seed="x"), r"seed must be"),
        (lambda: solve_min_norm(BASE, Y0, R=1.0), r"either a Dataset or"),
        (lambda: solve_min_norm(BASE, R=1.0, p0=np.ones(2)), r"Expected p0 of shape"),
        (lambda: solve_min_norm(BASE, R=1.0, p0=[math.inf] * BASE.d), r"p0 contains"),
        (lambda: solve_min_norm(BASE, R=1.0, p0="abc"), r"p0"),
        (lambda: solve_min_norm(BASE, R=1.0, gap_tol=-1e-3), r"gap_tol must be a positive"),
        (lambda: solve_min_norm(BASE, R=1.0, gap_tol=math.nan), r"gap_tol must be a positive"),
        (lambda: solve_min_norm(BASE, R=1.0, time_limit=0), r"time_limit must be a positive"),
        (lambda: solve_min_norm(BASE, R=1.0, time_limit=-math.inf), r"time_limit must be"),
        (lambda: global_lower_bound(X0, Y0, time_limit=0), r"time_limit must be a positive"),
        (lambda: solve_vstep(None, Y0, K=np.eye(6) - 0.5), r"positive semidefinite"),
        (lambda: solve_vstep(None, Y0, K=np.ones((6, 5))), r"Expected K of shape \(6, 6\)"),
        (lambda: gradient_descent(BASE, init="random", seed=1.5), r"seed must be"),
        (lambda: gradient_descent(BASE, weight_decay=math.nan), r"weight_decay must be"),
        (
            lambda: SingleHeadAttentionClassifier(solver_options={"steps": 3}).fit(X0, Y0),
            r"solver_options \['steps'\] are not options of solve_min_norm",
        ),
        (
            lambda: SingleHeadAttentionClassifier().fit(np.zeros((4, 2, 3)), [1, -1, 1, -1]),
            r"All tokens are zero",
        ),
    ],
)
def test_bad_parameters_are_refused(call, pattern):
    with pytest.raises(InvalidInputError, match=pattern):
        call()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"d": 1, "T": 1, "snr": 1.0, "signal": "antipodal"},
        {"d": 2, "T": 1, "rho": 0.0},
        {"d": 3, "T": 4, "snr": 0.0, "eta": 0.0, "signal_position": "random"},
        {"d": 4, "T": 2, "snr": 1e8, "noise": "isotropic", "signal": "random"},
    ],
    ids=["d=T=1", "rho=0", "snr=0", "snr=1e8"],
)
def test_distribution_extremes_sample_valid_datasets(kwargs):
    dist = PaperDistribution(**kwargs)
    train, test = dist.sample_train_test(5, 3, seed=0)
    for ds in (train, test):
        assert np.all(np.isfinite(ds.X)) and set(ds.y.tolist()) <= {-1, 1}
        mu = dist.signal_vectors()[(ds.clean_y < 0).astype(int)]
        np.testing.assert_array_equal(ds.X[np.arange(ds.n), ds.signal_index], mu)
    assert train.snr == pytest.approx(dist.signal_to_noise)


def test_saving_params_json_cannot_encode_is_an_input_error(tmp_path):
    with pytest.raises(InvalidInputError, match="Cannot save params as JSON"):
        Dataset(X0, Y0, params={"when": object()}).save(tmp_path / "d.npz")
    assert not list(tmp_path.iterdir())  # nothing half-written left behind


# --- 1. edge cases that have an answer: verify it ------------------------------------------


def _edge_data():
    rng = np.random.default_rng(5)
    d1 = np.abs(rng.standard_normal((6, 2, 1))) + 0.1
    y_d1 = np.array([1, -1, 1, -1, -1, 1])
    return {
        "one class": (X0, np.ones(6, dtype=int)),
        "conflicting duplicates": (np.concatenate([X0, X0[:2]]), np.r_[Y0, -Y0[:2]]),
        "T=1": (X0[:, :1], Y0),
        "d=1": (d1 * y_d1[:, None, None], y_d1),  # every token carries its label's sign
        "all-zero tokens": (np.zeros((4, 2, 3)), np.array([1, -1, 1, -1])),
        "X * 1e-8": (X0 * 1e-8, Y0),
        "X * 1e8": (X0 * 1e8, Y0),
    }


EDGE = _edge_data()
NOT_INTERPOLABLE = {"conflicting duplicates", "all-zero tokens"}


def _radius(X):
    peak = np.max(np.abs(X))
    return 3.0 / peak if peak > 0 else 1.0


def _nan_fields(result):
    """Paths of NaN values anywhere in ``result.to_dict()``."""
    found = []

    def walk(x, path):
        if isinstance(x, float) and math.isnan(x):
            found.append(path)
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")

    walk(result.to_dict(), "")
    return found


def verify_vstep(X, y, case):
    Z = X.mean(axis=1)
    res = solve_vstep(Z, y)
    if case in NOT_INTERPOLABLE:
        assert res.status == INFEASIBLE and res.infeasible_samples and res.v is None
        assert "infeasible" in res.message
        return
    assert res.status == "optimal" and not _nan_fields(res)
    assert np.min(y * (Z @ res.v)) >= 1 - 1e-9
    assert res.norm == pytest.approx(solve_vstep(Z, y, "ldp").norm, rel=1e-7)


def verify_min_norm(X, y, case):
    R = _radius(X)
    res = solve_min_norm(X, y, R=R, certify=True)
    if case in NOT_INTERPOLABLE:
        assert res.status == INFEASIBLE and res.v is None and "infeasible" in res.message
        return
    # optimal only when the bound proves the point within gap_tol (small R: often not)
    assert res.status == ("optimal" if res.gap <= res.gap_tol else "local_optimal")
    assert res.certified == (res.status == "optimal") and not _nan_fields(res)
    assert margins(X, y.astype(float), res.v, res.p).min() >= 1 - 1e-7
    assert np.linalg.norm(res.p) <= R * (1 + 1e-12)
    assert res.norm >= res.lower_bound * (1 - 1e-9)
    assert res.vstep_fallbacks == 0  # no spurious fallback on ordinary data


def verify_lower_bound(X, y, case):
    res = global_lower_bound(X, y)
    if case == "all-zero tokens":
        assert res.status == INFEASIBLE and res.value == math.inf
        return
    # A relaxation: duplicates may pick different tokens, so LB stays finite for them.
    assert res.status == "optimal" and 0 < res.value <= res.incumbent * (1 + 1e-12)
    chosen = X[np.arange(len(y)), res.selection]
    assert solve_vstep(chosen, y, "ldp").norm == pytest.approx(res.incumbent, rel=1e-7)


def verify_gradient_descent(X, y, case):
    if case == "all-zero tokens":
        with pytest.raises(InvalidInputError, match="All tokens are zero"):
            gradient_descent(X, y)
        return
    res = gradient_descent(X, y)
    assert np.all(np.isfinite(res.v)) and np.all(np.isfinite(res.p)) and math.isfinite(res.loss)
    assert not _nan_fields(res)
    assert res.min_margin == pytest.approx(
        margins(X, y.astype(float), res.v, res.p).min(), rel=1e-9
    )
    if case in NOT_INTERPOLABLE:
        assert not res.interpolates
    assert res.trajectory["loss"][-1] <= res.trajectory["loss"][0]  # default steps never raise it
    assert res.success == res.interpolates  # two steps that leave errors say so (not_fitted)


def verify_classifier(X, y, case):
    clf = SingleHeadAttentionClassifier()
    if case == "all-zero tokens":
        with pytest.raises(InvalidInputError, match="All tokens are zero"):
            clf.fit(X, y)
        return
    if case == "one class":  # scikit-learn's rule for a classifier
        with pytest.raises(InvalidInputError, match="exactly 2 classes"):
            clf.fit(X, y)
        return
    if case in NOT_INTERPOLABLE:  # warns and keeps a gradient-descent fit (issue 16)
        with pytest.warns(SklearnConvergenceWarning, match="no interpolator"):
            clf.fit(X, y)
        assert np.all(np.isfinite(clf.decision_function(X)))
        return
    clf.fit(X, y)
    assert np.array_equal(clf.predict(X), y) and clf.score(X, y) == 1.0
    assert np.all(np.isfinite(clf.decision_function(X)))


def verify_check_conditions(X, y, case):
    ds = Dataset(X, y)
    report = check_conditions(ds, solution={"v": X.mean(axis=(0, 1)), "p": np.zeros(ds.d)}, test=ds)
    json.dumps(report.to_dict(), allow_nan=False)  # no NaN anywhere in the report
    if case in NOT_INTERPOLABLE:  # no (v, p) interpolates these, whatever the solution
        assert report.observed.interpolates is False


def verify_evaluate(X, y, case):
    ds = Dataset(X, y)
    v = (y[:, None] * X.mean(axis=1)).sum(axis=0)  # the first GD step's direction
    m = evaluate(v, v, ds)
    f = outputs(X, v, v)
    assert m.error == np.mean(np.sign(f) != y) and m.min_margin == pytest.approx(
        np.min(y * f), rel=1e-12
    )
    assert not _nan_fields(m)


def verify_compare(X, y, case):
    ds = Dataset(X, y)
    if case == "all-zero tokens":  # GD refuses; compare two hand-made models instead
        a = SimpleNamespace(v=np.ones(ds.d), p=np.zeros(ds.d))
    else:
        a = gradient_descent(ds)
    b = SimpleNamespace(v=np.zeros(ds.d), p=np.zeros(ds.d))  # the zero model
    c = compare(a, b, ds, ds)
    assert c.cos_v is None and c.b.interpolates is False and c.b.normalized_margin is None
    assert c.a.min_margin == pytest.approx(margins(X, y.astype(float), a.v, a.p).min(), rel=1e-9)
    json.dumps(c.to_dict(), allow_nan=False)
    assert str(c)


VERIFIERS = {
    "solve_vstep": verify_vstep,
    "solve_min_norm": verify_min_norm,
    "global_lower_bound": verify_lower_bound,
    "gradient_descent": verify_gradient_descent,
    "classifier": verify_classifier,
    "check_conditions": verify_check_conditions,
    "evaluate": verify_evaluate,
    "compare": verify_compare,
}


@pytest.mark.parametrize("entry", VERIFIERS)
@pytest.mark.parametrize("case", EDGE)
def test_edge_case_gives_a_verified_answer(case, entry):
    X, y = EDGE[case]
    VERIFIERS[entry](X, y, case)


def test_one_token_reduces_P_R_to_the_svm_on_that_token():
    X, y = EDGE["T=1"]
    res = solve_min_norm(X, y, R=1.0, certify=True)
    svm = solve_vstep(X[:, 0], y, "ldp")
    assert res.norm == pytest.approx(svm.norm, rel=1e-9)
    assert res.lower_bound == pytest.approx(svm.norm, rel=1e-9)


def test_one_feature_matches_a_grid_search_over_p():
    """With d = 1, p is a number in [-R, R]: the optimum is found by scanning it."""
    X, y = EDGE["d=1"]
    R = 2.0
    yz = [margins(X, y.astype(float), np.ones(1), np.array([p])) for p in np.linspace(-R, R, 4001)]
    best = min(1.0 / np.min(m) for m in yz)  # y z > 0 for every p here: |v| = 1 / min_i y_i z_i
    res = solve_min_norm(X, y, R=R)
    assert res.norm <= best * (1 + 1e-6)
    assert res.norm >= best * (1 - 1e-3)  # the grid is fine enough to be within 0.1 %


def test_gradient_of_phi_matches_finite_differences_when_n_exceeds_d():
    """n > d makes the feature Gram singular: the envelope gradient must use the dual alpha y,
    not the (minimum-norm, different) coefficients of v. Found by the d = 1 grid search."""
    X = PaperDistribution(d=3, T=2, snr=1.0, eta=0.0, signal="antipodal").sample(8, seed=4).X
    y = np.sign(X[:, 0, 0])  # labels of the signal tokens (+-rho e_1): separable
    form = DenseForm(X)
    p = np.array([0.3, -0.2, 0.1])
    point = evaluate_phi(form, y, p)
    assert point.feasible and np.linalg.matrix_rank(form.feature_gram(point.attention)) <= 3 < len(
        y
    )
    grad = form.from_coefficients(gradient_coefficients(form, point))
    h = 1e-6
    for k in range(3):
        e = np.eye(3)[k] * h
        fd = (evaluate_phi(form, y, p + e).phi - evaluate_phi(form, y, p - e).phi) / (2 * h)
        assert fd == pytest.approx(grad[k], rel=1e-4, abs=1e-8)


# --- 1. homogeneity: X -> cX ----------------------------------------------------------------
#
# f(cX; v/c, p/c) = (v/c)^T (cX)^T softmax(cX p/c) = f(X; v, p), and ||p/c|| <= R/c. So
# (v, p) is feasible for (X, R) iff (v/c, p/c) is for (cX, R/c): OPT(cX, R/c) = OPT(X, R) / c.
# The v-step (fixed features Z -> cZ) and the bound LB (no R) scale by 1/c exactly. Two-step GD
# with its default steps (beta ∝ 1 / mean ||x||^2) maps (v, p) to (v/c, p/c): same predictions.
# The condition checker is scale-free: the same report.


@pytest.fixture(scope="module")
def unscaled_solve():
    """The solve every scale is compared with, computed once."""
    return solve_min_norm(X0, Y0, R=2.0)


@pytest.mark.parametrize(
    "c", [1e-8, 1e8, 1e-99, 1e98]
)  # max |x0| = 2.7: the last two near the limits
def test_scaling_X_scales_the_answers_as_the_maths_says(c, unscaled_solve):
    Xc = X0 * c
    Z = X0.mean(axis=1)
    assert solve_vstep(c * Z, Y0).norm * c == pytest.approx(solve_vstep(Z, Y0).norm, rel=1e-9)
    assert global_lower_bound(Xc, Y0).value * c == pytest.approx(
        global_lower_bound(X0, Y0).value, rel=1e-9
    )

    ref, scaled = unscaled_solve, solve_min_norm(Xc, Y0, R=2.0 / c)
    assert scaled.norm * c == pytest.approx(ref.norm, rel=1e-6)
    np.testing.assert_allclose(scaled.p * c, ref.p, rtol=1e-5, atol=1e-8 * np.linalg.norm(ref.p))

    gd_ref, gd_scaled = gradient_descent(X0, Y0), gradient_descent(Xc, Y0)
    np.testing.assert_allclose(gd_scaled.v * c, gd_ref.v, rtol=1e-8)
    np.testing.assert_allclose(gd_scaled.p * c, gd_ref.p, rtol=1e-8)
    assert gd_scaled.loss == pytest.approx(gd_ref.loss, rel=1e-8)

    clf_ref, clf_scaled = (
        SingleHeadAttentionClassifier().fit(X0, Y0),
        SingleHeadAttentionClassifier().fit(Xc, Y0),
    )
    test = PaperDistribution(d=6, T=2, snr=0.8, eta=0.0).sample(50, seed=1).X
    np.testing.assert_allclose(
        clf_scaled.decision_function(test * c), clf_ref.decision_function(test), rtol=1e-5
    )

    m_ref, m_scaled = evaluate(ref.v, ref.p, BASE), evaluate(ref.v / c, ref.p / c, Dataset(Xc, Y0))
    assert m_scaled.min_margin == pytest.approx(m_ref.min_margin, rel=1e-9)
    assert m_scaled.error == m_ref.error

    # Without the generating params (their rho is in the unscaled units) every number is measured.
    r_ref = check_conditions(Dataset(X0, Y0, BASE.clean_y, BASE.signal_index))
    r_scaled = check_conditions(Dataset(Xc, Y0, BASE.clean_y, BASE.signal_index))
    assert r_scaled.predicted_regime == r_ref.predicted_regime
    for a, b in zip(r_scaled.conditions, r_ref.conditions):
        assert (a.value is None) == (b.value is None) and (
            a.value is None or a.value == pytest.approx(b.value, rel=1e-9)
        )


# --- 2. a v-step engine that raises or is inaccurate: the fallback happens and is reported -----


def _ldp_raises(data, tol):
    raise RuntimeError("NNLS did not converge")


def _ldp_inaccurate(data, tol):
    return vstep_module._solve_ldp(data, tol)._replace(status=OPTIMAL_INACCURATE)


def _active_raises(data, tol, guess=None):
    raise RuntimeError("factor lost")


@pytest.mark.parametrize(
    ("solver", "engine", "reported"),
    [
        ("ldp", _ldp_raises, "ldp: raised RuntimeError: NNLS did not converge"),
        ("ldp", _ldp_inaccurate, "ldp: engine status 'optimal_inaccurate'"),
        ("active", _active_raises, "active: raised RuntimeError: factor lost"),
    ],
    ids=["ldp raises", "ldp inaccurate", "active raises"],
)
def test_min_norm_falls_back_from_a_failing_engine_and_says_so(
    monkeypatch, solver, engine, reported
):
    ds = PaperDistribution(d=8, T=2, snr=0.6, eta=0.2).sample(5, seed=3)
    R = 1.0
    kwargs = {"certify": True, "n_random_starts": 0, "search_starts": 0, "max_iter": 30}
    options = {"vstep_solver": solver}
    clean = solve_min_norm(ds, R=R, options=options, **kwargs)
    assert clean.vstep_fallbacks == 0 and "fell back" not in clean.message
    if solver == "active":  # the engine is called directly, warm or cold, not from _ENGINES
        monkeypatch.setattr(vstep_module, "_solve_active", engine)
    else:
        monkeypatch.setitem(vstep_module._ENGINES, solver, engine)
    res = solve_min_norm(ds, R=R, options=options, **kwargs)
    assert res.status == clean.status and res.success
    assert res.norm == pytest.approx(clean.norm, rel=1e-5)
    assert res.lower_bound == pytest.approx(
        clean.lower_bound, rel=1e-6
    )  # the bound's SVMs fell back too
    assert margins(ds.X, ds.y.astype(float), res.v, res.p).min() >= 1 - 1e-7
    assert res.vstep_fallbacks > 0
    assert re.search(
        rf"{res.vstep_fallbacks} v-step solve\(s\) fell back to another engine", res.message
    )
    assert reported in res.message


def test_min_norm_reports_failed_not_infeasible_when_every_engine_breaks(monkeypatch):
    for name in ("ldp", "ecos", "clarabel"):
        monkeypatch.setitem(vstep_module._ENGINES, name, _ldp_raises)
    monkeypatch.setattr(vstep_module, "_solve_active", _active_raises)
    res = solve_min_norm(BASE, R=1.0, n_random_starts=0)
    assert res.status == "failed" and not res.success and res.v is None
    assert "v-step failed" in res.message and "infeasible" not in res.message.split(";")[0]
