"""Theorem-condition checker: regime predictions, estimators on raw arrays, observed verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from margin_solver.analysis.estimation import estimate_signal_noise
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.results import ConvergenceWarning
from margin_solver.core.validation import InvalidInputError
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import (
    BENIGN,
    CANNOT_TELL,
    HARMFUL,
    NO_INTERPOLATION,
    OUTSIDE,
    REGIMES,
    RULES,
    Constants,
    Regime,
    check_conditions,
    conflicting_pairs,
    data_evidence,
    rules_table,
)
from margin_solver.theory import constants as theory_constants


@pytest.fixture(autouse=True)
def _scalar_thresholds(monkeypatch):
    """These tests exercise the regime rules with the scalar threshold constants, mostly at
    d / n^2 below the calibrated range (1-100), where the package's table would say "cannot
    tell: outside the calibrated range"; tests/test_check_range.py covers the table."""
    monkeypatch.setattr(theory_constants, "CALIBRATION", ())


ROWS = {
    "tokens_per_sample",
    "T_bounded",
    "snr_benign",
    "snr_harmful",
    "label_noise_rate",
    "noisy_samples",
    "dimension_theorem",
    "dimension_experiment",
    "noise_orthogonality",
    "noise_norm_concentration",
    "signal_noise_orthogonality",
}
#: Rows each method adds.
METHOD_ROWS = {
    "min-norm": {"attention_radius"},
    "two-step-gd": {
        "first_step_modest",
        "second_step_large",
        "snr_two_step_upper",
        "noise_crosstalk",
    },
}


def _sample(kappa: float, n: int = 40, d: int = 600, eta: float = 0.1, seed: int = 2, **kw):
    dist = PaperDistribution(d=d, snr=math.sqrt(kappa / n), eta=eta, **kw)
    return dist, *dist.sample_train_test(n, 400, seed=seed)


def _benign_solution(dist: PaperDistribution, train: Dataset):
    """Clean samples attend to the signal, noisy ones to their noise token, which v memorises."""
    mu, rho = dist.signal_vectors(), dist.signal_norm
    xi = train.X[:, 1]
    noisy = np.flatnonzero(train.flipped)
    v = (mu[0] - mu[1]) / rho**2
    p = 10 * (mu[0] + mu[1]) / rho**2
    for i in noisy:
        v = v + 2 * train.y[i] * xi[i] / (xi[i] @ xi[i])
        p = p + 30 * xi[i] / (xi[i] @ xi[i])
    return v, p


def _memorising_solution(train: Dataset):
    """Every sample attends to its noise token and v memorises every label (no signal)."""
    xi = train.X[:, 1]
    w = xi / np.einsum("ij,ij->i", xi, xi)[:, None]
    return 2 * (train.y[:, None] * w).sum(axis=0), 30 * w.sum(axis=0)


def test_prediction_flips_across_the_snr_threshold():
    _, low, _ = _sample(kappa=0.2)
    _, high, _ = _sample(kappa=8.0)
    assert low.flipped.sum() >= 1 and high.flipped.sum() >= 1
    r_low, r_high = check_conditions(low), check_conditions(high)
    assert r_low.predicted_regime == HARMFUL
    assert r_high.predicted_regime == BENIGN
    assert r_low.condition("snr_harmful").holds and not r_low.condition("snr_benign").holds
    assert r_high.condition("snr_benign").holds and not r_high.condition("snr_harmful").holds
    assert r_high.condition("snr_benign").value == pytest.approx(8.0)
    # Same predictions from the raw arrays alone (SNR estimated).
    assert check_conditions(Dataset(low.X, low.y)).predicted_regime == HARMFUL
    assert check_conditions(Dataset(high.X, high.y)).predicted_regime == BENIGN


def test_transition_band_gives_no_prediction():
    _, train, _ = _sample(kappa=3.0)  # min-norm's band is (2, 4)
    report = check_conditions(train)
    assert report.predicted_regime == OUTSIDE
    assert "transition band" in report.regime_reason
    # Moving the constants moves the verdict: the thresholds are parameters, not hard-coded.
    moved = Constants(kappa_harmful=1.0, kappa_benign=2.5)
    assert check_conditions(train, constants=moved).predicted_regime == BENIGN


def test_correlated_noise_tokens_predict_no_interpolation():
    # N = n (T-1) = 800 noise tokens in d = 200: cross-talk ~ sqrt(800/200) = 2 > 1.
    dist = PaperDistribution(d=200, T=5, snr=0.5, eta=0.1)
    train = dist.sample(200, seed=0)
    report = check_conditions(train, method="two-step-gd")
    crosstalk = report.condition("noise_crosstalk")
    assert crosstalk.value == pytest.approx(2.0, rel=0.15)
    assert crosstalk.holds is False
    assert report.condition("noise_norm_concentration").holds
    assert report.predicted_regime == NO_INTERPOLATION


@pytest.mark.parametrize(
    ("kwargs", "failing"),
    [
        ({"eta": 0.4}, "label_noise_rate"),
        ({"eta": 0.0}, "noisy_samples"),
    ],
)
def test_failed_assumption_is_outside_the_theory(kwargs, failing):
    _, train, _ = _sample(kappa=8.0, **kwargs)
    report = check_conditions(train)
    assert report.condition(failing).holds is False
    assert report.predicted_regime == OUTSIDE
    assert failing in report.regime_reason


def test_one_token_per_sample_is_outside_the_theory():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 1, 50))
    y = np.where(X[:, 0, 0] > 0, 1, -1)
    report = check_conditions(Dataset(X, y), method="two-step-gd")
    assert report.condition("tokens_per_sample").holds is False
    assert report.condition("noise_crosstalk").value is None
    assert report.predicted_regime == OUTSIDE
    json.dumps(report.to_dict())


def test_large_T_only_warns():
    dist = PaperDistribution(d=2000, T=12, snr=math.sqrt(8 / 40), eta=0.1)
    report = check_conditions(dist.sample(40, seed=1))
    assert report.condition("T_bounded").holds is False
    assert any(w.startswith("T_bounded") for w in report.warnings)
    assert report.predicted_regime == BENIGN


def test_noise_correlated_with_signal_fails_orthogonality():
    _, train, _ = _sample(kappa=8.0, noise="isotropic")
    assert check_conditions(train).condition("signal_noise_orthogonality").holds
    X = train.X.copy()
    X[:, 1, 0] += 0.5 * np.linalg.norm(X[:, 1], axis=1)  # noise leaning on mu_+ = rho e_1
    report = check_conditions(Dataset(X, train.y, train.clean_y, train.signal_index, train.params))
    assert report.condition("signal_noise_orthogonality").holds is False
    assert report.predicted_regime == OUTSIDE


@pytest.mark.parametrize(
    "kw",
    [
        {"T": 2},
        {"T": 4, "signal_position": "random"},
        {"T": 3, "signal": "antipodal", "noise": "isotropic", "signal_position": "random"},
        {"T": 3, "signal": "random"},
    ],
)
@pytest.mark.parametrize("given", ["nothing", "signal_index", "clean_y"])
def test_estimates_from_raw_arrays_match_generating_values(kw, given):
    snr = 0.08
    dist = PaperDistribution(d=400, snr=snr, eta=0.15, **kw)
    ds = dist.sample(100, seed=7)
    extra = {"signal_index": ds.signal_index} if given == "signal_index" else {}
    if given == "clean_y":
        extra = {"clean_y": ds.clean_y}
    raw = Dataset(ds.X, ds.y, **extra)
    est = estimate_signal_noise(raw)
    assert est.snr == pytest.approx(snr, rel=0.1)
    assert est.sigma == pytest.approx(1.0, rel=0.05)
    assert est.signal_rank == (1 if kw.get("signal") == "antipodal" else 2)
    assert np.array_equal(est.signal_index, ds.signal_index)
    realised = ds.flipped.mean()
    if given == "clean_y":
        assert est.eta == realised
    else:
        assert abs(est.eta - realised) <= 0.03
    report = check_conditions(raw)
    assert report.condition("snr_benign").estimated
    assert report.condition("label_noise_rate").estimated == (given != "clean_y")
    assert report.condition("noisy_samples").estimated == (given != "clean_y")


def test_scale_invariance_without_overflow():
    _, train, _ = _sample(kappa=8.0)
    small = check_conditions(Dataset(train.X, train.y))
    for factor in (1e150, 1e-150):
        scaled = check_conditions(Dataset(factor * train.X, train.y))
        assert scaled.estimates.snr == pytest.approx(small.estimates.snr, rel=1e-9)
        assert scaled.estimates.rho == pytest.approx(factor * small.estimates.rho, rel=1e-9)
        for a, b in zip(scaled.conditions, small.conditions):
            assert (a.value is None) == (b.value is None), a.name
            if b.value is not None:
                assert a.value == pytest.approx(b.value, rel=1e-9), a.name
        assert scaled.predicted_regime == small.predicted_regime == BENIGN


@pytest.mark.parametrize(
    "data, predicted",
    [
        # equal samples with opposite labels: no (v, p) interpolates (rule 0)
        (Dataset(np.zeros((5, 2, 4)), [1, -1, 1, -1, 1]), NO_INTERPOLATION),
        (Dataset(np.ones((4, 3, 5)), [1, -1, 1, -1]), NO_INTERPOLATION),
        # pure noise: the signal positions cannot be identified, so nothing can be decided
        (Dataset(np.random.default_rng(0).standard_normal((6, 3, 10)), np.ones(6)), CANNOT_TELL),
        (
            Dataset(np.random.default_rng(1).standard_normal((6, 2, 1)), [1, -1, 1, -1, 1, -1]),
            CANNOT_TELL,
        ),
    ],
    ids=["all-zero", "identical tokens", "one class", "d=1"],
)
def test_degenerate_data_gives_a_report_not_a_crash(data, predicted):
    solution = {"v": np.zeros(data.d), "p": np.zeros(data.d)}
    report = check_conditions(data, solution, data)
    json.dumps(report.to_dict())
    assert report.predicted_regime == predicted
    assert report.observed.regime == NO_INTERPOLATION


def test_generating_values_are_not_flagged_estimated():
    _, train, _ = _sample(kappa=8.0)
    report = check_conditions(train, method="two-step-gd")
    for name in (
        "snr_benign",
        "snr_harmful",
        "label_noise_rate",
        "noisy_samples",
        "noise_crosstalk",
    ):
        assert report.condition(name).estimated is False


def test_noisy_signal_tokens_rho_is_debiased():
    # Real-data-like: the signal token carries noise of its own; the class means do too.
    dist = PaperDistribution(d=500, T=3, snr=0.3, eta=0.1, signal_position="random")
    ds = dist.sample(100, seed=4)
    X = ds.X.copy()
    X[np.arange(100), ds.signal_index] += 0.5 * np.random.default_rng(5).standard_normal((100, 500))
    est = estimate_signal_noise(Dataset(X, ds.y, signal_index=ds.signal_index))
    assert est.rho == pytest.approx(dist.signal_norm, rel=0.1)
    assert est.class_separation > 4


def test_unidentifiable_signal_is_warned_about():
    dist = PaperDistribution(d=500, T=3, snr=0.05, eta=0.1, signal_position="random")
    ds = dist.sample(100, seed=4)
    X = ds.X.copy()
    X[np.arange(100), ds.signal_index] += 0.5 * np.random.default_rng(5).standard_normal((100, 500))
    report = check_conditions(Dataset(X, ds.y))
    assert any("hard to identify" in w for w in report.warnings)
    assert any("split into classes with separation" in w for w in report.warnings)
    # The unreliable estimates decide nothing: "cannot tell", not "outside the theory".
    assert report.predicted_regime == CANNOT_TELL
    assert report.condition("label_noise_rate").holds is None


def test_every_row_is_present_and_serialisable(tmp_path):
    dist, train, test = _sample(kappa=8.0)
    report = check_conditions(train, dict(zip("vp", _benign_solution(dist, train))), test)
    assert {r.name for r in report.conditions} == ROWS | METHOD_ROWS["min-norm"]
    gd = check_conditions(train, method="two-step-gd")
    assert {r.name for r in gd.conditions} == ROWS | METHOD_ROWS["two-step-gd"]
    out = json.loads(json.dumps(report.to_dict()))
    assert out["predicted_regime"] in REGIMES
    # a report, not a solver result: no status that could only ever say "checked"
    assert "status" not in out and "success" not in out
    assert "not reproduced" in out["disclaimer"]
    for row in out["conditions"]:
        assert set(row) >= {
            "name",
            "source",
            "formula",
            "value",
            "threshold",
            "constant",
            "holds",
            "estimated",
        }
        assert row["source"]
    assert out["observed"]["test"]["error_clean"] is not None
    text = str(report)
    for name in ROWS:
        assert name in text
    assert "predicted regime for the min-norm interpolator at large R" in text
    assert "verdict: AGREES" in text


def test_observed_verdicts_with_hand_made_solutions():
    dist, train, test = _sample(kappa=8.0)
    benign = check_conditions(train, dict(zip("vp", _benign_solution(dist, train))), test)
    obs = benign.observed
    assert obs.interpolates and obs.regime == BENIGN
    assert obs.clean_error <= 0.05 and obs.test["error"] == pytest.approx(
        test.flipped.mean(), abs=0.05
    )
    assert obs.train["attn_signal_clean"] > 0.9 and obs.train["attn_signal_noisy"] < 0.1
    assert benign.verdict.startswith("AGREES")

    v, p = _memorising_solution(train)
    harmful = check_conditions(train, SimpleNamespace(v=v, p=p), test)
    assert harmful.observed.interpolates and harmful.observed.regime == HARMFUL
    assert harmful.observed.train["attn_signal_clean"] < 0.1
    assert harmful.verdict.startswith("DISAGREES")

    zero = check_conditions(train, {"v": np.zeros(train.d), "p": np.zeros(train.d)}, test)
    assert zero.observed.regime == NO_INTERPOLATION and zero.verdict.startswith("DISAGREES")

    # The prediction concerns min-norm / two-step GD: a hand-made benign interpolator exists
    # at low SNR too, and the verdict says so.
    low_dist, low_train, low_test = _sample(kappa=0.2)
    low = check_conditions(
        low_train, dict(zip("vp", _benign_solution(low_dist, low_train))), low_test
    )
    assert low.predicted_regime == HARMFUL and low.observed.regime == BENIGN
    assert low.verdict == (
        "DISAGREES: predicted harmful for the min-norm interpolator at large R (hard token "
        "selection), observed benign"
    )

    no_test = check_conditions(train, dict(zip("vp", _benign_solution(dist, train))))
    assert no_test.observed.regime is None and no_test.verdict.startswith("partial")


def test_interpolator_where_two_step_gd_is_predicted_to_fail():
    # n = 100 noise tokens in d = 120: cross-talk ~ 0.9, so two-step GD should not interpolate,
    # yet an exact memoriser exists; its generalisation is judged against the SNR side.
    dist = PaperDistribution(d=120, T=2, snr=math.sqrt(8 / 100), eta=0.1)
    train, test = dist.sample_train_test(100, 400, seed=0)
    xi = train.X[:, 1]
    dual = np.linalg.solve(xi @ xi.T, np.stack([train.y.astype(float), np.ones(100)], axis=1))
    v, p = xi.T @ dual[:, 0], 30 * (xi.T @ dual[:, 1])
    report = check_conditions(train, {"v": v, "p": p}, test, method="two-step-gd")
    assert report.predicted_regime == NO_INTERPOLATION
    assert report.snr_regime == BENIGN
    assert report.observed.interpolates and report.observed.regime == HARMFUL
    assert report.verdict.startswith("predicted no interpolation for two-step GD at beta0 = ")
    assert "but this solution interpolates" in report.verdict
    assert report.verdict.endswith("DISAGREES: SNR side benign, observed harmful")
    assert "SNR side alone: benign" in str(report)


def test_observed_without_clean_test_labels_uses_eta():
    dist, train, test = _sample(kappa=8.0)
    raw_test = Dataset(test.X, test.y)
    report = check_conditions(train, dict(zip("vp", _benign_solution(dist, train))), raw_test)
    obs = report.observed
    assert obs.clean_error_estimated
    assert obs.clean_error == pytest.approx(max(0.0, (obs.test["error"] - 0.1) / 0.8), rel=1e-12)
    assert obs.regime == BENIGN


def test_subsampled_noise_gram_is_reported():
    _, train, _ = _sample(kappa=8.0, n=60)
    report = check_conditions(train, constants=Constants(max_tokens=40), method="two-step-gd")
    assert report.noise.subsampled and report.noise.n_gram_tokens == 20
    assert any("noise Gram computed on 20 of 60" in w for w in report.warnings)
    full = check_conditions(train, method="two-step-gd")
    assert report.condition("noise_crosstalk").value == pytest.approx(
        full.condition("noise_crosstalk").value, rel=0.3
    )


def test_bad_inputs_raise_clear_errors(tmp_path):
    _, train, _test = _sample(kappa=8.0)
    with pytest.raises(InvalidInputError, match=r"solution v of shape \(600,\)"):
        check_conditions(train, {"v": np.zeros(5), "p": np.zeros(600)})
    with pytest.raises(InvalidInputError, match="lacks key"):
        check_conditions(train, {"v": np.zeros(600)})
    with pytest.raises(InvalidInputError, match="must expose dense 'v' and 'p'"):
        check_conditions(train, 3.0)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        check_conditions(train, str(bad))
    with pytest.raises(InvalidInputError, match="test set has d=10"):
        check_conditions(train, test=PaperDistribution(d=10, snr=1.0).sample(5, seed=0))
    with pytest.raises(InvalidInputError, match="must be a Dataset"):
        check_conditions(train.X)
    with pytest.raises(InvalidInputError, match="kappa_harmful"):
        Constants(kappa_harmful=5.0)
    with pytest.raises(InvalidInputError, match="positive"):
        Constants(norm_tol=-1.0)
    with pytest.raises(InvalidInputError, match="max_tokens must be an integer"):
        Constants(max_tokens=4000.0)


def test_shared_evidence_gives_the_same_reports_and_belongs_to_its_dataset():
    dist, train, test = _sample(kappa=8.0)
    evidence = data_evidence(train)
    solution = dict(zip("vp", _benign_solution(dist, train)))
    for kw in (
        {},
        {"method": "two-step-gd"},
        {"method": "min-norm", "R": 0.5},
        {"solution": solution, "test": test},
        {"heads": 2},
    ):
        shared = check_conditions(train, evidence=evidence, **kw).to_dict()
        alone = check_conditions(train, **kw).to_dict()
        assert json.dumps(shared, sort_keys=True) == json.dumps(alone, sort_keys=True)
    with pytest.raises(InvalidInputError, match="another dataset"):
        check_conditions(dist.sample(40, seed=3), evidence=evidence)
    with pytest.raises(InvalidInputError, match="other constants"):
        check_conditions(train, constants=Constants(seed=1), evidence=evidence)
    with pytest.raises(InvalidInputError, match="must be a DataEvidence"):
        check_conditions(train, evidence=evidence.estimates)
    with pytest.raises(InvalidInputError, match="must be a Dataset"):
        data_evidence(train.X)


def test_samples_with_the_same_tokens_and_opposite_labels_cannot_be_interpolated():
    ds = PaperDistribution(d=500, T=3, snr=0.5, eta=0.1).sample(20, seed=0)
    assert conflicting_pairs(ds.X, ds.y) == []
    X, y = ds.X.copy(), ds.y.copy()
    X[5] = X[2][[2, 0, 1]]  # the same tokens in another order
    y[5] = -y[2]
    X[9] = X[3]  # a duplicate with the same label is harmless
    y[9] = y[3]
    bad = Dataset(X, y)
    assert conflicting_pairs(bad.X, bad.y) == [(2, 5)]
    report = check_conditions(bad)
    assert report.predicted_regime == NO_INTERPOLATION
    assert report.conflicting_pairs == [(2, 5)]
    assert "same tokens and opposite labels (first: (2, 5))" in report.regime_reason
    assert json.loads(report.to_json())["conflicting_pairs"] == [[2, 5]]
    # the solver agrees: P_R is infeasible (the v-step finds the pair at every start)
    with pytest.warns(ConvergenceWarning, match="'infeasible'"):
        assert solve_min_norm(bad, R=1.0).status == "infeasible"
    assert check_conditions(ds).conflicting_pairs == []


def test_docs_show_the_regime_rules_table_the_code_applies():
    # docs/theory.md shows the rules table verbatim; the table is also what predict() reads
    docs = (Path(__file__).resolve().parents[1] / "docs" / "theory.md").read_text()
    assert rules_table() in docs
    assert [rule.regime for rule in RULES] == [
        NO_INTERPOLATION,
        OUTSIDE,
        OUTSIDE,
        CANNOT_TELL,  # outside the calibrated range
        CANNOT_TELL,
        NO_INTERPOLATION,
        BENIGN,
        HARMFUL,
        CANNOT_TELL,
        OUTSIDE,
    ]


def test_regimes_are_strings_in_reports_and_json():
    dist, train, test = _sample(kappa=8.0)
    report = check_conditions(train)
    assert isinstance(report.predicted_regime, Regime)
    assert report.predicted_regime == report.predicted_regime.value  # compares as its string
    assert f"{report.predicted_regime}" == report.predicted_regime.value
    out = json.loads(report.to_json())
    assert out["predicted_regime"] == report.predicted_regime.value
