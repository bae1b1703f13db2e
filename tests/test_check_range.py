"""The checker's thresholds per d / n^2 and T: the nearest calibrated entry decides, and
outside the calibrated range the checker says "cannot tell" instead of predicting (issue 42)."""

from __future__ import annotations

import math

import pytest

from margin_solver.core.data import PaperDistribution
from margin_solver.core.validation import InvalidInputError
from margin_solver.theory import CALIBRATION, Calibrated, Constants, check_conditions
from margin_solver.theory.constants import nearest_calibrated

#: A table whose benign thresholds differ per ratio, so that which entry decides shows.
TABLE = (
    Calibrated("two-step-gd", 1.0, 2, 0.5, 2.0, upper_C=1.0),
    Calibrated("two-step-gd", 20.0, 2, 0.5, 8.0, upper_C=1.0),
    Calibrated("min-norm", 1.0, 2, 1.0, 3.0, R_scale=20.0),
    Calibrated("min-norm", 1.0, 2, 2.0, 4.0, R_scale=100.0),
    Calibrated("min-norm", 20.0, 2, 2.0, 12.0, R_scale=100.0),
)


def test_nearest_entry_inside_and_the_reason_outside():
    assert nearest_calibrated(TABLE, "two-step-gd", 3.0, 2, None)[0].ratio == 1.0
    assert nearest_calibrated(TABLE, "two-step-gd", 6.0, 2, None)[0].ratio == 20.0
    entry, why = nearest_calibrated(TABLE, "two-step-gd", 0.375, 2, None)
    assert entry is None and why == "d / n^2 = 0.375; calibrated 1-20"
    entry, why = nearest_calibrated(TABLE, "two-step-gd", 150.0, 2, None)
    assert entry is None and why.startswith("d / n^2 = 150;")
    entry, why = nearest_calibrated(TABLE, "two-step-gd", 4.0, 5, None)
    assert entry is None and why == "T = 5; calibrated 2-2"
    # min-norm: R = infinity and R above the largest calibrated R nu take the largest;
    # R nu below the smallest is outside.
    assert nearest_calibrated(TABLE, "min-norm", 1.0, 2, None)[0].R_scale == 100.0
    assert nearest_calibrated(TABLE, "min-norm", 1.0, 2, 1e4)[0].R_scale == 100.0
    assert nearest_calibrated(TABLE, "min-norm", 1.0, 2, 25.0)[0].R_scale == 20.0
    entry, why = nearest_calibrated(TABLE, "min-norm", 1.0, 2, 5.0)
    assert entry is None and why.startswith("R nu = 5;")


def _data(d: int, kappa: float, n: int = 20, seed: int = 3):
    return PaperDistribution(d=d, snr=math.sqrt(kappa / n), eta=0.1).sample(n, seed=seed)


def test_outside_the_calibrated_range_the_checker_cannot_tell():
    c = Constants(calibration=TABLE)
    ds = _data(d=150, kappa=6.0)  # d / n^2 = 0.375 < 1
    for method in ("two-step-gd", "min-norm"):
        report = check_conditions(ds, constants=c, method=method)
        assert str(report.predicted_regime) == "cannot tell"
        assert report.regime_reason.startswith(
            "cannot tell: outside the calibrated range (d / n^2 = 0.375; calibrated 1-20)"
        )
        row = report.condition("calibrated_range")
        assert row.holds is False and row.value == pytest.approx(0.375)
    # Without a table (the caller's own thresholds) the same data get a prediction.
    own = check_conditions(ds, constants=Constants(calibration=()), method="min-norm")
    assert str(own.predicted_regime) == "benign"
    with pytest.raises(KeyError):
        own.condition("calibrated_range")


def test_inside_the_range_the_nearest_entry_decides():
    c = Constants(calibration=TABLE)
    # kappa = 6: benign by the entry at d / n^2 = 1 (C_benign 4), not by the one at 20 (12).
    near_1 = check_conditions(_data(d=800, kappa=6.0), constants=c, method="min-norm")
    near_20 = check_conditions(_data(d=6400, kappa=6.0), constants=c, method="min-norm")
    assert str(near_1.predicted_regime) == "benign"
    assert near_1.condition("snr_benign").threshold == 4.0
    assert near_20.condition("snr_benign").threshold == 12.0
    assert str(near_20.predicted_regime) == "outside the theory"  # the transition band (2, 12)
    assert near_20.condition("calibrated_range").holds is True


def test_changing_a_threshold_while_the_table_decides_is_refused():
    table = CALIBRATION or TABLE
    with pytest.raises(InvalidInputError, match=r"calibration=\(\)"):
        Constants(kappa_benign=5.0, calibration=table)
    assert Constants(kappa_benign=5.0, calibration=()).kappa_benign == 5.0
    with pytest.raises(InvalidInputError, match="tuple of Calibrated"):
        Constants(calibration=[TABLE[0]])
