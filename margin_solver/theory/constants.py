"""Constants of the theorem-condition checks: package defaults, not the paper's.

The conditions come from Magen et al., *Benign Overfitting in Single-Head Attention*
(arXiv:2410.07746) and the authors' reply to reviewers; the paper's constants are not
available here, so each is a field of :class:`Constants` with a default chosen by a scaling
argument documented in ``docs/theory.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from margin_solver.core.validation import InvalidInputError, check_seed

__all__ = ["CALIBRATION", "DISCLAIMER", "THRESHOLDS", "Calibrated", "Constants"]

DISCLAIMER = (
    "The paper's constants are not reproduced here (its full text is not available); every "
    "threshold uses a package default from Constants, so the verdicts are scaling-level, not "
    "the theorems' exact statements."
)


@dataclass(frozen=True)
class Calibrated:
    """One method's thresholds calibrated at one ratio ``d / n^2`` and one T.

    Chosen on the calibration seeds of the ``check-calibration`` study
    (:mod:`margin_solver.bench.check_calibration`; docs/decisions.md, "Checker constants per
    d / n^2 and T").

    Attributes
    ----------
    method : {"two-step-gd", "min-norm"}
    ratio : float
        ``d / n^2`` of the calibration data.
    T : int
        Tokens per sample of the calibration data.
    kappa_harmful, kappa_benign : float
        Harmful side ``kappa <= kappa_harmful``, benign side ``kappa >= kappa_benign``.
    upper_C : float or None
        Two-step GD: the multiplier of the upper SNR limit ``kappa_up(eta)``.
    R_scale : float or None
        Min-norm: the score scale ``R nu`` the interpolator was solved at (``nu^2`` the mean
        squared token norm).
    """

    method: str
    ratio: float
    T: int
    kappa_harmful: float
    kappa_benign: float
    upper_C: float | None = None
    R_scale: float | None = None


#: The per-method thresholds chosen on the calibration seeds (0, 1) of the ``check-calibration``
#: study at its quick size (n = 16, d / n^2 in {1, 4, 20, 100}, T in {2, 4}, eta = 0.1,
#: kappa 0.25-16; two-step GD at its default steps, P_R at R nu = 20 and 100); validated on
#: seeds 2, 3 (docs/decisions.md, "Checker constants per d / n^2 and T").
CALIBRATION: tuple[Calibrated, ...] = (
    Calibrated("two-step-gd", 1.0, 2, 1.0, 2.0, upper_C=1.0),
    Calibrated("two-step-gd", 1.0, 4, 1.0, 32.0, upper_C=1.0),
    Calibrated("two-step-gd", 4.0, 2, 0.125, 2.0, upper_C=1.0),
    Calibrated("two-step-gd", 4.0, 4, 0.5, 32.0, upper_C=1.0),
    Calibrated("two-step-gd", 20.0, 2, 0.125, 0.5, upper_C=1.0),
    Calibrated("two-step-gd", 20.0, 4, 0.25, 2.0, upper_C=1.0),
    Calibrated("two-step-gd", 100.0, 2, 0.125, 0.25, upper_C=1.0),
    Calibrated("two-step-gd", 100.0, 4, 0.125, 0.5, upper_C=1.25),
    Calibrated("min-norm", 1.0, 2, 1.0, 4.0, R_scale=100.0),
    Calibrated("min-norm", 1.0, 4, 1.0, 4.0, R_scale=100.0),
    Calibrated("min-norm", 4.0, 2, 2.0, 4.0, R_scale=100.0),
    Calibrated("min-norm", 4.0, 4, 1.0, 8.0, R_scale=100.0),
    Calibrated("min-norm", 20.0, 2, 1.0, 8.0, R_scale=100.0),
    Calibrated("min-norm", 20.0, 4, 1.0, 8.0, R_scale=100.0),
    Calibrated("min-norm", 100.0, 2, 2.0, 8.0, R_scale=100.0),
    Calibrated("min-norm", 100.0, 4, 2.0, 4.0, R_scale=100.0),
    Calibrated("min-norm", 1.0, 2, 1.0, 4.0, R_scale=20.0),
    Calibrated("min-norm", 1.0, 4, 1.0, 4.0, R_scale=20.0),
    Calibrated("min-norm", 4.0, 2, 2.0, 4.0, R_scale=20.0),
    Calibrated("min-norm", 4.0, 4, 1.0, 8.0, R_scale=20.0),
    Calibrated("min-norm", 20.0, 2, 1.0, 8.0, R_scale=20.0),
    Calibrated("min-norm", 20.0, 4, 1.0, 8.0, R_scale=20.0),
    Calibrated("min-norm", 100.0, 2, 1.0, 8.0, R_scale=20.0),
    Calibrated("min-norm", 100.0, 4, 2.0, 4.0, R_scale=20.0),
)

#: The threshold fields the calibration table supplies (used as given only without it).
THRESHOLDS = (
    "kappa_benign",
    "kappa_harmful",
    "gd_kappa_benign",
    "gd_kappa_harmful",
    "gd_upper_C",
)


@dataclass(frozen=True)
class Constants:
    """Constants of the scaling-level checks (package defaults, not the paper's).

    Parameters
    ----------
    kappa_benign : float, default=4.0
        Min-norm interpolator, benign side: ``kappa = n SNR^2 >= kappa_benign``. With hard token
        selection it prefers the signal once ``kappa > 2 / (1 - eta)`` (a norm comparison,
        docs/theory.md), which lies in [2, 4) for ``eta < 1/2``.
    kappa_harmful : float, default=2.0
        Min-norm interpolator, harmful side: ``kappa <= kappa_harmful`` (authors' reply, W4:
        ``SNR = o(1/sqrt(n))``). Calibrated with ``kappa_benign`` at large R on the calibration
        seeds of the ``check-calibration`` study (docs/decisions.md, "Checker constants:
        calibrated on seeds 0-2, validated on seeds 3-5"), which chose (2, 4) on the grid
        0.25 ... 16.
    R_select : float, default=3.0
        Min-norm interpolator: token selection needs the score scale ``R nu / sqrt(n) >= R_select``
        (``nu^2`` the mean squared token norm; ``p`` shared by ``n`` near-orthogonal noise
        directions gives each about ``R / sqrt(n)``; ``e^-3 = 0.05`` of the softmax mass
        leaks). Below it ``P_R`` is near the uniform-attention SVM, which the theorem does not
        cover.
    gd_kappa_benign : float, default=2.0
        Two-step GD at its step sizes, benign side: ``kappa >= gd_kappa_benign`` (calibrated
        on the calibration seeds of the ``check-calibration`` study, the same entry).
    gd_kappa_harmful : float, default=0.5
        Two-step GD, harmful side: ``kappa <= gd_kappa_harmful`` (calibrated likewise).
    gd_upper_C : float, default=1.0
        Two-step GD's upper SNR limit: two steps fit the flipped labels only while
        ``kappa <= gd_upper_C * kappa_up(eta)``, ``kappa_up`` from the score-gap analysis of
        docs/theory.md ("Step 2 and the default step sizes"); calibrated likewise.
    gd_first_step_max : float, default=1.0
        Two-step GD: the analysis needs a modest first step, own-token value
        ``c0 = beta0 nu^2 / (2 n T) < gd_first_step_max`` (at ``c0 >~ 1`` ``v_1`` already fits
        the clean samples and step 2 is driven by the noisy ones).
    gd_gap_min : float, default=0.25
        Two-step GD: a large second step, score gap ``G = beta1 c0 nu^2 / (2 n T) >=
        gd_gap_min log n`` (the package default is ``0.5 log n``).
    eta_C : float, default=5.0
        Label noise bound ``eta <= 1 / eta_C`` (Assumptions 3.1/4.1 item 4; C unknown).
    dim_C : float, default=1.0
        Theorem dimension ``d >= dim_C n^2 log(n / delta)``.
    delta : float, default=0.1
        Failure probability in the log factor.
    dim_experiment : float, default=2.0
        Dimension at which the authors observed benign overfitting, ``d >= 2 n``.
    T_max : int, default=10
        ``T = Theta(1)`` read as ``T <= T_max`` (a warning only).
    orth_C : float, default=1.0
        ``max |<xi_a, xi_b>| / ||xi_a||^2 <= orth_C / n``: the cross terms of ``n`` samples
        stay below one token's own norm (what ``d ~ n^2 log n`` buys).
    crosstalk_max : float, default=0.6
        Interpolation heuristic for two-step GD: median
        ``sqrt(sum_b <xi_a, xi_b>^2) / ||xi_a||^2 <= 0.6`` (about ``d >= 2.8 n (T - 1)``).
        Calibrated on a plain two-step GD over a step-size grid (python -m
        margin_solver.bench.measure.check_threshold): it fitted every sample in >= 80% of seeds at
        cross-talk <= 0.58 and in <= 40% at >= 0.7.
    norm_tol : float, default=0.5
        Norm concentration ``| ||xi||^2 / mean - 1 | <= norm_tol`` (the ``[1/2, 3/2]``
        band common in this literature).
    signal_noise_C : float, default=2.0
        ``max |cos(xi, mu)| <= signal_noise_C sqrt(2 log(2 N_pairs) / d)``: random-level
        overlap passes, systematic correlation fails.
    benign_error : float, default=0.1
        Observed benign: clean test error at most this.
    harmful_error : float, default=0.25
        Observed harmful: clean test error at least this.
    max_tokens : int, default=4000
        Subsample whole samples for the noise Gram matrix when ``n T`` exceeds this.
    seed : int, default=0
        Seeds subsampling and the estimators.
    calibration : tuple of Calibrated, optional
        The per-method thresholds calibrated over ``d / n^2`` and T (None: the package's
        table :data:`CALIBRATION`, read when the check runs). A check uses the entry of
        its method nearest (in log ``d / n^2``, then T, then log ``R nu``) and says "cannot
        tell: outside the calibrated range" when ``d / n^2``, T or (min-norm) ``R nu`` lies
        outside the calibrated ones. With ``calibration=()`` the threshold fields above
        (:data:`THRESHOLDS`) are used as given, at any ``d / n^2``; changing one of them
        while the table is on is refused (it would not be used).
    """

    kappa_benign: float = 4.0
    kappa_harmful: float = 2.0
    R_select: float = 3.0
    gd_kappa_benign: float = 2.0
    gd_kappa_harmful: float = 0.5
    gd_upper_C: float = 1.0
    gd_first_step_max: float = 1.0
    gd_gap_min: float = 0.25
    eta_C: float = 5.0
    dim_C: float = 1.0
    delta: float = 0.1
    dim_experiment: float = 2.0
    T_max: int = 10
    orth_C: float = 1.0
    crosstalk_max: float = 0.6
    norm_tol: float = 0.5
    signal_noise_C: float = 2.0
    benign_error: float = 0.1
    harmful_error: float = 0.25
    max_tokens: int = 4000
    seed: int = 0
    calibration: tuple[Calibrated, ...] | None = None

    @property
    def table(self) -> tuple[Calibrated, ...]:
        """The calibration table in force: ``calibration``, or :data:`CALIBRATION` if None."""
        return CALIBRATION if self.calibration is None else self.calibration

    def __post_init__(self) -> None:
        if self.calibration is not None and (
            not isinstance(self.calibration, tuple)
            or not all(isinstance(e, Calibrated) for e in self.calibration)
        ):
            raise InvalidInputError("Constants.calibration must be a tuple of Calibrated entries.")
        if self.table:
            changed = [
                name for name in THRESHOLDS if getattr(self, name) != getattr(Constants, name)
            ]
            if changed:
                raise InvalidInputError(
                    f"Constants: {', '.join(changed)} would not be used while the calibration "
                    "table supplies the thresholds; pass calibration=() to use your own."
                )
        for name in ("T_max", "max_tokens", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InvalidInputError(f"Constants.{name} must be an integer, got {value!r}.")
        check_seed(self.seed, "Constants.seed")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("seed", "calibration"):
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not value > 0
                or not math.isfinite(value)
            ):
                raise InvalidInputError(
                    f"Constants.{f.name} must be a positive number, got {value!r}."
                )
        if self.kappa_harmful > self.kappa_benign:
            raise InvalidInputError(
                f"Constants.kappa_harmful ({self.kappa_harmful}) must not exceed kappa_benign "
                f"({self.kappa_benign})."
            )
        if self.gd_kappa_harmful > self.gd_kappa_benign:
            raise InvalidInputError(
                f"Constants.gd_kappa_harmful ({self.gd_kappa_harmful}) must not exceed "
                f"gd_kappa_benign ({self.gd_kappa_benign})."
            )
        if self.harmful_error < self.benign_error:
            raise InvalidInputError("Constants.harmful_error must be >= benign_error.")
        if not self.delta < 1:
            raise InvalidInputError(f"Constants.delta must lie in (0, 1), got {self.delta!r}.")


def nearest_calibrated(
    table: tuple[Calibrated, ...], method: str, ratio: float, T: int, R_scale: float | None
) -> tuple[Calibrated | None, str]:
    """The calibrated entry for a check, or None with the reason it lies outside the table.

    Parameters
    ----------
    table : tuple of Calibrated
    method : {"two-step-gd", "min-norm"}
    ratio : float
        ``d / n^2`` of the data.
    T : int
    R_scale : float or None
        Min-norm's ``R nu`` (None: R = infinity, the hard-selection limit, which takes the
        largest calibrated ``R nu``; above the largest the selection is only harder, so that
        entry applies too).

    Returns
    -------
    (entry, reason) : (Calibrated or None, str)
        ``reason`` is empty when ``entry`` is given; otherwise it names the quantity outside
        the calibrated range, e.g. ``"d / n^2 = 0.375; calibrated 1-100"``.

    Examples
    --------
    >>> table = (Calibrated("min-norm", 1.0, 2, 2.0, 4.0, R_scale=100.0),
    ...          Calibrated("min-norm", 20.0, 2, 1.0, 2.0, R_scale=100.0))
    >>> nearest_calibrated(table, "min-norm", 10.0, 2, None)[0].ratio
    20.0
    >>> nearest_calibrated(table, "min-norm", 0.5, 2, None)[1]
    'd / n^2 = 0.5; calibrated 1-20'
    """
    entries = [e for e in table if e.method == method]
    if not entries:
        return None, f"no calibrated thresholds for {method}"
    tol = 1e-9

    def span(values: list[float], value: float, name: str, fmt: str = "g") -> str:
        lo, hi = min(values), max(values)
        if value < lo * (1 - tol) or value > hi * (1 + tol):
            return f"{name} = {value:.3{fmt}}; calibrated {lo:g}-{hi:g}"
        return ""

    for why in (
        span([e.ratio for e in entries], ratio, "d / n^2"),
        span([float(e.T) for e in entries], float(T), "T"),
    ):
        if why:
            return None, why
    if method == "min-norm":
        scales = sorted({e.R_scale for e in entries if e.R_scale is not None})
        if R_scale is None or R_scale >= scales[-1]:
            R_scale = scales[-1]
        elif R_scale < scales[0] * (1 - tol):
            return None, f"R nu = {R_scale:.3g}; calibrated {scales[0]:g} and above"

    def distance(e: Calibrated) -> tuple[float, float, float]:
        dr = abs(math.log(e.ratio / ratio))
        dR = abs(math.log(e.R_scale / R_scale)) if e.R_scale and R_scale else 0.0
        return (dr, abs(e.T - T), dR)

    return min(entries, key=distance), ""
