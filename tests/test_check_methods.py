"""The checker's prediction belongs to a method and an R (issue 20), and it never blames the
theory for an optimiser's failure (issue 11): reproducers that failed on the starting commit."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from margin_solver.analysis.estimation import bootstrap_intervals, estimate_signal_noise
from margin_solver.cli import main
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.validation import InvalidInputError
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent, token_scale
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import (
    BENIGN,
    CANNOT_TELL,
    HARMFUL,
    NO_INTERPOLATION,
    OUTSIDE,
    Constants,
    check_conditions,
    two_step_upper_kappa,
)
from margin_solver.theory import constants as theory_constants

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")


@pytest.fixture(autouse=True)
def _scalar_thresholds(monkeypatch):
    """These tests exercise the regime rules with the scalar threshold constants, mostly at
    d / n^2 below the calibrated range (1-100), where the package's table would say "cannot
    tell: outside the calibrated range"; tests/test_check_range.py covers the table."""
    monkeypatch.setattr(theory_constants, "CALIBRATION", ())


DOCS = Path(__file__).resolve().parents[1] / "docs"


def _split(kappa: float, n: int = 40, d: int = 2000, seed: int = 0):
    dist = PaperDistribution(d=d, T=2, snr=math.sqrt(kappa / n), eta=0.1)
    return dist, *dist.sample_train_test(n, 500, seed=seed)


def _memoriser(train: Dataset):
    """An exact interpolator through the noise tokens only (no signal component): harmful."""
    xi = train.X[:, 1]
    dual = np.linalg.solve(xi @ xi.T, np.stack([train.y.astype(float), np.ones(train.n)], axis=1))
    return xi.T @ dual[:, 0], 30 * (xi.T @ dual[:, 1])


def _digits_rows(a: int, b: int) -> Dataset:
    from sklearn.datasets import load_digits

    digits = load_digits()
    keep = np.isin(digits.target, [a, b])
    X = digits.data[keep].reshape(-1, 8, 8).astype(float)
    return Dataset(X, np.where(digits.target[keep] == a, 1, -1))


# -- issue 11: an optimiser's failure is not evidence against the theory ----------------------
def test_failed_two_step_gd_is_not_a_disagreement_real_run():
    # Starting commit: "DISAGREES: predicted benign, observed no interpolation" while the
    # min-norm problem is feasible (a certified-free solve finds an interpolator).
    _, train, test = _split(kappa=8.0)
    # The package's scaled steps taken exactly (the defaults halve a step that raises the
    # loss, which makes the second step too small for the theorem's regime).
    beta0, beta1 = default_step_sizes(train.X)
    res = gradient_descent(train, beta0=beta0, beta1=beta1)
    assert not res.interpolates and not res.success
    report = check_conditions(train, res, test)
    assert report.method == "two-step-gd" and report.step_sizes == tuple(res.step_sizes)
    assert "DISAGREES" not in report.verdict
    # kappa = 8 is above two steps' upper SNR limit (6.58 at eta = 0.1): predicted, and seen.
    assert report.predicted_regime == NO_INTERPOLATION
    assert "upper limit of two steps" in report.regime_reason
    assert report.verdict.startswith("AGREES: predicted no interpolation for two-step GD at")
    mn = solve_min_norm(train, R=100 / math.sqrt(token_scale(train.X)))
    assert mn.min_margin > 0  # the min-norm problem is feasible


@pytest.mark.parametrize("status", ["not_fitted", "diverged"])
def test_failed_gd_status_is_reported_as_such(status):
    _, train, test = _split(kappa=3.0)
    steps = default_step_sizes(train.X)
    failed = SimpleNamespace(
        v=np.zeros(train.d),
        p=np.zeros(train.d),
        status=status,
        success=False,
        schedule="two-step",
        step_sizes=list(steps),
    )
    report = check_conditions(train, failed, test)
    assert report.predicted_regime == BENIGN
    assert report.observed.trust == "failed" and report.observed.status == status
    assert report.verdict.startswith("NOT COMPARABLE: predicted benign for two-step GD at")
    assert "not evidence about the theory" in report.verdict


@pytest.mark.parametrize("status", ["no_feasible_point_found", "failed"])
def test_min_norm_without_a_point_is_not_a_disagreement(status):
    _, train, test = _split(kappa=8.0)
    R = 100 / math.sqrt(token_scale(train.X))
    empty = {"v": None, "p": None, "status": status, "R": R, "lower_bound": None}
    report = check_conditions(train, empty, test)
    assert report.method == "min-norm" and report.R == R
    assert report.observed.train is None and report.observed.trust == "failed"
    assert report.verdict.startswith("NOT COMPARABLE")
    assert "observed: no point" in str(report)


def test_certified_infeasible_is_a_proof_and_can_disagree():
    _, train, test = _split(kappa=8.0)
    proof = {"v": None, "p": None, "status": "infeasible", "R": 1.0, "lower_bound": math.inf}
    report = check_conditions(train, proof, test)
    assert report.observed.trust == "proof" and report.observed.regime == NO_INTERPOLATION
    assert report.verdict.startswith("DISAGREES")


@pytest.mark.parametrize(
    ("status", "certified", "word"),
    [
        ("local_optimal", False, "CANNOT TELL"),
        ("time_limit", None, "CANNOT TELL"),
        ("optimal", True, "DISAGREES"),
        ("optimal", None, "CANNOT TELL"),
    ],
)
def test_uncertified_min_norm_point_cannot_refute(status, certified, word):
    _, train, test = _split(kappa=8.0, n=100, d=120)
    v, p = _memoriser(train)
    sol = SimpleNamespace(
        v=v,
        p=p,
        status=status,
        certified=certified,
        R=float(np.linalg.norm(p)),
        lower_bound=None,
        success=status in ("optimal", "local_optimal"),
    )
    report = check_conditions(train, sol, test)
    assert report.predicted_regime == BENIGN and report.observed.regime == HARMFUL
    assert report.verdict.startswith(word)


def test_real_min_norm_result_sets_method_and_R():
    _, train, test = _split(kappa=8.0)
    R = 100 / math.sqrt(token_scale(train.X))
    res = solve_min_norm(train, R=R)
    report = check_conditions(train, res, test)
    assert report.method == "min-norm" and pytest.approx(R) == report.R
    assert f"R = {R:.4g}" in report.method_label
    assert report.predicted_regime == BENIGN


# -- issue 11: estimates carry their uncertainty; "cannot tell" with the reason -----------------
@pytest.mark.parametrize("pair", [(3, 8), (1, 7)])
def test_digits_clustering_artefacts_do_not_make_data_outside_the_theory(pair):
    # Starting commit: eta estimated at 0.36-0.48 by a clustering artefact made the data
    # "outside the theory".
    report = check_conditions(_digits_rows(*pair))
    assert report.predicted_regime == CANNOT_TELL
    assert report.condition("label_noise_rate").holds is None
    assert "cannot tell" in report.regime_reason and "2" in report.regime_reason


def test_interval_straddling_the_threshold_cannot_tell():
    dist = PaperDistribution(d=500, T=3, snr=0.3, eta=0.1, signal_position="random")
    ds = dist.sample(100, seed=4)
    X = ds.X.copy()
    X[np.arange(100), ds.signal_index] += 0.5 * np.random.default_rng(5).standard_normal((100, 500))
    raw = Dataset(X, ds.y)
    first = check_conditions(raw)
    row = first.condition("snr_benign")
    lo, hi = row.interval
    assert lo < row.value < hi
    assert first.intervals.snr[0] < dist.snr < first.intervals.snr[1]
    at = check_conditions(raw, constants=Constants(kappa_benign=row.value, kappa_harmful=lo / 2))
    assert at.condition("snr_benign").holds is None
    assert at.predicted_regime == CANNOT_TELL
    assert "bootstrap interval" in at.regime_reason
    above = check_conditions(raw, constants=Constants(kappa_benign=hi * 1.01, kappa_harmful=lo / 2))
    assert above.condition("snr_benign").holds is False and above.predicted_regime == OUTSIDE


def test_bootstrap_intervals_cover_the_generating_snr():
    covered = 0
    for seed in range(10):
        ds = PaperDistribution(d=300, T=2, snr=0.15, eta=0.1, noise="isotropic").sample(
            80, seed=seed
        )
        raw = Dataset(ds.X, ds.y)
        ci = bootstrap_intervals(raw, estimate_signal_noise(raw), seed=seed)
        covered += ci.snr[0] <= 0.15 * 1.02 and ci.snr[1] >= 0.15 * 0.98
        assert ci.eta[0] <= ci.eta[1]
    assert covered >= 7


# -- issue 11: no row that cannot fail; sources exist -------------------------------------------
def test_no_deciding_row_that_cannot_fail():
    # Starting commit: at d = 8 the signal/noise overlap bound was 3.03 > 1 >= every |cos|.
    report = check_conditions(_digits_rows(3, 8))
    row = report.condition("signal_noise_orthogonality")
    assert row.threshold > 1 and row.role == "soft" and row.holds is None
    assert any("cannot fail" in w for w in report.warnings)
    big = check_conditions(_split(kappa=8.0)[1])
    row = big.condition("signal_noise_orthogonality")
    assert row.threshold < 1 and row.role == "assumption" and row.holds is True


def test_sources_are_the_paper_the_reply_or_this_repository():
    theory = (DOCS / "theory.md").read_text()
    headings = set(re.findall(r"^#+ (.+)$", theory, flags=re.M))
    _, train, _ = _split(kappa=8.0)
    reports = [check_conditions(train, method=m) for m in ("two-step-gd", "min-norm")]
    for row in (r for rep in reports for r in rep.conditions):
        assert "seed" not in row.source and "design" not in row.source, row.name
        assert re.search(r"authors' reply, [QW]\d|the paper|docs/theory\.md", row.source), row.name
        for section in re.findall(r"docs/theory\.md, ([^;()]+)", row.source):
            assert section.strip() in headings, (row.name, section)
    assert "seed" not in str(reports[0])


# -- issue 20: predictions per method ----------------------------------------------------------
def test_two_step_gd_and_min_norm_predict_differently():
    _, train, _ = _split(kappa=12.0)
    gd = check_conditions(train, method="two-step-gd")
    mn = check_conditions(train, method="min-norm")
    assert gd.predicted_regime == NO_INTERPOLATION and mn.predicted_regime == BENIGN
    assert gd.condition("snr_two_step_upper").threshold == pytest.approx(two_step_upper_kappa(0.1))
    assert "two-step GD at beta0" in gd.message and "min-norm" in mn.message


def test_step_sizes_enter_the_two_step_prediction():
    _, train, _ = _split(kappa=3.0)
    b0, b1 = default_step_sizes(train.X)
    assert check_conditions(train, method="two-step-gd").predicted_regime == BENIGN
    big_first = check_conditions(train, method="two-step-gd", steps=(20 * b0, b1))
    assert big_first.condition("first_step_modest").holds is False
    assert big_first.predicted_regime == OUTSIDE
    assert "outside what the theorem covers" in big_first.regime_reason
    small_second = check_conditions(train, method="two-step-gd", steps=(b0, b1 / 10))
    assert small_second.condition("second_step_large").holds is False


def test_small_R_is_outside_what_the_theorem_covers():
    _, train, _ = _split(kappa=8.0)
    nu = math.sqrt(token_scale(train.X))
    small = check_conditions(train, method="min-norm", R=10 / nu)  # R nu / sqrt(n) = 1.6
    assert small.predicted_regime == OUTSIDE
    assert "too small for token selection" in small.regime_reason
    large = check_conditions(train, method="min-norm", R=100 / nu)
    assert large.predicted_regime == BENIGN


def test_gd_with_another_schedule_has_no_theorem():
    _, train, test = _split(kappa=4.0, d=600)
    res = gradient_descent(train, schedule="constant", steps=50)
    report = check_conditions(train, res, test)
    assert report.method == "gd" and report.predicted_regime == OUTSIDE
    assert "no theorem covers GD" in report.regime_reason


def test_bad_method_arguments_raise():
    _, train, _ = _split(kappa=4.0, d=300)
    res = gradient_descent(train)
    for kwargs, pattern in [
        ({"method": "svm"}, "method must be one of"),
        ({"method": "min-norm", "steps": (1, 2)}, "steps apply to method 'two-step-gd'"),
        ({"method": "two-step-gd", "R": 1.0}, "R applies to method 'min-norm'"),
        ({"method": "min-norm", "R": -1.0}, "positive"),
        ({"method": "two-step-gd", "steps": (1.0,)}, "two step sizes"),
        ({"method": "two-step-gd", "steps": (1.0, math.inf)}, "positive finite"),
    ]:
        with pytest.raises(InvalidInputError, match=pattern):
            check_conditions(train, **kwargs)
    with pytest.raises(InvalidInputError, match="is a 'two-step-gd' result"):
        check_conditions(train, res, method="min-norm")
    with pytest.raises(InvalidInputError, match="the solution used"):
        check_conditions(train, res, steps=(1.0, 2.0))


# -- CLI ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("check_methods")
    dist = PaperDistribution(d=600, T=2, snr=math.sqrt(12 / 40), eta=0.1)
    dist.sample(40, seed=0).save(root / "train.npz")
    return root


def test_cli_method_flags(train_file, capsys):
    path = str(train_file / "train.npz")
    assert main(["check", path, "--method", "two-step-gd"]) == 0
    assert "prediction for two-step GD at beta0" in capsys.readouterr().out
    assert main(["check", path, "--method", "two-step-gd", "--steps", "0.5,20"]) == 0
    assert "beta0 = 0.5, beta1 = 20" in capsys.readouterr().out
    assert (
        main(
            [
                "check",
                path,
                "--method",
                "min-norm",
                "--R",
                "0.01",
                "--json",
                str(train_file / "r.json"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    saved = json.loads((train_file / "r.json").read_text())
    assert saved["method"] == "min-norm" and saved["R"] == 0.01
    assert saved["predicted_regime"] == "outside the theory"


def test_cli_infers_the_method_from_saved_results(train_file, capsys):
    from margin_solver.core.data import load_dataset
    from margin_solver.core.fileio import write_json

    train = load_dataset(train_file / "train.npz")
    gd = gradient_descent(train)
    write_json(train_file / "gd.json", gd)
    assert (
        main(["check", str(train_file / "train.npz"), "--solution", str(train_file / "gd.json")])
        == 0
    )
    out = capsys.readouterr().out
    assert f"prediction for two-step GD at beta0 = {gd.step_sizes[0]:.4g}" in out
    mn = solve_min_norm(train, R=0.5, search_starts=0)  # any min-norm result will do
    write_json(train_file / "mn.json", mn)
    assert (
        main(["check", str(train_file / "train.npz"), "--solution", str(train_file / "mn.json")])
        == 0
    )
    assert "prediction for the min-norm interpolator at R = 0.5" in capsys.readouterr().out
    status = main(
        [
            "check",
            str(train_file / "train.npz"),
            "--solution",
            str(train_file / "mn.json"),
            "--method",
            "two-step-gd",
        ]
    )
    assert status == 2 and "is a 'min-norm' result" in capsys.readouterr().err


def test_cli_saved_result_without_a_point_is_not_comparable(train_file, capsys):
    sol = train_file / "empty.json"
    sol.write_text(
        json.dumps(
            {
                "v": None,
                "p": None,
                "status": "no_feasible_point_found",
                "R": 1.0,
                "lower_bound": None,
            }
        )
    )
    assert main(["check", str(train_file / "train.npz"), "--solution", str(sol)]) == 0
    out = capsys.readouterr().out
    assert "observed: no point" in out and "verdict: NOT COMPARABLE" in out
    assert "the min-norm interpolator at R = 1" in out


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--method", "svm"], "--method must be one of"),
        (["--R", "big"], "--R needs a number"),
        (["--R", "0"], "R must be a positive finite number"),
        (["--R", "1e400"], "R must be a positive finite number"),
        (["--method", "two-step-gd", "--steps", "1"], "--steps expects BETA0,BETA1"),
        (["--method", "two-step-gd", "--steps", "1,x"], "--steps needs a number"),
        (["--method", "min-norm", "--steps", "1,2"], "steps apply to method"),
    ],
)
def test_cli_bad_method_flags_exit_2(train_file, capsys, args, pattern):
    status = main(["check", str(train_file / "train.npz"), *args])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and re.search(pattern, lines[0])
