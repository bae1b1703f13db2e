"""The check-calibration study: calibration and validation seeds are disjoint, the sweep rows
carry the prediction for their own method, and the calibration picks what the data say."""

from __future__ import annotations

import json

import pytest

from margin_solver.bench.check_calibration import (
    _sizes,
    calibrate,
    calibrated_entries,
    observed_regime,
    validation_table,
)
from margin_solver.bench.studies import run_study
from margin_solver.bench.sweeps import load_results
from margin_solver.theory import Regime


def _row(kappa, err, margin=1.0, method="min-norm", status="optimal", predicted="-"):
    return {
        "kappa": kappa,
        "eta": 0.1,
        "test_error_clean": err,
        "min_margin": margin,
        "method": method,
        "status": status,
        "predicted_regime": predicted,
        "n": 40,
        "d": 1600,
        "T": 2,
    }


def test_seeds_are_disjoint_at_every_size():
    for size in ("tiny", "quick", "full"):
        grid = _sizes(size)
        assert not set(grid["calib"]) & set(grid["valid"])


def test_observed_regime_never_blames_the_theory_for_a_failed_optimiser():
    assert observed_regime(_row(4, 0.0)) == "benign"
    assert observed_regime(_row(4, 0.4)) == "harmful"
    assert observed_regime(_row(4, 0.15)) == "intermediate"
    # two-step GD that does not fit: the algorithm's own outcome, "no interpolation"
    assert observed_regime(_row(8, 0.0, margin=-1.0, method="gd-two-step")) == "no interpolation"
    # a min-norm point that does not fit, or no point: an optimiser failure
    assert observed_regime(_row(8, 0.0, margin=-1.0)) == "failed"
    assert (
        observed_regime(
            _row(8, float("nan"), margin=float("nan"), status="no_feasible_point_found")
        )
        == "failed"
    )
    assert (
        observed_regime(_row(8, float("nan"), margin=float("nan"), status="infeasible"))
        == "no interpolation"
    )


def test_calibrate_finds_the_switch_and_prefers_the_widest_consistent_band():
    rows = [_row(k, 0.5) for k in (0.25, 0.5, 1.0)] + [_row(k, 0.0) for k in (4.0, 8.0)]
    rows.append(_row(2.0, 0.15))  # intermediate: any prediction there is a miss
    cal = calibrate(rows, "min-norm")
    assert (cal["kappa_harmful"], cal["kappa_benign"]) == (1.0, 4.0)
    assert cal["agree"] == 5 and cal["miss"] == 0
    gd = [_row(k, 0.0, method="gd-two-step") for k in (1.0, 2.0, 4.0)]
    gd += [_row(k, 0.0, margin=-1.0, method="gd-two-step") for k in (8.0, 16.0)]
    cal = calibrate(gd, "gd-two-step")
    assert cal["upper_C"] == 1.0 and cal["miss"] == 0  # kappa_up(0.1) = 6.58 splits 4 and 8


def test_validation_table_counts_failures_and_silence_apart():
    rows = [
        _row(4, 0.0, predicted="benign"),
        _row(4, 0.4, predicted="benign"),
        _row(4, float("nan"), margin=float("nan"), status="failed", predicted="benign"),
        _row(4, 0.0, predicted="outside the theory"),
        _row(8, 0.0, predicted="cannot tell"),
    ]
    (line,), total = validation_table(rows, "min-norm")
    assert line["d/n^2"] == 1.0 and line["T"] == 2
    assert (line["agree"], line["miss"], line["not_comparable"]) == (1, 1, 1)
    assert (line["cannot_tell"], line["outside_theory"]) == (1, 1)
    # agreement over the decided predictions; the silent share beside it (2 of 4 comparable)
    assert line["agreement"] == 0.5 and line["silent_share"] == 0.5
    assert total["agree"] == 1
    # another d / n^2 is another line
    far = [{**r, "d": 16000} for r in rows]
    lines, _ = validation_table(rows + far, "min-norm")
    assert [t["d/n^2"] for t in lines] == [1.0, 10.0]


def test_calibrated_entries_are_per_ratio_and_T():
    rows = [_row(k, 0.5) for k in (0.5, 1.0)] + [_row(k, 0.0) for k in (4.0, 8.0)]
    rows += [{**r, "d": 16000, "test_error_clean": 0.0 if r["kappa"] >= 1 else 0.5} for r in rows]
    entries = calibrated_entries(rows, "min-norm", 100.0)
    assert [(e["d/n^2"], e["T"]) for e in entries] == [(1.0, 2), (10.0, 2)]
    assert [e["kappa_benign"] for e in entries] == [4.0, 1.0]
    assert all(e["method"] == "min-norm" and e["R_scale"] == 100.0 for e in entries)


@pytest.mark.slow
def test_tiny_study_runs_resumes_and_records_per_method_predictions(tmp_path):
    # Through run_study, as `bench` runs it: test_bench_cli leaves this study to this test.
    res = run_study("check-calibration", tmp_path, "tiny", jobs=1, progress=False)
    png, text = res.png, res.table.read_text()
    assert png is None and "agreement" in text and "silent_share" in text
    data = json.loads((tmp_path / "check_calibration.json").read_text())
    # one calibrated entry per run, d / n^2 (1 and 4) and T (2)
    assert len(data["constants"]) == 3 * 2 and data["meta"]["command"].endswith("check-calibration")
    assert {(e["d/n^2"], e["T"]) for e in data["constants"]} == {(1.0, 2), (4.0, 2)}
    gd = load_results(tmp_path / "check_valid_gd-two-step_0.csv")
    assert {r["seed"] for r in gd} == {1.0}
    assert {r["seed"] for r in load_results(tmp_path / "check_calib_gd-two-step_0.csv")} == {0.0}
    # validation rows carry the checker's prediction for their own method (calibration rows
    # need none), inside the package's calibrated range: never "outside the calibrated range"
    assert all(r["predicted_regime"] in {str(x) for x in Regime} for r in gd)
    assert not any(
        r["predicted_regime"] for r in load_results(tmp_path / "check_calib_gd-two-step_0.csv")
    )
    again = run_study("check-calibration", tmp_path, "tiny", jobs=1, progress=False).message
    assert "0 cells run" in again and (tmp_path / "check_calibration.md").read_text() == text
