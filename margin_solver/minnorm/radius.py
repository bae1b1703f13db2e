"""What would help when P_R has no interpolator at the radius asked for.

P_R is feasible at R as soon as some p with ``||p|| <= R`` lets a v-step separate the attended
features, so feasibility only grows with R. When no start of
:func:`margin_solver.minnorm.solve.solve_min_norm` found a feasible point, :func:`radius_hint`
says which of these holds:

``"every_R"``
    Uniform attention (p = 0) interpolates, so an interpolator exists at every R (the solve
    was cut before its ``zero`` start ran).
``"found"``
    Continuation in R found an interpolator at ``R_found``: along the direction of one of
    the solve's start points, the radius is doubled until the v-step at ``R p_hat`` is
    feasible, then bisected (geometrically) between the last two radii. A point, not a bound:
    the smallest R may be smaller (none was found at ``R_tried`` along that direction).
``"none_found"``
    Neither within the budget; nothing is proven.
``"none_exists"``
    Proven for every R (set by the solver, not here): two samples with the same tokens and
    opposite labels, or the hard-selection bound LB is infeasible. The proof behind LB: for
    every p the attended feature ``z_i = X_i^T softmax(X_i p)`` lies in the convex hull of
    the sample's tokens, so ``y_i <v, z_i> <= max_t y_i <v, x_it>``; if no v makes every
    sample's best token positive, no (v, p) interpolates at any R.

The budget is counted in v-steps (one SVM each), never in seconds: at most
``radius_directions`` directions times ``radius_doublings`` doublings, then
``radius_bisections`` bisection steps (the strategy table,
:class:`margin_solver.core.strategy.Strategy`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from margin_solver.core.results import RecordMixin
from margin_solver.core.strategy import Strategy
from margin_solver.descent.alternating import evaluate_phi, norm

__all__ = ["EVERY_R", "FINDINGS", "FOUND", "NONE_EXISTS", "NONE_FOUND", "RadiusHint"]

EVERY_R, FOUND, NONE_FOUND, NONE_EXISTS = "every_R", "found", "none_found", "none_exists"
FINDINGS = (EVERY_R, FOUND, NONE_FOUND, NONE_EXISTS)

# Two directions whose cosine exceeds this are one direction (the continuation tries each once).
_SAME_DIRECTION = 1 - 1e-9


@dataclass(repr=False)
class RadiusHint(RecordMixin):
    """What would help when P_R had no interpolator at the R asked for.

    Attributes
    ----------
    finding : {"every_R", "found", "none_found", "none_exists"}
        See the module docstring.
    R : float
        The radius asked for.
    R_found : float or None
        The smallest radius at which the continuation found an interpolator (0.0 with
        ``"every_R"``): P_R' is feasible for every ``R' >= R_found``. An upper bound on the
        smallest feasible radius, not the smallest itself.
    R_tried : float or None
        The largest radius tried without finding one (along the direction that succeeded,
        or along every direction when none did); not a proof of infeasibility there.
    p_found : ndarray of shape (n_features,) or None
        The attention vector at ``R_found`` (``||p|| = R_found``) at which the v-step
        interpolates: a warm start (``p0``) for a solve at ``R >= R_found``.
    steps : int
        v-steps the continuation spent (its budget is counted in these).
    message : str
    """

    finding: str
    R: float
    R_found: float | None
    R_tried: float | None
    p_found: np.ndarray | None
    steps: int
    message: str


def proven_none(R: float, why: str) -> RadiusHint:
    """The hint of a solve that proved infeasibility for every R (``why``: the proof)."""
    return RadiusHint(NONE_EXISTS, R, None, None, None, 0, f"no interpolator at any R: {why}")


def radius_hint(
    form: Any,
    y: np.ndarray,
    R: float,
    runs: dict[str, Any],
    strategy: Strategy,
    deadline: float = math.inf,
) -> RadiusHint:
    """Continuation in R from the start points of a solve that found no interpolator at R.

    Parameters
    ----------
    form : DenseForm or KernelForm
        The solve's form (:mod:`margin_solver.descent.alternating`).
    y : ndarray of shape (n_samples,)
    R : float
        The radius asked for.
    runs : dict of str to DescentRun
        The solve's runs; their final p give the directions (an infeasible start does not
        move, so its final p is its start, which the solve's starts reproduce at a larger R).
    strategy : Strategy
        ``radius_directions``, ``radius_doublings``, ``radius_bisections`` and the v-step
        engine.
    deadline : float, default=inf
        A :func:`time.perf_counter` reading (the caller's time limit) after which the
        continuation stops; the message then says so.

    Returns
    -------
    RadiusHint
        ``"every_R"``, ``"found"`` or ``"none_found"``.

    Examples
    --------
    One token each, in one dimension: sample 0 (label +1) has tokens 3 and -1, sample 1
    (label -1) tokens 1 and 1. Sample 1 forces v < 0, so sample 0 needs attention on -1:
    ``3 e^{3p} - e^{-p} < 0``, i.e. ``p < -ln(3) / 4 = -0.2747``.

    >>> from margin_solver.core.kernel import TokenGram
    >>> from margin_solver.descent.alternating import DenseForm, descend
    >>> X = np.array([[[3.0], [-1.0]], [[1.0], [1.0]]]); y = np.array([1.0, -1.0])
    >>> form = DenseForm(X)
    >>> runs = {"down": descend(form, y, np.array([-0.1]), 0.1)}
    >>> hint = radius_hint(form, y, 0.1, runs, Strategy())
    >>> hint.finding, round(hint.R_found, 3), hint.R_tried < math.log(3) / 4 < hint.R_found
    ('found', 0.275, True)
    """
    steps = 0
    zero = runs.get("zero")
    if zero is None and time.perf_counter() > deadline:
        return RadiusHint(
            NONE_FOUND,
            R,
            None,
            None,
            None,
            0,
            "continuation in R not run: the time limit stopped the solve before it",
        )
    if zero is None:  # the time limit cut the solve before its zero start
        steps += 1
        zero_feasible = evaluate_phi(form, y, form.zeros(), strategy.vstep_solver).feasible
    else:
        zero_feasible = zero.point.feasible
    if zero_feasible:
        return RadiusHint(
            EVERY_R,
            R,
            0.0,
            None,
            np.zeros(form.d),
            steps,
            "uniform attention (p = 0) interpolates, so an interpolator exists at every R; the "
            "solve stopped before it found one",
        )
    directions = _directions(form, runs, strategy.radius_directions)
    cut = False

    def feasible(radius: float, unit: np.ndarray) -> bool:
        nonlocal steps
        steps += 1
        return evaluate_phi(form, y, unit * radius, strategy.vstep_solver).feasible

    hi = lo = None
    for k in range(1, strategy.radius_doublings + 1):
        radius = R * 2.0**k
        for name, unit in directions:
            if time.perf_counter() > deadline:
                cut = True
                break
            if feasible(radius, unit):
                hi, lo, found = radius, radius / 2, (name, unit)
                break
        if hi is not None or cut:
            break
    if hi is None:
        top = R * 2.0**strategy.radius_doublings
        why = (
            "the time limit stopped it"
            if cut
            else f"{len(directions)} start directions tried up to R = {top:.4g}"
        )
        return RadiusHint(
            NONE_FOUND,
            R,
            None,
            top if directions and not cut else None,
            None,
            steps,
            f"continuation in R found no interpolator ({why}, {steps} v-steps); infeasibility "
            "is not proven for a larger R",
        )
    name, unit = found
    for _ in range(strategy.radius_bisections):
        if time.perf_counter() > deadline:
            break
        mid = math.sqrt(lo * hi)
        if feasible(mid, unit):
            hi = mid
        else:
            lo = mid
    return RadiusHint(
        FOUND,
        R,
        hi,
        lo,
        form.dense(unit * hi),
        steps,
        f"an interpolator exists at R = {hi:.6g} and above (continuation in R along start "
        f"{name!r}'s direction: the v-step interpolates at p = {hi:.6g} p_hat; none found at "
        f"R = {lo:.6g} along it; {steps} v-steps); solve again with R >= {hi:.6g} "
        "(p_found is a warm start)",
    )


def _directions(form: Any, runs: dict[str, Any], limit: int) -> list[tuple[str, np.ndarray]]:
    """Unit directions of the runs' final p (nonzero, distinct), at most ``limit``."""
    units: list[tuple[str, np.ndarray]] = []
    for name, run in runs.items():
        p = run.point.p
        length = norm(form, p)
        if not length > 0:
            continue
        unit = p / length
        if all(form.inner(unit, other) < _SAME_DIRECTION for _, other in units):
            units.append((name, unit))
        if len(units) == limit:
            break
    return units
