"""Check the benign-overfitting theorems' conditions on a dataset and predict the regime.

The conditions come from Magen et al., *Benign Overfitting in Single-Head Attention*
(arXiv:2410.07746) and the authors' reply to reviewers: the SNR threshold of order
``1/sqrt(n)`` (Theorem 3.3, the min-norm theorem, the harmful-overfitting result; reply W4),
``eta <= 1/C`` (Assumptions 3.1 and 4.1, item 4; reply Q2), at least one noisy sample (Q1),
``d = Omega(n^2)`` with log factors (Q3.1), ``T = Theta(1)`` (Q3.2) and the near-orthogonality
and norm concentration of the noise tokens that the proofs use.

**The paper's constants are not available here**: every threshold is a field of
:class:`~margin_solver.theory.constants.Constants`; verdicts are scaling-level. The rows
(:func:`_conditions`) are turned into a prediction by the rules table
(:data:`margin_solver.theory.rules.RULES`); the observation of a fitted ``(v, p)`` is set
against it here, and :mod:`margin_solver.theory.report` holds the report and its table.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from margin_solver.analysis.estimation import (
    EstimateIntervals,
    NoiseGeometry,
    SignalNoiseEstimate,
    data_measurements,
)
from margin_solver.analysis.metrics import Metrics, trusted_metrics
from margin_solver.analysis.solutions import read_solution, solution_vectors
from margin_solver.core.data import Dataset, check_model_classes, check_same_classes
from margin_solver.core.kernel import conflicting_pairs
from margin_solver.core.ooc import check_finite, is_on_disk
from margin_solver.core.progress import verbose_switch
from margin_solver.core.results import INFEASIBLE, STATUS_TABLE
from margin_solver.core.validation import InvalidInputError, check_int
from margin_solver.gd.endpoints import default_step_sizes, token_scale
from margin_solver.theory.constants import Constants, nearest_calibrated
from margin_solver.theory.report import ConditionReport, ObservedBehaviour
from margin_solver.theory.rules import (
    ASSUMPTION,
    CALIBRATION,
    COVERAGE,
    INTERPOLATION,
    REGIME,
    SOFT,
    Condition,
    Regime,
    predict,
)

__all__ = [
    "METHODS",
    "DataEvidence",
    "check_conditions",
    "conflicting_pairs",
    "data_evidence",
    "two_step_upper_kappa",
]

_REL_TOL = 1e-9

#: Methods a prediction can be made for (Theorem 3.3: two GD steps from zero; the min-norm
#: theorem: the interpolator P_R).
METHODS = ("two-step-gd", "min-norm")
#: Any other GD run (a schedule that is not two-step): no theorem covers it.
OTHER_GD = "gd"
#: Bootstrap replicates and coverage of the intervals of estimated SNR and eta.
N_BOOT, LEVEL = 200, 0.9


@dataclass(frozen=True)
class _Setting:
    """The method a prediction is for, with what it depends on."""

    method: str
    R: float | None = None
    steps: tuple[float, float] | None = None
    schedule: str | None = None

    def label(self) -> str:
        if self.method == "two-step-gd":
            b0, b1 = self.steps or (math.nan, math.nan)
            return f"two-step GD at beta0 = {b0:.4g}, beta1 = {b1:.4g}"
        if self.method == "min-norm":
            if self.R is None:
                return "the min-norm interpolator at large R (hard token selection)"
            return f"the min-norm interpolator at R = {self.R:.4g}"
        return f"GD with the {self.schedule!r} schedule"


@dataclass(frozen=True)
class _Solution:
    """What a passed solution says about how it was found."""

    vectors: tuple[np.ndarray, np.ndarray] | None
    method: str | None
    R: float | None
    steps: tuple[float, float] | None
    schedule: str | None
    status: str | None
    success: bool | None
    certified: bool | None


@dataclass(frozen=True, eq=False)  # compared by identity: it holds arrays
class DataEvidence:
    """What the checker measures on a training set whatever the method.

    Made by :func:`data_evidence`; passed to :func:`check_conditions` as ``evidence=`` to
    check several methods on one dataset without measuring it again (the sweep does so per
    data point).

    Attributes
    ----------
    dataset : Dataset
        The training set measured (:func:`check_conditions` refuses evidence of another).
    constants : Constants
        The constants it was measured with (their seed fixes the bootstrap and subsampling).
    estimates : SignalNoiseEstimate
        Signal positions, carried signals, SNR and eta estimates.
    intervals : EstimateIntervals
        Bootstrap intervals of the estimated SNR and eta.
    noise : NoiseGeometry
        Overlaps, norms and cross-talk of the noise tokens.
    conflicts : list of (int, int)
        Samples with the same tokens and opposite labels (:func:`conflicting_pairs`).
    """

    dataset: Dataset = field(repr=False)
    constants: Constants
    estimates: SignalNoiseEstimate
    intervals: EstimateIntervals
    noise: NoiseGeometry
    conflicts: list[tuple[int, int]]


def data_evidence(dataset: Dataset, constants: Constants | None = None) -> DataEvidence:
    """Measure the method-independent part of :func:`check_conditions` on ``dataset``.

    Parameters
    ----------
    dataset : Dataset
        Training data.
    constants : Constants, optional
        Thresholds and seed; package defaults otherwise.

    Returns
    -------
    DataEvidence

    Raises
    ------
    InvalidInputError
        ``dataset`` is not a Dataset or ``constants`` not a Constants.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> ds = PaperDistribution(d=1600, snr=0.5, eta=0.1).sample(40, seed=2)  # d = n^2
    >>> evidence = data_evidence(ds)
    >>> [str(check_conditions(ds, method=m, evidence=evidence).predicted_regime)
    ...  for m in ("min-norm", "two-step-gd")]
    ['benign', 'no interpolation']
    """
    if not isinstance(dataset, Dataset):
        raise InvalidInputError(f"dataset must be a Dataset, got {type(dataset).__name__}.")
    c = _constants(constants)
    # tokens on disk are read in blocks, never copied whole; the first pass (for their
    # scale) refuses NaN and inf, which a Dataset in memory refuses when it is made
    est, intervals, noise = data_measurements(
        dataset, seed=c.seed, n_boot=N_BOOT, level=LEVEL, max_tokens=c.max_tokens
    )
    return DataEvidence(
        dataset=dataset,
        constants=c,
        estimates=est,
        intervals=intervals,
        noise=noise,
        conflicts=conflicting_pairs(dataset.X, dataset.y),
    )


def _constants(constants: Any) -> Constants:
    c = constants if constants is not None else Constants()
    if not isinstance(c, Constants):
        raise InvalidInputError(f"constants must be a Constants, got {type(c).__name__}.")
    return c


def _evidence_constants(evidence: Any, dataset: Dataset, constants: Any) -> Constants:
    """The constants of a check given ``evidence``: its own, which ``constants`` must equal."""
    if not isinstance(evidence, DataEvidence):
        raise InvalidInputError(f"evidence must be a DataEvidence, got {type(evidence).__name__}.")
    if evidence.dataset is not dataset:
        raise InvalidInputError(
            "evidence was measured on another dataset; make it with data_evidence(dataset)."
        )
    if constants is not None and _constants(constants) != evidence.constants:
        raise InvalidInputError(
            "evidence was measured with other constants than those given; make it with "
            "data_evidence(dataset, constants)."
        )
    return evidence.constants


@verbose_switch
def check_conditions(
    dataset: Dataset,
    solution: Any = None,
    test: Dataset | None = None,
    constants: Constants | None = None,
    *,
    method: str | None = None,
    R: float | None = None,
    steps: Any = None,
    heads: int = 1,
    evidence: DataEvidence | None = None,
) -> ConditionReport:
    """Check the theorems' conditions on ``dataset`` for one method and compare with observation.

    Parameters
    ----------
    dataset : Dataset
        Training data. Generating parameters (``params["snr"]``, ``params["eta"]``) are used
        when present; otherwise SNR and eta are estimated (rows flagged ``estimated``, with
        bootstrap intervals; a row whose interval straddles its threshold is undecided).
    solution : object with ``v`` and ``p``, mapping, or JSON path, optional
        A fitted model; enables the observed behaviour. A GD result (or its JSON) sets the
        method ("two-step-gd" with its step sizes for the two-step schedule); a min-norm
        result (or its JSON) sets "min-norm" with its R. Its ``status`` / ``success`` /
        ``certified`` decide whether the observation can test the prediction.
    test : Dataset, optional
        Test set from the same distribution; enables the observed generalisation.
    constants : Constants, optional
        Thresholds; package defaults otherwise (not the paper's constants).
    method : {"two-step-gd", "min-norm"}, optional
        The method the prediction is for. Default: inferred from ``solution``, else
        "min-norm".
    R : float, optional
        Min-norm's attention radius (default: the solution's; else the hard-selection limit,
        R -> infinity).
    steps : (float, float), optional
        Two-step GD's ``(beta0, beta1)`` (default: the solution's; else
        :func:`margin_solver.gd.endpoints.default_step_sizes`).
    heads : int, default=1
        Attention heads H of the model the prediction is for. The theorems cover one head:
        for H > 1 the rows are the conditions of each head's own single-head problem (the same
        for every head, being properties of the tokens and labels) and the predicted regime
        is "outside the theory", since no theorem covers a sum of heads (docs/theory.md,
        "Multi-head attention"). A multi-head ``solution`` cannot be observed here
        (:func:`margin_solver.analysis.compare.compare` reports it).
    evidence : DataEvidence, optional
        :func:`data_evidence` of this ``dataset`` (the same object) with these ``constants``:
        its measurements are used instead of being made again; the report is the same.

    Returns
    -------
    ConditionReport

    Raises
    ------
    InvalidInputError
        ``dataset`` or ``test`` is not a Dataset, the test dimension differs, the solution
        is malformed, ``method``/``R``/``steps`` are invalid or contradict the solution, or
        ``evidence`` was measured on another dataset or with other constants.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> ds = PaperDistribution(d=1600, snr=0.5, eta=0.1).sample(40, seed=2)  # kappa = 10, d = n^2
    >>> str(check_conditions(ds).predicted_regime)
    'benign'
    >>> str(check_conditions(ds, method="two-step-gd").predicted_regime)
    'no interpolation'
    """
    if not isinstance(dataset, Dataset):
        raise InvalidInputError(f"dataset must be a Dataset, got {type(dataset).__name__}.")
    if test is not None and not isinstance(test, Dataset):
        raise InvalidInputError(f"test must be a Dataset, got {type(test).__name__}.")
    if test is not None and test.d != dataset.d:
        raise InvalidInputError(f"test set has d={test.d} but the training set has d={dataset.d}.")
    if test is not None and is_on_disk(test.X):
        check_finite(test.X)  # in blocks; its metrics read it in blocks too
    c = (
        _constants(constants)
        if evidence is None
        else _evidence_constants(evidence, dataset, constants)
    )
    heads = check_int(heads, "heads", 1)
    if heads > 1 and solution is not None:
        raise InvalidInputError(
            f"check_conditions observes single-head solutions only (heads={heads}); compare a "
            "multi-head model with margin_solver.analysis.compare.compare."
        )
    if test is not None:
        check_same_classes(test, dataset)
    sol = None if solution is None else _read_solution(solution, dataset)
    setting = _setting(dataset, sol, method, R, steps)

    evidence = evidence or data_evidence(dataset, c)
    est, ci, geo, conflicts = (
        evidence.estimates,
        evidence.intervals,
        evidence.noise,
        evidence.conflicts,
    )
    rows = _conditions(dataset, est, ci, geo, c, setting)
    regime, reason, snr_regime, _ = predict(rows, conflicts, c, setting.method)
    if heads > 1 and not conflicts:  # identical samples with both labels: no heads can help
        regime, reason = (
            Regime.OUTSIDE,
            (
                f"the theorems cover one attention head; with H = {heads} heads every row holds or "
                f"fails for each head's own single-head problem alike (the rows are properties of "
                f"the tokens and labels; single-head prediction: {regime}: {reason}), but no "
                "theorem covers the sum of heads"
            ),
        )
    warnings = [f"{r.name}: {r.note}" for r in rows if r.role == SOFT and r.holds is False]
    warnings += [
        f"{r.name}: {r.note}" for r in rows if r.role == SOFT and r.holds is None and r.note
    ]
    if geo.subsampled:
        warnings.append(
            f"noise Gram computed on {geo.n_gram_tokens} of {geo.n_tokens} noise tokens "
            f"(n T > max_tokens = {c.max_tokens}); the max overlap is a lower estimate."
        )
    unreliable = _unreliable(est)
    if unreliable:
        warnings.append(
            f"{unreliable}: the estimates may be unreliable; pass signal_index / clean_y."
        )
    observed = None
    if sol is not None:
        observed = _observe(dataset, est, sol, setting, test, _eta_value(dataset, est)[0], c)
    elif test is not None:
        warnings.append("a test set was given without a solution: nothing to observe on it.")
    label = setting.label() + (f", {heads} heads" if heads > 1 else "")
    verdict = _verdict(regime, reason, snr_regime, observed, label)
    message = f"predicted regime for {label}: {regime}" + (
        f"; {verdict}" if observed is not None else ""
    )
    return ConditionReport(
        message=message,
        predicted_regime=regime,
        regime_reason=reason,
        snr_regime=snr_regime,
        n=dataset.n,
        T=dataset.T,
        d=dataset.d,
        conditions=rows,
        estimates=est,
        noise=geo,
        observed=observed,
        verdict=verdict,
        warnings=warnings,
        constants=c,
        conflicting_pairs=conflicts,
        method=setting.method,
        method_label=label,
        R=setting.R,
        steps=setting.steps,
        intervals=ci,
        classes=dataset.classes,
    )


def two_step_upper_kappa(eta: float) -> float | None:
    """Largest ``kappa`` at which two GD steps still send noisy samples to their noise token.

    From the score gaps after step 2 (docs/theory.md, "Step 2 and the default step sizes";
    T = 2, orthogonal signals, small first step): with ``a = 1 - 2 eta`` the noisy samples'
    gap ``1 + kappa (a + 1) / 2 - a^2 kappa^2 / 4`` is positive below the root
    ``kappa_up = ((a + 1) + sqrt((a + 1)^2 + 4 a^2)) / a^2``. None when ``eta >= 1/2``.

    Examples
    --------
    >>> round(two_step_upper_kappa(0.1), 2)
    6.58
    """
    a = 1.0 - 2.0 * eta
    if not a > 0:
        return None
    return ((a + 1) + math.sqrt((a + 1) ** 2 + 4 * a * a)) / (a * a)


def _get(solution: Any, key: str) -> Any:
    if isinstance(solution, Mapping):
        return solution.get(key)
    return getattr(solution, key, None)


def _read_solution(solution: Any, dataset: Dataset) -> _Solution:
    """Vectors (None when the result carries no point) and how the solution was found; a
    solution fitted with other labels than ``dataset``'s is refused."""
    d = dataset.d
    meta: Any = solution
    if isinstance(solution, (str, os.PathLike)):
        try:
            vectors = read_solution(solution, d)  # one-line errors for a bad file
        except InvalidInputError:
            meta = _load_json(solution)
            if not _no_point(meta):
                raise
            vectors = None
        else:
            meta = _load_json(solution)
    else:
        vectors = None if _no_point(meta) else solution_vectors(solution, d)
    if meta is not None:
        check_model_classes(meta, dataset)
    status = _get(meta, "status")
    status = status if isinstance(status, str) else None
    success = _get(meta, "success")
    if not isinstance(success, bool):
        success = STATUS_TABLE[status][0] if status in STATUS_TABLE else None
    certified = _get(meta, "certified")
    certified = certified if isinstance(certified, bool) else None
    schedule, sizes, radius = _get(meta, "schedule"), _get(meta, "step_sizes"), _get(meta, "R")
    found = R_ = steps = None
    if isinstance(schedule, str) and sizes is not None:
        found = "two-step-gd" if schedule == "two-step" else OTHER_GD
        if found == "two-step-gd":
            steps = _steps(sizes, "the solution's step_sizes")
    elif (
        status is not None
        and radius is not None
        and (_get(meta, "lower_bound") is not None or "lower_bound" in _keys(meta))
    ):
        found, R_ = "min-norm", _radius(radius, "the solution's R")
    return _Solution(vectors, found, R_, steps, schedule, status, success, certified)


def _load_json(path: str | os.PathLike) -> Any:
    """The file's JSON value, or None when it cannot be read (read_solution reports why)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None


def _no_point(meta: Any) -> bool:
    """A solver result that says how it ended but carries no point (v and p None)."""
    return (
        isinstance(_get(meta, "status"), str)
        and _get(meta, "v") is None
        and _get(meta, "p") is None
    )


def _keys(meta: Any) -> set[str]:
    if isinstance(meta, Mapping):
        return set(map(str, meta))
    return set(getattr(meta, "__dataclass_fields__", {})) | set(getattr(meta, "__dict__", {}))


def _radius(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise InvalidInputError(f"{name} must be a positive number, got {value!r}.")
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise InvalidInputError(f"{name} must be a positive finite number, got {value!r}.")
    return value


def _steps(value: Any, name: str) -> tuple[float, float]:
    try:
        items = list(value)
    except TypeError:
        raise InvalidInputError(
            f"{name} must be two step sizes (beta0, beta1), got {value!r}."
        ) from None
    if len(items) != 2:
        raise InvalidInputError(f"{name} must be two step sizes (beta0, beta1), got {value!r}.")
    b0, b1 = (_radius(x, name) for x in items)
    return b0, b1


def _setting(ds: Dataset, sol: _Solution | None, method: Any, R: Any, steps: Any) -> _Setting:
    if method is not None and method not in METHODS:
        raise InvalidInputError(f"method must be one of {METHODS}, got {method!r}.")
    found = None if sol is None else sol.method
    if method is not None and found is not None and method != found:
        raise InvalidInputError(
            f"method={method!r} but the solution is a {found!r} result; drop method= or pass "
            "plain v and p."
        )
    chosen = method or found or "min-norm"
    R = None if R is None else _radius(R, "R")
    steps = None if steps is None else _steps(steps, "steps")
    if chosen != "min-norm" and R is not None:
        raise InvalidInputError(f"R applies to method 'min-norm', not {chosen!r}.")
    if chosen != "two-step-gd" and steps is not None:
        raise InvalidInputError(f"steps apply to method 'two-step-gd', not {chosen!r}.")
    if sol is not None and sol.R is not None:
        if R is not None and not math.isclose(R, sol.R, rel_tol=1e-9):
            raise InvalidInputError(f"R={R:g} but the solution was solved at R={sol.R:g}.")
        R = sol.R
    if sol is not None and sol.steps is not None:
        if steps is not None and not np.allclose(steps, sol.steps, rtol=1e-9, atol=0):
            raise InvalidInputError(f"steps={steps} but the solution used {sol.steps}.")
        steps = sol.steps
    if chosen == "two-step-gd" and steps is None:
        steps = tuple(float(b) for b in default_step_sizes(ds.X))
    return _Setting(chosen, R, steps, None if sol is None else sol.schedule)


def _known(dataset: Dataset, key: str) -> float | None:
    value = dataset.params.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _eta_value(dataset: Dataset, est: SignalNoiseEstimate) -> tuple[float, bool]:
    """``(eta, estimated)``: the generating value when known, else the measured flip share."""
    known = _known(dataset, "eta")
    if known is not None:
        return known, False
    return est.eta, est.estimated_classes


def _unreliable(est: SignalNoiseEstimate) -> str:
    """Why the estimated positions or carried signals cannot be trusted ("" when they can)."""
    reasons = []
    if est.estimated_index and est.signal_index_margin is not None and est.signal_index_margin < 2:
        reasons.append(
            f"signal tokens hard to identify (median commonality ratio "
            f"{est.signal_index_margin:.3g} < 2)"
        )
    if est.estimated_classes and est.class_separation is not None and est.class_separation < 4:
        reasons.append(
            f"signal tokens split into classes with separation {est.class_separation:.3g} < 4 "
            "standard deviations"
        )
    return "; ".join(reasons)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _row(value: float | None, threshold: float | None, **fields: Any) -> Condition:
    return Condition(value=_finite(value), threshold=_finite(threshold), **fields)


# A relative slack keeps values equal to a threshold up to rounding (kappa = 1.0000000002).
def _at_most(value: float | None, threshold: float) -> bool | None:
    return None if value is None else bool(value <= threshold * (1 + _REL_TOL))


def _at_least(value: float | None, threshold: float) -> bool | None:
    return None if value is None else bool(value >= threshold * (1 - _REL_TOL))


def _decide(
    value: float | None,
    threshold: float | None,
    interval: tuple[float, float] | None,
    unreliable: str,
    at_least: bool,
) -> tuple[bool | None, str]:
    """``(holds, why undecided)`` of ``value >= threshold`` (or ``<=``) for a possibly
    estimated value: decided only when the whole interval lies on one side."""
    if value is None or threshold is None:
        return None, ""
    if unreliable:
        return None, f"cannot tell: {unreliable}"
    test = _at_least if at_least else _at_most
    if interval is None or not all(map(math.isfinite, interval)):
        return test(value, threshold), ""
    lo, hi = test(interval[0], threshold), test(interval[1], threshold)
    if lo == hi:
        return lo, ""
    return None, (
        f"cannot tell: its {LEVEL:.0%} bootstrap interval [{interval[0]:.3g}, {interval[1]:.3g}] "
        f"straddles {threshold:.3g}"
    )


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _conditions(
    ds: Dataset,
    est: SignalNoiseEstimate,
    ci: EstimateIntervals,
    geo: NoiseGeometry,
    c: Constants,
    setting: _Setting,
) -> list[Condition]:
    n, T, d = ds.n, ds.T, ds.d
    known_snr = _known(ds, "snr")
    snr = known_snr if known_snr is not None else _finite(est.snr)
    kappa = None if snr is None else n * snr**2
    kappa_ci = None
    unreliable = _unreliable(est)
    if known_snr is None and all(map(math.isfinite, ci.snr)):
        kappa_ci = (n * ci.snr[0] ** 2, n * ci.snr[1] ** 2)
    snr_unreliable = unreliable if known_snr is None else ""
    snr_note = ""
    if snr is not None:
        snr_note = f"SNR = {snr:.4g} vs 1/sqrt(n) = {1 / math.sqrt(n):.4g}"
        if known_snr is not None:
            snr_note += f" (generating; measured {est.snr:.4g})"
    eta, eta_est = _eta_value(ds, est)
    eta_ci = ci.eta if eta_est else None
    eta_unreliable = unreliable if eta_est else ""
    noisy_count = int(ds.flipped.sum()) if ds.flipped is not None else est.n_noisy
    dim_bound = c.dim_C * n**2 * math.log(max(n / c.delta, 1.0))
    n_pairs = 2 * geo.n_tokens * max(est.signal_rank, 1)
    sn_bound = c.signal_noise_C * math.sqrt(2 * math.log(max(2 * n_pairs, 2)) / d)
    gd = setting.method == "two-step-gd"
    nu2 = token_scale(ds.X)
    harmful_c, benign_c, upper_C, range_row = _thresholds(ds, c, setting, nu2)
    benign_holds, benign_why = _decide(kappa, benign_c, kappa_ci, snr_unreliable, True)
    harmful_holds, harmful_why = _decide(kappa, harmful_c, kappa_ci, snr_unreliable, False)
    eta_holds, eta_why = _decide(eta, 1 / c.eta_C, eta_ci, eta_unreliable, False)
    noisy_holds = noisy_count >= 1
    noisy_why = ""
    if ds.flipped is None and eta_unreliable:
        noisy_holds, noisy_why = None, f"cannot tell: {eta_unreliable}"
    # |cos| <= 1 always: a bound at or above 1 cannot fail, so the row does not bind there.
    sn_binds = sn_bound < 1
    # Geometry rows measured at unreliable signal positions decide nothing.
    index_doubt = ""
    if est.estimated_index and est.signal_index_margin is not None and est.signal_index_margin < 2:
        index_doubt = (
            "cannot tell: signal positions unreliable "
            f"(commonality ratio {est.signal_index_margin:.3g} < 2)"
        )
    norm_holds = None if index_doubt else _at_most(geo.norm_deviation, c.norm_tol)
    orth_holds, orth_why = _orthogonality(geo, c.orth_C / n, index_doubt)
    sn_holds = None if index_doubt or not sn_binds else _at_most(geo.signal_cosine, sn_bound)
    where = "Thm 3.3" if gd else "min-norm theorem"
    rows = [
        _row(
            T,
            2,
            name="tokens_per_sample",
            tag="model, W3",
            source="authors' reply, W3 (one signal token and several noise tokens)",
            formula="T >= 2",
            constant="-",
            holds=T >= 2,
            estimated=False,
            role=ASSUMPTION,
            note="" if T >= 2 else "one token per sample: no noise token, no token selection",
        ),
        _row(
            T,
            c.T_max,
            name="T_bounded",
            tag="Q3.2",
            source="authors' reply, Q3.2 ('we fix T = Theta(1)')",
            formula="T <= T_max",
            constant=f"T_max = {c.T_max}",
            holds=c.T_max >= T,
            estimated=False,
            role=SOFT,
            note=f"T = {T} is large; the analysis fixes T = Theta(1) and softmax may pick "
            "high-scoring noise tokens",
        ),
        _row(
            kappa,
            benign_c,
            name="snr_benign",
            tag=where,
            source=f"the paper ({where}); authors' reply, Q3 (SNR threshold Theta(1/sqrt(n)))",
            formula="kappa = n SNR^2 >= C_benign",
            constant=f"C_benign = {benign_c:g} ({setting.method})",
            holds=benign_holds,
            estimated=known_snr is None,
            role=REGIME,
            note=_join(snr_note, benign_why),
            interval=kappa_ci,
        ),
        _row(
            kappa,
            harmful_c,
            name="snr_harmful",
            tag="W4",
            source="authors' reply, W4 (harmful overfitting when SNR = o(1/sqrt(n)))",
            formula="kappa = n SNR^2 <= c_harmful",
            constant=f"c_harmful = {harmful_c:g} ({setting.method})",
            holds=harmful_holds,
            estimated=known_snr is None,
            role=REGIME,
            note=_join(snr_note, harmful_why),
            interval=kappa_ci,
        ),
        _row(
            eta,
            1 / c.eta_C,
            name="label_noise_rate",
            tag="Asm 3.1/4.1 (4), Q2",
            source="the paper (Assumptions 3.1 and 4.1, item 4); authors' reply, Q2",
            formula="eta <= 1/C",
            constant=f"C = {c.eta_C:g}",
            holds=eta_holds,
            estimated=eta_est,
            role=ASSUMPTION,
            note=_join(
                "share of labels differing from the carried signal" if eta_est else "", eta_why
            ),
            interval=eta_ci,
        ),
        _row(
            noisy_count,
            1,
            name="noisy_samples",
            tag="Q1",
            source="authors' reply, Q1 (at least one noisy sample)",
            formula="#{i : y_i != y~_i} >= 1",
            constant="-",
            holds=noisy_holds,
            estimated=ds.flipped is None,
            role=ASSUMPTION,
            note=_join(
                f"n eta = {n * eta:.3g} (Q1: noisy samples exist whp when eta >> 1/n)", noisy_why
            ),
        ),
        _row(
            d,
            dim_bound,
            name="dimension_theorem",
            tag="Q3.1",
            source="authors' reply, Q3.1 (Omega(n^2) dimension requirement; log factors: "
            "docs/theory.md, Theorem conditions)",
            formula="d >= C_d n^2 log(n/delta)",
            constant=f"C_d = {c.dim_C:g}, delta = {c.delta:g}",
            holds=d >= dim_bound,
            estimated=False,
            role=SOFT,
            note="d below the theorems' sufficient dimension; the authors call it loose (Q3.1)",
        ),
        _row(
            d,
            c.dim_experiment * n,
            name="dimension_experiment",
            tag="Q3.1 (Fig. 4)",
            source="authors' reply, Q3.1 (benign overfitting observed for d = 2n)",
            formula="d >= C_exp n",
            constant=f"C_exp = {c.dim_experiment:g}",
            holds=d >= c.dim_experiment * n,
            estimated=False,
            role=SOFT,
            note="d below the smallest dimension where the authors observed benign overfitting",
        ),
        _row(
            geo.max_overlap,
            c.orth_C / n,
            name="noise_orthogonality",
            tag="Q3.1, proofs",
            source="authors' reply, Q3.1 (sufficient separation between token inner products)",
            formula="max_{a!=b} |<xi_a, xi_b>| / ||xi_a||^2 <= C_orth / n",
            constant=f"C_orth = {c.orth_C:g}",
            holds=orth_holds,
            estimated=est.estimated_index,
            role=SOFT,
            note=orth_why
            or "noise tokens not near-orthogonal at the n-sample scale the proofs use "
            "(d ~ n^2 log n)",
        ),
        _row(
            geo.norm_deviation,
            c.norm_tol,
            name="noise_norm_concentration",
            tag="proofs",
            source="docs/theory.md, Theorem conditions (noise-norm concentration the proofs use)",
            formula="max_a | ||xi_a||^2 / mean ||xi||^2 - 1 | <= C_norm",
            constant=f"C_norm = {c.norm_tol:g}",
            holds=norm_holds,
            estimated=est.estimated_index,
            role=ASSUMPTION,
            note=index_doubt,
        ),
        _row(
            geo.signal_cosine,
            sn_bound,
            name="signal_noise_orthogonality",
            tag="model, W3",
            source="authors' reply, W3 (the noise tokens are orthogonal to the signal)",
            formula="max |cos(xi, mu_+-)| <= C_sn sqrt(2 log(2 N_pairs) / d)",
            constant=f"C_sn = {c.signal_noise_C:g}",
            holds=sn_holds,
            estimated=est.estimated_index or est.estimated_classes,
            role=ASSUMPTION if sn_binds else SOFT,
            note=_join("mu_+- are the class means of the signal tokens", index_doubt)
            if sn_binds
            else (
                f"not checked: at d = {d} the bound {sn_bound:.3g} >= 1 >= every |cos|, so the "
                "row cannot fail (it binds from d > 2 C_sn^2 log(2 N_pairs))"
            ),
        ),
    ]
    rows += [] if range_row is None else [range_row]
    return rows + _method_rows(
        ds, eta, kappa, kappa_ci, snr_unreliable, geo, est, c, setting, nu2, upper_C
    )


def _thresholds(
    ds: Dataset, c: Constants, setting: _Setting, nu2: float
) -> tuple[float, float, float, Condition | None]:
    """(c_harmful, C_benign, C_up, calibrated-range row) of the check's method.

    With a calibration table (``c.table``) the thresholds are those of the method's
    entry nearest this data's ``d / n^2``, T (and min-norm's ``R nu``), and the row says
    whether the data lie in the calibrated range; without one, the threshold fields of ``c``
    as given and no row.
    """
    gd = setting.method == "two-step-gd"
    fixed = (
        c.gd_kappa_harmful if gd else c.kappa_harmful,
        c.gd_kappa_benign if gd else c.kappa_benign,
        c.gd_upper_C,
    )
    table = c.table
    if not table:
        return (*fixed, None)
    ratio = ds.d / ds.n**2
    # Other GD schedules show the min-norm interpolator's SNR side (at large R).
    method = "two-step-gd" if gd else "min-norm"
    R_scale = None if setting.R is None or method != "min-norm" else setting.R * math.sqrt(nu2)
    entry, why = nearest_calibrated(table, method, ratio, ds.T, R_scale)
    ratios = sorted({e.ratio for e in table if e.method == method})
    Ts = sorted({e.T for e in table if e.method == method})
    span = (
        f"calibrated for {method}: d / n^2 {ratios[0]:g}-{ratios[-1]:g}, T {Ts[0]}-{Ts[-1]}"
        if ratios
        else f"no calibration for {method}"
    )
    row = _row(
        ratio,
        None,
        name="calibrated_range",
        tag="calibration",
        source="docs/theory.md, Per-method predictions (thresholds per d / n^2 and T, from "
        "the check-calibration study)",
        formula="d / n^2, T (and R nu) within the calibrated range",
        constant=span,
        holds=entry is not None,
        estimated=False,
        role=CALIBRATION,
        note=(
            f"thresholds of the entry at d / n^2 = {entry.ratio:g}, T = {entry.T}"
            + (f", R nu = {entry.R_scale:g}" if entry.R_scale else "")
            if entry is not None
            else f"cannot tell: outside the calibrated range ({why})"
        ),
    )
    if entry is None:
        return (*fixed, row)
    upper = entry.upper_C if entry.upper_C is not None else c.gd_upper_C
    return (entry.kappa_harmful, entry.kappa_benign, upper, row)


def _orthogonality(geo: NoiseGeometry, bound: float, index_doubt: str) -> tuple[bool | None, str]:
    """``(holds, note)`` of the noise-orthogonality row. At reliable signal positions the
    measured overlap decides; at unreliable ones only a verdict that holds whatever token of
    each sample is the signal: fails when ``overlap_floor`` exceeds the bound, holds when
    ``overlap_ceiling`` (every pair of tokens, not subsampled) is within it."""
    if not index_doubt:
        return _at_most(geo.max_overlap, bound), ""
    floor, ceiling = geo.overlap_floor, geo.overlap_ceiling
    if floor is not None and not _at_most(floor, bound):
        return False, (
            f"fails whatever token of each sample is the signal token: two samples share "
            f"overlaps >= {floor:.3g} > {bound:.3g} between two pairs of tokens (signal "
            "positions unreliable, so the verdict does not use them)"
        )
    if ceiling is not None and not geo.subsampled and _at_most(ceiling, bound):
        return True, (
            f"holds whatever token of each sample is the signal token: every pair of tokens "
            f"overlaps <= {ceiling:.3g}"
        )
    return None, index_doubt


def _method_rows(
    ds: Dataset,
    eta: float,
    kappa: float | None,
    kappa_ci: tuple[float, float] | None,
    snr_unreliable: str,
    geo: NoiseGeometry,
    est: SignalNoiseEstimate,
    c: Constants,
    setting: _Setting,
    nu2: float,
    upper_C: float,
) -> list[Condition]:
    n, T = ds.n, ds.T
    if setting.method == "min-norm":
        if setting.R is None:
            value, holds = None, True
            note = "R not given: R = infinity (the hard-selection limit), so the condition holds"
        else:
            value = setting.R * math.sqrt(nu2) / math.sqrt(n)
            holds = bool(value >= c.R_select)
            note = (
                f"R nu / sqrt(n) = {value:.3g}: score gaps large enough for token selection"
                if holds
                else f"R = {setting.R:.3g} is too small for token selection (R nu / sqrt(n) = "
                f"{value:.3g} < {c.R_select:g}): attention stays soft and P_R is near the "
                "uniform-attention SVM, which the theorem does not cover"
            )
        row = _row(
            value,
            c.R_select,
            name="attention_radius",
            tag="min-norm",
            source="the paper (min-norm theorem: token selection); docs/theory.md, Theorem "
            "conditions",
            formula="R nu / sqrt(n) >= C_R",
            constant=f"C_R = {c.R_select:g}",
            holds=holds,
            estimated=False,
            role=COVERAGE,
            note=note,
        )
        # _row maps non-finite values to None ("unknown"); without R the value is known to be
        # infinite, and the table shows it so (the JSON, strict, carries null and the note).
        return [row if setting.R is not None else replace(row, value=math.inf)]
    if setting.method == OTHER_GD:
        return [
            _row(
                None,
                None,
                name="method_covered",
                tag="Thm 3.3",
                source="the paper (Theorem 3.3: two GD steps from zero)",
                formula="method in {two-step GD, min-norm}",
                constant="-",
                holds=False,
                estimated=False,
                role=COVERAGE,
                note=f"no theorem covers GD with the {setting.schedule!r} schedule; the SNR side "
                "shows the min-norm interpolator's prediction (authors' reply, W2 and Q1: GD with "
                "small weight decay tends to it)",
            )
        ]
    b0, b1 = setting.steps  # type: ignore[misc]
    c0 = b0 * nu2 / (2 * n * T)
    gap = b1 * c0 * nu2 / (2 * n * T) / math.log(max(n, 2))
    upper = two_step_upper_kappa(eta)
    upper_c = None if upper is None else upper_C * upper
    upper_holds, upper_why = _decide(kappa, upper_c, kappa_ci, snr_unreliable, False)
    return [
        _row(
            c0,
            c.gd_first_step_max,
            name="first_step_modest",
            tag="Thm 3.3",
            source="the paper (Theorem 3.3: a modest first step); docs/theory.md, Step 2 and the "
            "default step sizes",
            formula="c0 = beta0 nu^2 / (2 n T) <= C_c0",
            constant=f"C_c0 = {c.gd_first_step_max:g}",
            holds=_at_most(c0, c.gd_first_step_max),
            estimated=False,
            role=COVERAGE,
            note=f"beta0 = {b0:.4g} gives own-token value c0 = {c0:.3g} after step 1"
            + (
                ""
                if c0 <= c.gd_first_step_max
                else ": v_1 already fits the clean samples and step 2 is driven by the noisy ones"
            ),
        ),
        _row(
            gap,
            c.gd_gap_min,
            name="second_step_large",
            tag="Thm 3.3",
            source="the paper (Theorem 3.3: a large second step); docs/theory.md, Step 2 and the "
            "default step sizes",
            formula="G / log n = beta1 c0 nu^2 / (2 n T log n) >= C_G",
            constant=f"C_G = {c.gd_gap_min:g}",
            holds=_at_least(gap, c.gd_gap_min),
            estimated=False,
            role=COVERAGE,
            note=f"beta1 = {b1:.4g}: score gaps after step 2 of {gap:.3g} log n"
            + ("" if gap >= c.gd_gap_min else ", too small to select one token per sample"),
        ),
        _row(
            kappa,
            upper_c,
            name="snr_two_step_upper",
            tag="Thm 3.3",
            source="the paper (Theorem 3.3, upper limit on the SNR); docs/theory.md, Step 2 and "
            "the default step sizes",
            formula="kappa <= C_up kappa_up(eta)",
            constant=f"C_up = {upper_C:g}",
            holds=upper_holds,
            estimated=kappa_ci is not None,
            role=INTERPOLATION,
            note=_join(
                "SNR above the upper limit of two steps: after step 2 the noisy samples attend to "
                "the signal, so two steps cannot fit the flipped labels",
                upper_why,
            ),
            interval=kappa_ci,
        ),
        _row(
            geo.median_crosstalk,
            c.crosstalk_max,
            name="noise_crosstalk",
            tag="heuristic",
            source="docs/theory.md, Theorem conditions (why the cross-talk rule: a package "
            "heuristic for two-step GD)",
            formula="median_a sqrt(sum_b <xi_a, xi_b>^2) / ||xi_a||^2 <= C_xt",
            constant=f"C_xt = {c.crosstalk_max:g}",
            holds=_at_most(geo.median_crosstalk, c.crosstalk_max),
            estimated=est.estimated_index,
            role=INTERPOLATION,
            note="noise tokens too correlated for two-step GD to memorise the noisy samples "
            "(~ sqrt(n (T-1) / d): a noisy sample's own noise token must outweigh the others)",
        ),
    ]


def _metrics_dict(m: Metrics) -> dict[str, Any]:
    out = m.to_dict()
    out.pop("selected_token")
    return out


def _trust(sol: _Solution, setting: _Setting, interpolates: bool | None) -> tuple[str, str]:
    """How far the observation can test the prediction: ``(trust, why)``.

    "failed": the optimiser failed (no point, diverged, or a GD run or min-norm point that
    does not fit the training set); "uncertified": a point not proved to be the min-norm
    interpolator; "proof": certified infeasible; "ok": a successful run of the method itself
    (GD) or a certified min-norm point; "unknown": plain v and p.
    """
    status = sol.status
    said = f"status {status!r}" if status else "no status"
    if status is None and sol.method is None:
        return "unknown", "a plain (v, p): how it was found is unknown"
    if sol.vectors is None:
        if status == INFEASIBLE:
            return "proof", "certified infeasible at this R"
        return "failed", f"the solver returned no point ({said}, success {sol.success})"
    if setting.method in ("two-step-gd", OTHER_GD):
        if sol.success is False:
            return "failed", f"{said}, success False"
        if not interpolates:
            return "failed", f"GD did not fit the training set ({said})"
        return "ok", f"{said}"
    if not interpolates:
        return "failed", f"the returned point does not fit the training set ({said})"
    if sol.certified:
        return "ok", f"{said}, certified"
    return "uncertified", f"{said}, certified {sol.certified}: not proved to be the min-norm point"


def _observe(
    ds: Dataset,
    est: SignalNoiseEstimate,
    sol: _Solution,
    setting: _Setting,
    test: Dataset | None,
    eta: float,
    c: Constants,
) -> ObservedBehaviour:
    if sol.vectors is None:
        trust, why = _trust(sol, setting, None)
        regime = Regime.NO_INTERPOLATION if trust == "proof" else None
        return ObservedBehaviour(
            interpolates=False,
            train=None,
            attention_estimated=False,
            test=None,
            eta=eta,
            clean_error=None,
            clean_error_estimated=False,
            regime=regime,
            reason=why,
            status=sol.status,
            success=sol.success,
            certified=sol.certified,
            trust=trust,
        )
    v, p = sol.vectors
    # Attention split by clean/noisy needs signal positions and clean labels: the estimated
    # ones stand in where the dataset lacks them.
    train = trusted_metrics(v, p, ds, est.signal_class, est.signal_index)
    interpolates = train.min_margin > 0
    trust, why = _trust(sol, setting, bool(interpolates))
    attention_estimated = est.estimated_index or est.estimated_classes
    test_metrics = clean_error = None
    clean_estimated = False
    if test is not None:
        tm = trusted_metrics(v, p, test)
        test_metrics = _metrics_dict(tm)
        if tm.error_clean is not None:
            clean_error = tm.error_clean
        elif eta < 0.5:
            clean_error = max(0.0, (tm.error - eta) / (1 - 2 * eta))
            clean_estimated = True
    if not interpolates:
        regime = Regime.NO_INTERPOLATION
        reason = f"min train margin {train.min_margin:.3g} <= 0 (train error {train.error:.3g})"
        if clean_error is not None:
            reason += f"; clean test error {clean_error:.3g}"
    elif clean_error is None:
        regime, reason = None, "interpolates; no test set to judge generalisation"
    elif clean_error <= c.benign_error:
        regime = Regime.BENIGN
        reason = f"interpolates and clean test error {clean_error:.3g} <= {c.benign_error:g}"
    elif clean_error >= c.harmful_error:
        regime = Regime.HARMFUL
        reason = f"interpolates and clean test error {clean_error:.3g} >= {c.harmful_error:g}"
    else:
        regime = Regime.INTERMEDIATE
        reason = (
            f"interpolates; clean test error {clean_error:.3g} between "
            f"{c.benign_error:g} and {c.harmful_error:g}"
        )
    return ObservedBehaviour(
        interpolates=bool(interpolates),
        train=_metrics_dict(train),
        attention_estimated=attention_estimated,
        test=test_metrics,
        eta=eta,
        clean_error=clean_error,
        clean_error_estimated=clean_estimated,
        regime=regime,
        reason=_join(reason, why),
        status=sol.status,
        success=sol.success,
        certified=sol.certified,
        trust=trust,
    )


def _verdict(
    predicted: Regime,
    reason: str,
    snr_regime: Regime,
    observed: ObservedBehaviour | None,
    label: str,
) -> str:
    if observed is None:
        return "no solution given: nothing observed"
    seen = observed.regime
    said = f"predicted {predicted} for {label}"
    if observed.trust == "failed":
        if predicted == Regime.NO_INTERPOLATION:
            return f"AGREES: {said}, observed no interpolation ({observed.reason})"
        return (
            f"NOT COMPARABLE: {said}, but the optimiser failed ({observed.reason}): an "
            "optimiser's failure, not evidence about the theory"
        )
    if predicted == Regime.NO_INTERPOLATION and observed.interpolates:
        head = f"{said}, but this solution interpolates (another method may); "
        if seen is None:
            return head + "give a test set to compare its generalisation with the SNR side"
        return head + _compare(snr_regime, seen, "SNR side", observed)
    if seen is None:
        return "partial: the solution interpolates; give a test set to judge benign vs harmful"
    if predicted == Regime.CANNOT_TELL:
        return f"CANNOT TELL: no prediction for {label} ({reason}); observed {seen}"
    return _compare(predicted, seen, said, observed)


def _compare(predicted: Regime, seen: Regime, said: str, observed: ObservedBehaviour) -> str:
    if said == "SNR side":
        said = f"SNR side {predicted}"
    if predicted == Regime.OUTSIDE:
        return f"no prediction to compare ({said}); observed {seen}"
    if predicted == Regime.CANNOT_TELL:
        return f"CANNOT TELL: {said}; observed {seen}"
    if seen == Regime.INTERMEDIATE:
        return f"inconclusive: {said}, observed intermediate test error"
    if seen == predicted:
        extra = " (on an uncertified point)" if observed.trust == "uncertified" else ""
        return f"AGREES: {said}, observed {seen}{extra}"
    if observed.trust == "uncertified":
        return (
            f"CANNOT TELL: {said}, observed {seen} on an uncertified point ({observed.reason}): "
            "not evidence against the theory"
        )
    return f"DISAGREES: {said}, observed {seen}"
