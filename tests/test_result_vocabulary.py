"""One vocabulary across the result objects; the old names warn and still answer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from margin_solver.analysis.metrics import evaluate
from margin_solver.core.data import PaperDistribution
from margin_solver.gd.endpoints import GDResult, gradient_descent
from margin_solver.minnorm.solve import MinNormResult, solve_min_norm
from margin_solver.svm.vstep import VStepResult, solve_vstep
from margin_solver.theory import check_conditions


@pytest.fixture(scope="module")
def fits():
    train = PaperDistribution(d=200, snr=0.6, eta=0.1).sample(12, seed=5)
    return train, solve_min_norm(train, R=2.0, search_starts=0), gradient_descent(train)


SHARED = (
    "v",
    "p",
    "norm",
    "p_norm",
    "min_margin",
    "normalized_margin",
    "nit",
    "status",
    "message",
    "success",
    "solve_time",
    "attention",
    "selected_token",
)


def test_min_norm_and_gd_results_share_names_and_meanings(fits):
    train, mn, gd = fits
    for res in (mn, gd):
        for name in SHARED:
            assert hasattr(type(res), name) or name in res.__dataclass_fields__, (type(res), name)
        m = evaluate(res.v, res.p, train)
        assert res.min_margin == pytest.approx(m.min_margin, rel=1e-9)
        assert res.p_norm == pytest.approx(np.linalg.norm(res.p), rel=1e-12)
        assert res.normalized_margin == pytest.approx(res.min_margin / res.norm, rel=1e-12)
        # 0 is honest for a start accepted as it is (a settled nearly hard selection)
        assert isinstance(res.nit, int) and res.nit >= (1 if res is gd else 0)


@pytest.mark.parametrize(
    "cls, old, new",
    [
        (MinNormResult, "n_iter", "nit"),
        (GDResult, "margin", "min_margin"),
        (GDResult, "norm_p", "p_norm"),
        (GDResult, "steps", "nit"),
    ],
)
def test_old_names_warn_and_return_the_new_value(fits, cls, old, new):
    res = fits[1] if cls is MinNormResult else fits[2]
    with pytest.warns(
        FutureWarning, match=rf"{cls.__name__}\.{old} is deprecated.*use {cls.__name__}\.{new}"
    ):
        value = getattr(res, old)
    assert value == getattr(res, new)
    assert json.loads(res.to_json())[old] == json.loads(res.to_json())[new]  # JSON keeps both


def test_min_norm_margin_keeps_its_old_meaning_with_a_warning(fits):
    mn = fits[1]
    with pytest.warns(FutureWarning, match="meanings differ"):
        assert mn.margin == 1 / mn.norm
    assert mn.normalized_margin == pytest.approx(1 / mn.norm, rel=1e-5)  # min_margin ~ 1


def test_vstep_and_report_names(fits):
    train = fits[0]
    Z = train.X[:, 0]
    res = solve_vstep(Z, train.y.astype(float))
    assert isinstance(res, VStepResult)
    with pytest.warns(FutureWarning, match="use VStepResult.nit"):
        assert res.n_iter == res.nit
    report = check_conditions(train, solution=fits[2], method="two-step-gd")
    assert report.step_sizes == tuple(fits[2].step_sizes)
    with pytest.warns(FutureWarning, match="use ConditionReport.step_sizes"):
        assert report.steps == report.step_sizes


def test_results_build_from_old_keywords_silently(fits, recwarn):
    gd = fits[2]
    fields = {k: getattr(gd, k) for k in gd.__dataclass_fields__}
    old = dict(
        fields,
        margin=fields.pop("min_margin"),
        norm_p=fields.pop("p_norm"),
        steps=fields.pop("nit"),
    )
    again = GDResult(**old)
    assert again.min_margin == gd.min_margin and again.nit == gd.nit and not recwarn.list


def test_metrics_repr_does_not_dump_arrays():
    data = PaperDistribution(d=50, snr=1.0, eta=0.0).sample(500, seed=0)
    v = np.zeros(50)
    v[0], v[1] = 1.0, -1.0
    text = repr(evaluate(v, np.zeros(50), data))
    assert "selected_token: array(500,) int64" in text and len(text) < 600
    assert math.isfinite(evaluate(v, np.zeros(50), data).to_dict()["min_margin"])
