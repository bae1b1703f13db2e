"""GD's per-call setup: the recorded training metrics come from the step's own evaluation,
the last evaluation skips the gradients, and a zero iterate skips the products; none of
this changes a number beyond rounding."""

import numpy as np
import pytest

from margin_solver.analysis.metrics import evaluate, output_metrics, trusted_metrics
from margin_solver.core.data import PaperDistribution
from margin_solver.gd.endpoints import gradient_descent


@pytest.fixture(scope="module")
def train():
    return PaperDistribution(d=300, T=3, snr=0.4, eta=0.2).sample(30, seed=3)


@pytest.mark.parametrize("form", ["dense", "kernel"])
@pytest.mark.parametrize("init", ["zero", "random"])
def test_recorded_training_metrics_match_a_fresh_evaluation(train, form, init):
    res = gradient_descent(
        train, schedule="constant", steps=6, form=form, init=init, seed=1, record_every=1
    )
    assert list(res.trajectory["step"]) == list(range(7))
    # Re-run to each recorded step and evaluate its endpoint from scratch.
    for t in (1, 6):
        again = gradient_descent(
            train, schedule="constant", steps=t, form=form, init=init, seed=1, record_steps=[t]
        )
        fresh = evaluate(again.v, again.p, train)
        assert res.trajectory["train_error"][t] == fresh.error
        assert res.trajectory["train_error_clean"][t] == fresh.error_clean
        assert res.trajectory["min_margin"][t] == pytest.approx(fresh.min_margin, rel=1e-9)
        assert res.trajectory["attn_signal_clean"][t] == pytest.approx(
            fresh.attn_signal_clean, rel=1e-9
        )
        assert res.trajectory["attn_signal_noisy"][t] == pytest.approx(
            fresh.attn_signal_noisy, rel=1e-9
        )
        if t == 6:
            assert res.min_margin == pytest.approx(fresh.min_margin, rel=1e-9)


def test_output_metrics_equals_trusted_metrics_on_the_same_outputs(train):
    rng = np.random.default_rng(0)
    v, p = rng.standard_normal((2, train.d)) * 0.05
    s = np.exp(train.X @ p)
    s /= s.sum(axis=1, keepdims=True)
    f = np.sum(s * (train.X @ v), axis=1)
    a, b = output_metrics(f, s, train), trusted_metrics(v, p, train)
    assert a.error == b.error and a.error_clean == b.error_clean
    assert a.min_margin == pytest.approx(b.min_margin, rel=1e-12)
    assert a.attn_signal_noisy == pytest.approx(b.attn_signal_noisy, rel=1e-12)
    np.testing.assert_array_equal(a.selected_token, b.selected_token)


def test_one_step_from_zero_is_the_closed_form(train):
    """Step 1 from zero moves v only, by step * mean_i y_i xbar_i / 2 (dense form, where
    step 0 skips the products of the zero iterate)."""
    step = 0.3
    res = gradient_descent(train, schedule="constant", steps=1, step_size=step, form="dense")
    xbar = train.X.mean(axis=1)
    expected_v = step * (train.y[:, None] * xbar).mean(axis=0) / 2
    np.testing.assert_allclose(res.v, expected_v, rtol=1e-12, atol=1e-15)
    assert not res.p.any()
    assert res.trajectory["loss"][0] == pytest.approx(np.log(2.0), rel=1e-15)


def test_blocked_dense_form_skips_gradients_only_at_the_end(monkeypatch, train):
    """A run whose every evaluation returns gradients equals one that drops the last."""
    import margin_solver.gd.endpoints as gd

    original = gd._DenseGDState.evaluate
    monkeypatch.setattr(
        gd._DenseGDState, "evaluate", lambda self, W, y, with_grads=True: original(self, W, y, True)
    )
    full = gradient_descent(train, schedule="constant", steps=4, form="dense")
    monkeypatch.undo()
    lean = gradient_descent(train, schedule="constant", steps=4, form="dense")
    np.testing.assert_array_equal(full.v, lean.v)
    np.testing.assert_array_equal(full.p, lean.p)
    assert full.loss == lean.loss and full.min_margin == lean.min_margin


@pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")
@pytest.mark.parametrize("form", ["dense", "kernel"])
@pytest.mark.parametrize(
    "kw",
    [
        {"schedule": "two-step"},
        {"schedule": "constant", "steps": 3, "R": 0.5, "weight_decay": 0.1},
        {"schedule": "constant", "steps": 3, "train": ("p",), "v0": "ones"},
        {"schedule": "constant", "steps": 2, "train": ("v",)},
    ],
)
def test_zero_rows_skipped_give_the_general_iterates(monkeypatch, train, form, kw):
    """Skipping the products of zero rows (v and p at zero, p after one step, the attention
    coefficients while v = 0) gives the iterates of multiplying every row."""
    import margin_solver.gd.endpoints as gd

    if kw.get("v0") == "ones":
        kw = {**kw, "v0": np.ones(train.d) / np.sqrt(train.d)}
    skipping = gradient_descent(train, form=form, **kw)
    original = gd._row_products
    every_row = np.ones(2, dtype=bool)
    monkeypatch.setattr(
        gd, "_row_products", lambda W, M, live, acc=None: original(W, M, every_row, acc)
    )
    general = gradient_descent(train, form=form, **kw)
    for a, b in ((skipping.v, general.v), (skipping.p, general.p)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
    assert skipping.loss == pytest.approx(general.loss, rel=1e-12)
    assert skipping.status == general.status


def test_single_product_evaluations_stream_X_whole(monkeypatch, train):
    """With X in blocks, an evaluation doing one product (from a zero iterate; without
    gradients) reads X in one piece and gives what the blocks give, to rounding."""
    import margin_solver.gd.endpoints as gd

    monkeypatch.setattr(gd, "_CACHE_BYTES", 0)
    monkeypatch.setattr(gd, "_BLOCK_BYTES", 7 * train.T * train.d * 8)  # 7, 7, 7, 7, 2 samples
    state = gd._DenseGDState(train.X, np.zeros((2, train.d)))
    calls = []
    original = gd._row_products
    monkeypatch.setattr(gd, "_row_products", lambda *a, **k: calls.append(1) or original(*a, **k))
    y = train.y.astype(np.float64)
    at_zero = state.evaluate(np.zeros((2, train.d)), y)
    assert len(calls) == 2  # one forward (no row to multiply) and one backward product
    xbar = train.X.mean(axis=1)
    np.testing.assert_allclose(
        at_zero.grads[0], -(y[:, None] * xbar).mean(axis=0) / 2, rtol=1e-12, atol=1e-15
    )
    W = np.random.default_rng(2).standard_normal((2, train.d)) * 0.05
    blocked = state.evaluate(W, y)
    calls.clear()
    lean = state.evaluate(W, y, with_grads=False)
    assert len(calls) == 1 and len(range(0, train.n, state.block)) == 5
    np.testing.assert_allclose(lean.lg.margins, blocked.lg.margins, rtol=1e-12)
    assert lean.lg.loss == pytest.approx(blocked.lg.loss, rel=1e-12)
