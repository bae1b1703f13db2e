"""Gradient descent endpoints: closed forms, benign regime, forms, weight decay, divergence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.kernel import loss_and_grads
from margin_solver.core.results import ConvergenceWarning
from margin_solver.core.validation import InvalidInputError
from margin_solver.gd.endpoints import (
    TRAJECTORY_COLUMNS,
    default_step_sizes,
    gradient_descent,
    token_scale,
)


@pytest.fixture(scope="module")
def small():
    dist = PaperDistribution(d=300, T=3, snr=0.5, eta=0.2)
    return dist.sample_train_test(12, 50, seed=7)


def test_first_step_from_zero_is_the_closed_form(small):
    train, _ = small
    beta0 = 0.37
    res = gradient_descent(train, schedule="constant", steps=1, step_size=beta0)
    xbar = train.X.mean(axis=1)
    expected = beta0 / (2 * train.n) * (train.y[:, None] * xbar).sum(axis=0)
    np.testing.assert_allclose(res.v, expected, rtol=1e-12, atol=1e-15)
    assert np.all(res.p == 0.0)  # df/dp = 0 at v = 0: p does not move in the first step


def test_two_step_endpoint_matches_manual_gradient_steps(small):
    train, _ = small
    b0, b1 = 0.05, 3.0
    res = gradient_descent(train, beta0=b0, beta1=b1)
    y = train.y.astype(float)
    g0 = loss_and_grads(train.X, y, np.zeros(train.d), np.zeros(train.d))
    v1, p1 = -b0 * g0.grad_v, -b0 * g0.grad_p
    g1 = loss_and_grads(train.X, y, v1, p1)
    np.testing.assert_allclose(res.v, v1 - b1 * g1.grad_v, rtol=1e-10)
    np.testing.assert_allclose(res.p, p1 - b1 * g1.grad_p, rtol=1e-10)
    assert np.linalg.norm(res.p) > 0
    assert res.nit == 2 and res.step_sizes == [b0, b1]


def test_default_step_sizes_follow_the_documented_scaling(small):
    train, _ = small
    n, T = train.n, train.T
    nu2 = token_scale(train.X)
    b0, b1 = default_step_sizes(train.X, first_step_scale=0.2, gap_per_log_n=3.0)
    assert b0 == pytest.approx(0.2 * 2 * n * T / nu2)
    assert b1 == pytest.approx(3.0 * np.log(n) * 2 * n * T / (0.2 * nu2))
    # the first step's own-token value <x_it, v_1> is about c0 y_i on average
    v1 = gradient_descent(train, schedule="constant", steps=1, step_size=b0).v
    own = train.y[:, None] * (train.X @ v1)
    assert 0.1 < own.mean() < 0.3


@pytest.mark.parametrize("seed", [0, 1])
def test_two_step_defaults_are_benign_in_the_papers_regime(seed):
    n, kappa, eta = 40, 4.0, 0.15
    dist = PaperDistribution(d=20_000, T=2, snr=np.sqrt(kappa / n), eta=eta)
    train, test = dist.sample_train_test(n, 200, seed=seed)
    assert train.flipped.sum() >= 1
    res = gradient_descent(train, test=test)
    last = {k: res.trajectory[k][-1] for k in TRAJECTORY_COLUMNS}
    assert res.interpolates and last["train_error"] == 0.0
    assert last["test_error_clean"] <= 0.05
    assert last["attn_signal_clean"] > 0.6  # clean samples attend to the signal token
    assert last["attn_signal_noisy"] < 0.1  # noisy samples attend to their noise token
    assert list(res.trajectory["step"]) == [0, 1, 2]


@pytest.mark.parametrize("init", ["zero", "random"])
@pytest.mark.parametrize(
    "options",
    [
        {"schedule": "two-step"},
        {"schedule": "constant", "steps": 25, "weight_decay": 0.01, "R": 0.05},
        {"schedule": "normalized", "steps": 25, "weight_decay": 0.001},
    ],
)
def test_kernel_and_dense_forms_agree(small, init, options):
    train, test = small
    every = 5 if options["schedule"] != "two-step" else None
    common = {"init": init, "seed": 3, "test": test, "record_every": every}
    dense = gradient_descent(train, form="dense", **options, **common)
    kern = gradient_descent(train, form="kernel", **options, **common)
    assert (dense.form, kern.form) == ("dense", "kernel")
    scale_v, scale_p = np.linalg.norm(dense.v), max(np.linalg.norm(dense.p), 1e-300)
    assert np.linalg.norm(kern.v - dense.v) <= 1e-8 * scale_v
    assert np.linalg.norm(kern.p - dense.p) <= 1e-8 * scale_p
    for key in ("loss", "norm_v", "norm_p", "normalized_margin"):
        np.testing.assert_allclose(kern.trajectory[key], dense.trajectory[key], rtol=1e-8)


def test_dense_form_streamed_in_blocks_gives_the_same_iterates(small, monkeypatch):
    from margin_solver.gd import endpoints as gd

    train, test = small
    options = {"schedule": "constant", "steps": 15, "weight_decay": 0.01, "test": test}
    options["form"] = "dense"
    whole = gradient_descent(train, **options)
    sample_bytes = train.T * train.d * 8
    monkeypatch.setattr(gd, "_CACHE_BYTES", 0)  # pretend X does not fit in cache
    monkeypatch.setattr(gd, "_BLOCK_BYTES", 5 * sample_bytes)  # blocks of 5 samples: 5, 5, 2
    blocks = gradient_descent(train, **options)
    np.testing.assert_allclose(blocks.v, whole.v, rtol=1e-12)
    np.testing.assert_allclose(blocks.p, whole.p, rtol=1e-12)
    np.testing.assert_allclose(blocks.attention, whole.attention, rtol=1e-12)
    np.testing.assert_allclose(blocks.trajectory["loss"], whole.trajectory["loss"], rtol=1e-12)


def test_auto_form_picks_kernel_only_when_it_pays(small):
    train, _ = small
    assert gradient_descent(train).form == "dense"  # two steps never repay the Gram product
    assert gradient_descent(train, schedule="constant", steps=50).form == "kernel"  # d > nT
    rng = np.random.default_rng(0)
    y = np.where(rng.random(50) < 0.5, -1, 1)
    square = rng.standard_normal(
        (50, 2, 100)
    )  # nT = d: Gram repaid after nT d/(4d - 2nT) = 50 steps
    assert gradient_descent(square, y, schedule="constant", steps=49).form == "dense"
    assert gradient_descent(square, y, schedule="constant", steps=51).form == "kernel"
    wide = rng.standard_normal((50, 2, 50))  # nT >= 2d: a kernel step costs more than a dense one
    assert gradient_descent(wide, y, schedule="constant", steps=5000).form == "dense"


def test_random_init_is_seeded_and_small(small):
    train, _ = small
    a = gradient_descent(
        train, schedule="constant", steps=1, init="random", seed=5, record_steps=[0]
    )
    b = gradient_descent(
        train, schedule="constant", steps=1, init="random", seed=5, record_steps=[0]
    )
    np.testing.assert_array_equal(a.v, b.v)
    assert 0 < a.trajectory["norm_p"][0] < 0.1 * np.sqrt(train.d / token_scale(train.X))


@pytest.fixture(scope="module")
def weight_decay_runs():
    """GD with weight decay 1e-3 from zero, stopped after 100, 1000 and 10 000 steps."""
    dist = PaperDistribution(d=300, T=2, snr=np.sqrt(6 / 12), eta=0.2)
    train = dist.sample(12, seed=3)
    runs = [
        gradient_descent(train, schedule="constant", steps=k, weight_decay=1e-3, record_steps=[k])
        for k in (100, 1000, 10_000)
    ]
    return train, runs


def _cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_long_weight_decay_gd_approaches_the_max_margin_direction(weight_decay_runs):
    """Reference: the v-step (hard-margin SVM) at the attention GD ends with."""
    from margin_solver.svm.vstep import solve_vstep

    train, runs = weight_decay_runs
    Z = np.einsum("nt,ntd->nd", runs[-1].attention, train.X)
    ref = solve_vstep(Z, train.y.astype(float), solver="ldp")
    assert ref.success
    cos = [_cos(r.v, ref.v) for r in runs]
    assert cos[0] < cos[1] < cos[2]
    assert cos[2] > 0.9
    margins = [r.normalized_margin for r in runs]
    assert margins[0] < margins[1] < margins[2] <= 1 / ref.norm * (1 + 1e-9)


def test_long_weight_decay_gd_approaches_the_min_norm_solution(weight_decay_runs):
    """Reference: the certified min-norm solution of P_R with R = GD's final ||p||."""
    from margin_solver.minnorm.solve import solve_min_norm

    train, runs = weight_decay_runs
    ref = solve_min_norm(train, R=runs[-1].p_norm, certify=True, gap_tol=0.1)
    assert ref.status == "optimal" and ref.certified  # gap <= 0.1
    cos_v = [_cos(r.v, ref.v) for r in runs]
    cos_p = [_cos(r.p, ref.p) for r in runs]
    assert cos_v[0] < cos_v[1] < cos_v[2] and cos_v[2] > 0.9
    assert cos_p[0] < cos_p[1] < cos_p[2] and cos_p[2] > 0.98
    np.testing.assert_array_equal(runs[-1].selected_token, ref.selected_token)


def test_huge_steps_diverge_with_a_status(small):
    train, _ = small
    with pytest.warns(ConvergenceWarning, match="status 'diverged'"):
        res = gradient_descent(train, beta0=1e300, beta1=1e300)
    assert res.status == "diverged" and not res.success
    assert "diverged at step" in res.message
    assert np.all(np.isfinite(res.v)) and np.all(np.isfinite(res.p))
    assert res.nit < 2


def test_normalized_steps_have_the_requested_length(small):
    train, _ = small
    res = gradient_descent(train, schedule="normalized", steps=1, step_size=0.25)
    assert np.linalg.norm(res.v) == pytest.approx(0.25)  # grad_p = 0 at v = 0
    assert np.all(res.p == 0.0)


def test_norm_cap_and_tolerance(small):
    train, _ = small
    capped = gradient_descent(train, schedule="constant", steps=200, R=0.01)
    assert capped.p_norm <= 0.01 * (1 + 1e-12)
    seen = []
    early = gradient_descent(
        train, schedule="constant", steps=100_000, weight_decay=0.5, tol=1e-6, callback=seen.append
    )
    assert early.status == "converged" and early.nit < 100_000
    assert early.trajectory["step"][-1] == early.nit
    assert [row["step"] for row in seen] == list(early.trajectory["step"])


def test_arrays_and_records(small):
    train, test = small
    res = gradient_descent(train.X, train.y, schedule="constant", steps=10, record_steps=[0, 4, 10])
    assert list(res.trajectory["step"]) == [0, 4, 10]
    assert np.all(np.isnan(res.trajectory["test_error"]))  # no test set
    assert np.all(np.isnan(res.trajectory["attn_signal_clean"]))  # arrays carry no signal index
    every = gradient_descent(train, schedule="constant", steps=10, record_every=4, test=test)
    assert list(every.trajectory["step"]) == [0, 4, 8, 10]
    assert np.all(np.isfinite(every.trajectory["test_error_clean"]))
    data = json.loads(every.to_json())
    assert data["status"] == "completed" and len(data["v"]) == train.d
    assert data["trajectory"]["normalized_margin"][0] is None  # 0/0 at zero init


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"schedule": "adam"}, "schedule must be one of"),
        ({"steps": 5}, "two-step schedule takes exactly 2 steps"),
        ({"step_size": 1.0}, "takes beta0 and beta1"),
        ({"schedule": "constant", "beta0": 1.0}, "belong to the two-step schedule"),
        ({"beta0": -1.0}, "beta0 must be a positive"),
        ({"schedule": "constant", "steps": 0}, "steps must be an integer >= 1"),
        ({"weight_decay": -0.1}, "weight_decay must be a finite number >= 0"),
        ({"R": 0}, "R must be a positive"),
        ({"init": "ones"}, "init must be one of"),
        ({"form": "sparse"}, "form must be one of"),
        ({"record_steps": [0, 3]}, r"record_steps must lie in \[0, 2\]"),
        ({"record_steps": [1], "record_every": 1}, "not both"),
    ],
)
def test_validation_errors(small, kwargs, match):
    train, _ = small
    with pytest.raises(InvalidInputError, match=match):
        gradient_descent(train, **kwargs)


def test_input_errors(small):
    train, _ = small
    with pytest.raises(InvalidInputError, match="y is required"):
        gradient_descent(train.X)
    with pytest.raises(InvalidInputError, match="carries its labels"):
        gradient_descent(train, train.y)
    with pytest.raises(InvalidInputError, match=r"got 3: \[-1, 1, 2\]"):
        gradient_descent(train.X, np.where(np.arange(train.n) == 0, 2, train.y))
    other = Dataset(np.ones((3, 3, 5)), [1, -1, 1])
    with pytest.raises(InvalidInputError, match="test has d=5"):
        gradient_descent(train, test=other)
    with pytest.raises(InvalidInputError, match="All tokens are zero"):
        gradient_descent(np.zeros((4, 2, 3)), [1, -1, 1, -1])
