"""What would help when P_R has no interpolator at the R asked for (minnorm.radius): the
smallest R found by continuation in R, or the proof that none exists at any R; on instances
small enough to check by hand."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from margin_solver.cli import main
from margin_solver.core.data import Dataset
from margin_solver.core.results import ConvergenceWarning
from margin_solver.core.strategy import Strategy
from margin_solver.descent.alternating import DenseForm, descend
from margin_solver.minnorm.radius import EVERY_R, FOUND, NONE_EXISTS, NONE_FOUND, radius_hint
from margin_solver.minnorm.solve import solve_min_norm

# d = 1, T = 2. Sample 1 (label -1) has tokens 1 and 1, so f_1 = v and v <= -1. Sample 0
# (label +1) has tokens 3 and -1: f_0 = v (3 e^{3p} - e^{-p}) / (e^{3p} + e^{-p}), positive
# with v < 0 iff 3 e^{4p} < 1, i.e. p < -ln(3) / 4. So P_R is feasible iff R > ln(3) / 4.
THRESHOLD_X = np.array([[[3.0], [-1.0]], [[1.0], [1.0]]])
LABELS = np.array([1.0, -1.0])
R_STAR = math.log(3) / 4


def _solve(X, R, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return solve_min_norm(X, LABELS, R=R, **kw)


def test_below_the_threshold_the_hint_brackets_the_smallest_radius():
    res = _solve(THRESHOLD_X, 0.1)
    hint = res.radius_hint
    assert res.status == "no_feasible_point_found" and hint.finding == FOUND
    assert hint.R_tried < R_STAR < hint.R_found  # the hand-computed threshold
    # 8 bisections of one doubling: within a factor 2^(1/256) of the point tried below
    assert hint.R_found / hint.R_tried <= 2 ** (1 / 2**8) * (1 + 1e-12)
    assert "what would help: an interpolator exists at R = " in res.message
    # in d = 1 the starts have two directions, +1 and -1: two doublings (0.2 fails along
    # both, 0.4 interpolates along -1), at most two v-steps each, then 8 bisections
    assert 2 + 8 < hint.steps <= 2 * 2 + 8
    assert np.linalg.norm(hint.p_found) == pytest.approx(hint.R_found)
    assert hint.p_found[0] < 0  # attention on the token -1 of sample 0
    again = _solve(THRESHOLD_X, hint.R_found)  # what the hint says to do
    assert again.success and again.radius_hint is None
    assert json.loads(res.to_json())["radius_hint"]["finding"] == "found"


def test_a_proof_at_this_R_only_still_says_what_a_larger_R_gives():
    res = _solve(THRESHOLD_X, 0.1, certify=True)
    assert res.status == "infeasible" and "at R = 0.1" in res.message
    assert res.radius_hint.finding == FOUND and res.radius_hint.R_found > R_STAR


def test_tokens_that_cannot_separate_the_labels_are_proven_for_every_R():
    # sample 0 (+1): tokens 2 and 0, sample 1 (-1): tokens 1 and 1. Sample 1 needs v < 0,
    # then every token of sample 0 has y <v, x> <= 0, and z_0 lies in their convex hull.
    X = np.array([[[2.0], [0.0]], [[1.0], [1.0]]])
    res = _solve(X, 1.0)
    assert res.status == "infeasible" and res.radius_hint.finding == NONE_EXISTS
    assert "no interpolator at any R" in res.radius_hint.message
    twins = np.array([[[1.0], [2.0]], [[2.0], [1.0]]])  # the same tokens, opposite labels
    assert _solve(twins, 1.0).radius_hint.finding == NONE_EXISTS


def test_uniform_attention_means_every_radius_and_the_budget_is_counted():
    form = DenseForm(np.array([[[1.0], [2.0]], [[-1.0], [0.0]]]))
    hint = radius_hint(form, LABELS, 0.5, {}, Strategy())  # no zero start was run
    assert hint.finding == EVERY_R and hint.R_found == 0.0 and hint.steps == 1
    form = DenseForm(THRESHOLD_X)
    runs = {"down": descend(form, LABELS, np.array([-0.01]), 0.01)}
    short = radius_hint(form, LABELS, 0.01, runs, Strategy(radius_doublings=3))
    # p = 0 (no zero start in runs: one v-step), then 0.02, 0.04, 0.08, all below ln(3)/4,
    # along the one direction: four v-steps, nothing found
    assert short.finding == NONE_FOUND and short.steps == 4 and short.R_found is None
    assert short.R_tried == pytest.approx(0.08)
    with pytest.raises(ValueError, match="radius_doublings"):
        Strategy(radius_doublings=-1)


def test_cli_says_which_radius_to_try(tmp_path, capsys):
    data = Dataset(THRESHOLD_X, LABELS).save(tmp_path / "t.npz")
    code = main(["solve", str(data), "--R", "0.1", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 3
    assert "  larger R    found: an interpolator exists at R = 0.2752" in captured.out
    assert "an interpolator exists at --R 0.2752" in captured.err
