"""Check the benign-overfitting theorems' conditions on a dataset and predict the regime.

The conditions come from the authors' reply to reviewers (``shared/seeds``; Magen et al.,
arXiv:2410.07746): the SNR threshold of order ``1/sqrt(n)`` (Theorem 3.3, the min-norm theorem,
the harmful-overfitting result W4), ``eta <= 1/C`` (Assumptions 3.1 and 4.1, item 4; Q2), at
least one noisy sample (Q1), ``d = Omega(n^2)`` with log factors (Q3.1), ``T = Theta(1)`` (Q3.2)
and the near-orthogonality and norm concentration of the noise tokens that the proofs use.

**The paper's constants are not available here.** Every constant is a field of
:class:`Constants` with a package default chosen by a scaling argument documented in
``docs/theory.md``; verdicts are scaling-level, not the theorems' exact statements.

Regime rules (first match wins):

0. two samples hold the same tokens (in any order) with opposite labels -> ``"no
   interpolation"``: every (v, p) gives them the same output, so no method interpolates (a
   fact about the data, checked exactly; ``ConditionReport.conflicting_pairs``);
1. an *assumption* row fails -> ``"outside the theory"``;
2. the *interpolation* row fails (noise cross-talk too large for the noise tokens to memorise
   the noisy samples) -> ``"no interpolation"`` (by two-step GD);
3. ``kappa = n SNR^2 >= kappa_benign`` -> ``"benign"``;
4. ``kappa <= kappa_harmful`` -> ``"harmful"``;
5. otherwise (transition band) -> ``"outside the theory"``.

Rows with role ``"soft"`` (the ``n^2 log n`` dimension bound the authors call loose, large T)
only add warnings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.data import Dataset
from margin_solver.estimation import (
    NoiseGeometry,
    SignalNoiseEstimate,
    estimate_signal_noise,
    noise_geometry,
)
from margin_solver.metrics import Metrics, trusted_metrics
from margin_solver.results import ResultMixin, format_cell
from margin_solver.solutions import solution_vectors
from margin_solver.validation import InvalidInputError

__all__ = [
    "BENIGN",
    "HARMFUL",
    "NO_INTERPOLATION",
    "OUTSIDE",
    "REGIMES",
    "Condition",
    "ConditionReport",
    "Constants",
    "ObservedBehaviour",
    "check_conditions",
    "conflicting_pairs",
    "format_report",
]

BENIGN = "benign"
HARMFUL = "harmful"
NO_INTERPOLATION = "no interpolation"
OUTSIDE = "outside the theory"
#: The predicted-regime vocabulary.
REGIMES = (BENIGN, HARMFUL, NO_INTERPOLATION, OUTSIDE)
#: Observed regime between the benign and harmful error thresholds.
INTERMEDIATE = "intermediate"
CHECKED = "checked"

DISCLAIMER = (
    "The paper's constants are not reproduced here (its full text is not available); every "
    "threshold uses a package default from Constants, so the verdicts are scaling-level, not "
    "the theorems' exact statements."
)

_REL_TOL = 1e-9

# Row roles: how a failing row changes the prediction.
REGIME, ASSUMPTION, INTERPOLATION, SOFT = "regime", "assumption", "interpolation", "soft"


@dataclass(frozen=True)
class Constants:
    """Constants of the scaling-level checks (package defaults, not the paper's).

    Parameters
    ----------
    kappa_benign : float, default=4.0
        Benign side: ``kappa = n SNR^2 >= kappa_benign``. With hard token selection the
        min-norm interpolator prefers the signal once ``kappa > 2 / (1 - eta)`` (a norm
        comparison, docs/theory.md), which lies in [2, 4) for ``eta < 1/2``.
    kappa_harmful : float, default=1.0
        Harmful side: ``kappa <= kappa_harmful`` (seed W4: ``SNR = o(1/sqrt(n))``).
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
        Calibrated on a plain two-step GD over a step-size grid (benchmarks/check_threshold.py):
        it fitted every sample in >= 80% of seeds at cross-talk <= 0.58 and in <= 40% at >= 0.7.
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
    """

    kappa_benign: float = 4.0
    kappa_harmful: float = 1.0
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

    def __post_init__(self) -> None:
        for name in ("T_max", "max_tokens", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InvalidInputError(f"Constants.{name} must be an integer, got {value!r}.")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "seed":
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
        if self.harmful_error < self.benign_error:
            raise InvalidInputError("Constants.harmful_error must be >= benign_error.")
        if not self.delta < 1:
            raise InvalidInputError(f"Constants.delta must lie in (0, 1), got {self.delta!r}.")


@dataclass(frozen=True)
class Condition:
    """One row of the report.

    Attributes
    ----------
    name : str
        Stable identifier.
    tag : str
        Short source tag for the table (e.g. "Q3.1", "W4").
    source : str
        Where the condition comes from, as the seed names it.
    formula : str
        The condition with symbols.
    value : float or None
        Measured left-hand side (None when not applicable or unknown).
    threshold : float or None
        Right-hand side with the constant applied.
    constant : str
        The constant used and its value.
    holds : bool or None
        None when the value is unknown.
    estimated : bool
        True when ``value`` depends on a quantity estimated from the data rather than given.
    role : {"regime", "assumption", "interpolation", "soft"}
        How a failure changes the prediction (module docstring).
    note : str
    """

    name: str
    tag: str
    source: str
    formula: str
    value: float | None
    threshold: float | None
    constant: str
    holds: bool | None
    estimated: bool
    role: str
    note: str = ""


@dataclass(frozen=True)
class ObservedBehaviour:
    """What a fitted ``(v, p)`` does, set against the prediction.

    Attributes
    ----------
    interpolates : bool
        Every training sample has ``y_i f_i > 0``.
    train : dict
        :class:`~margin_solver.metrics.Metrics` on the training set (without the per-sample
        token selection).
    attention_estimated : bool
        The training attention split uses estimated signal positions or clean labels.
    test : dict or None
        Metrics on the test set.
    eta : float or None
        Label-noise rate the test error is compared with (Bayes error on noisy labels).
    clean_error : float or None
        Clean test error: measured, or ``(error - eta) / (1 - 2 eta)`` when the test set has
        no clean labels (then ``clean_error_estimated``).
    clean_error_estimated : bool
    regime : str or None
        "benign", "harmful", "intermediate", "no interpolation", or None without a test set.
    reason : str
    """

    interpolates: bool
    train: dict[str, Any]
    attention_estimated: bool
    test: dict[str, Any] | None
    eta: float | None
    clean_error: float | None
    clean_error_estimated: bool
    regime: str | None
    reason: str


@dataclass(repr=False)
class ConditionReport(ResultMixin):
    """Result of :func:`check_conditions`.

    Attributes
    ----------
    status, message : str
        ``"checked"`` and a one-line summary.
    predicted_regime : str
        One of "benign", "harmful", "no interpolation", "outside the theory".
    regime_reason : str
    snr_regime : str
        What the SNR rows alone say ("benign", "harmful", or "outside the theory" in the
        transition band or when the SNR is unknown); it applies to any interpolator, also
        where two-step GD is predicted not to interpolate.
    n, T, d : int
    conditions : list of Condition
    estimates : SignalNoiseEstimate
        What was measured on the data (also when generating parameters are known).
    noise : NoiseGeometry
    observed : ObservedBehaviour or None
    verdict : str
        One line: does the observation agree with the prediction?
    warnings : list of str
    constants : Constants
    disclaimer : str
    conflicting_pairs : list of (int, int)
        Pairs of samples with the same tokens (in any order) and opposite labels (rule 0).
    """

    status: str
    message: str
    predicted_regime: str
    regime_reason: str
    snr_regime: str
    n: int
    T: int
    d: int
    conditions: list[Condition]
    estimates: SignalNoiseEstimate
    noise: NoiseGeometry
    observed: ObservedBehaviour | None
    verdict: str
    warnings: list[str] = field(default_factory=list)
    constants: Constants = field(default_factory=Constants)
    disclaimer: str = DISCLAIMER
    conflicting_pairs: list[tuple[int, int]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        """True: the check ran (whatever the verdicts)."""
        return self.status == CHECKED

    def condition(self, name: str) -> Condition:
        """The row called ``name``."""
        for row in self.conditions:
            if row.name == name:
                return row
        raise KeyError(f"No condition {name!r}; rows are {[r.name for r in self.conditions]}.")

    def __repr__(self) -> str:
        return ResultMixin.__repr__(self)

    def __str__(self) -> str:
        return format_report(self)


def check_conditions(
    dataset: Dataset,
    solution: Any = None,
    test: Dataset | None = None,
    constants: Constants | None = None,
) -> ConditionReport:
    """Check the theorems' conditions on ``dataset`` and compare prediction with observation.

    Parameters
    ----------
    dataset : Dataset
        Training data. Generating parameters (``params["snr"]``, ``params["eta"]``) are used
        when present; otherwise SNR and eta are estimated (rows flagged ``estimated``).
    solution : object with ``v`` and ``p``, mapping, or JSON path, optional
        A fitted model; enables the observed behaviour.
    test : Dataset, optional
        Test set from the same distribution; enables the observed generalisation.
    constants : Constants, optional
        Thresholds; package defaults otherwise (not the paper's constants).

    Returns
    -------
    ConditionReport

    Raises
    ------
    InvalidInputError
        ``dataset`` or ``test`` is not a Dataset, the test dimension differs, or the solution
        is malformed.

    Examples
    --------
    >>> from margin_solver.data import PaperDistribution
    >>> ds = PaperDistribution(d=600, snr=0.4, eta=0.1).sample(40, seed=2)
    >>> check_conditions(ds).predicted_regime
    'benign'
    """
    if not isinstance(dataset, Dataset):
        raise InvalidInputError(f"dataset must be a Dataset, got {type(dataset).__name__}.")
    if test is not None and not isinstance(test, Dataset):
        raise InvalidInputError(f"test must be a Dataset, got {type(test).__name__}.")
    if test is not None and test.d != dataset.d:
        raise InvalidInputError(f"test set has d={test.d} but the training set has d={dataset.d}.")
    c = constants if constants is not None else Constants()
    if not isinstance(c, Constants):
        raise InvalidInputError(f"constants must be a Constants, got {type(c).__name__}.")
    vectors = None if solution is None else solution_vectors(solution, dataset.d)

    rng = np.random.default_rng(c.seed)
    est = estimate_signal_noise(dataset, seed=c.seed)
    geo = noise_geometry(dataset.X, est.signal_index, est.mu, c.max_tokens, rng)
    rows = _conditions(dataset, est, geo, c)
    snr_regime, snr_reason = _snr_side(rows, c)
    conflicts = conflicting_pairs(dataset.X, dataset.y)
    regime, reason = _predict(rows, snr_regime, snr_reason, conflicts)
    warnings = [f"{r.name}: {r.note}" for r in rows if r.role == SOFT and r.holds is False]
    if geo.subsampled:
        warnings.append(
            f"noise Gram computed on {geo.n_gram_tokens} of {geo.n_tokens} noise tokens "
            f"(n T > max_tokens = {c.max_tokens}); the max overlap is a lower estimate."
        )
    if est.estimated_index and est.signal_index_margin is not None and est.signal_index_margin < 2:
        warnings.append(
            f"signal tokens hard to identify (median commonality ratio "
            f"{est.signal_index_margin:.3g} < 2): estimates may be unreliable; pass signal_index."
        )
    if est.class_separation is not None and est.class_separation < 4:
        warnings.append(
            f"signal tokens split into classes with separation {est.class_separation:.3g} < 4 "
            "standard deviations: the eta estimate is unreliable; pass clean labels."
        )
    observed = None
    if vectors is not None:
        observed = _observe(dataset, est, vectors, test, _eta_value(dataset, est)[0], c)
    elif test is not None:
        warnings.append("a test set was given without a solution: nothing to observe on it.")
    verdict = _verdict(regime, snr_regime, observed)
    message = f"predicted regime: {regime}" + (f"; {verdict}" if observed is not None else "")
    return ConditionReport(
        status=CHECKED,
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
    )


def conflicting_pairs(X: np.ndarray, y: np.ndarray) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, of samples with the same multiset of tokens and opposite labels.

    Attention without positions is blind to token order, so such samples get the same output
    ``f(X; v, p)`` for every (v, p) and no interpolator exists. Tokens are compared exactly
    (by a hash of their bytes).

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, 1.0]]])
    >>> conflicting_pairs(X, np.array([1, -1, -1]))
    [(0, 1)]
    """
    groups: dict[bytes, list[int]] = {}
    for i, sample in enumerate(np.ascontiguousarray(X, dtype=np.float64)):
        key = b"".join(sorted(hashlib.sha256(token.tobytes()).digest() for token in sample))
        groups.setdefault(key, []).append(i)
    return [
        (i, j)
        for members in groups.values()
        for k, i in enumerate(members)
        for j in members[k + 1 :]
        if y[i] != y[j]
    ]


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


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _row(value: float | None, threshold: float | None, **fields: Any) -> Condition:
    return Condition(value=_finite(value), threshold=_finite(threshold), **fields)


# A relative slack keeps values equal to a threshold up to rounding (kappa = 1.0000000002).
def _at_most(value: float | None, threshold: float) -> bool | None:
    return None if value is None else bool(value <= threshold * (1 + _REL_TOL))


def _at_least(value: float | None, threshold: float) -> bool | None:
    return None if value is None else bool(value >= threshold * (1 - _REL_TOL))


def _conditions(
    ds: Dataset, est: SignalNoiseEstimate, geo: NoiseGeometry, c: Constants
) -> list[Condition]:
    n, T, d = ds.n, ds.T, ds.d
    known_snr = _known(ds, "snr")
    snr = known_snr if known_snr is not None else _finite(est.snr)
    kappa = None if snr is None else n * snr**2
    snr_note = ""
    if snr is not None:
        snr_note = f"SNR = {snr:.4g} vs 1/sqrt(n) = {1 / math.sqrt(n):.4g}"
        if known_snr is not None:
            snr_note += f" (generating; measured {est.snr:.4g})"
    eta, eta_est = _eta_value(ds, est)
    noisy_count = int(ds.flipped.sum()) if ds.flipped is not None else est.n_noisy
    dim_bound = c.dim_C * n**2 * math.log(max(n / c.delta, 1.0))
    n_pairs = 2 * geo.n_tokens * max(est.signal_rank, 1)
    sn_bound = c.signal_noise_C * math.sqrt(2 * math.log(max(2 * n_pairs, 2)) / d)
    return [
        _row(
            T, 2, name="tokens_per_sample", tag="model, W3",
            source="data model (seed W3: one signal token and several noise tokens)",
            formula="T >= 2", constant="-", holds=T >= 2, estimated=False, role=ASSUMPTION,
            note="" if T >= 2 else "one token per sample: no noise token, no token selection",
        ),
        _row(
            T, c.T_max, name="T_bounded", tag="Q3.2", source="seed Q3.2: 'we fix T = Theta(1)'",
            formula="T <= T_max", constant=f"T_max = {c.T_max}", holds=T <= c.T_max,
            estimated=False, role=SOFT,
            note=f"T = {T} is large; the analysis fixes T = Theta(1) and softmax may pick "
            "high-scoring noise tokens",
        ),
        _row(
            kappa, c.kappa_benign, name="snr_benign", tag="Thm 3.3, min-norm",
            source="Theorem 3.3 and the min-norm theorem (seed Q3: 'SNR threshold "
            "Theta(1/sqrt(n))')",
            formula="kappa = n SNR^2 >= C_benign", constant=f"C_benign = {c.kappa_benign:g}",
            holds=_at_least(kappa, c.kappa_benign), estimated=known_snr is None, role=REGIME,
            note=snr_note,
        ),
        _row(
            kappa, c.kappa_harmful, name="snr_harmful", tag="W4",
            source="harmful-overfitting result (seed W4: 'SNR = o(1/sqrt(n))')",
            formula="kappa = n SNR^2 <= c_harmful", constant=f"c_harmful = {c.kappa_harmful:g}",
            holds=_at_most(kappa, c.kappa_harmful), estimated=known_snr is None, role=REGIME,
            note=snr_note,
        ),
        _row(
            eta, 1 / c.eta_C, name="label_noise_rate", tag="Asm 3.1/4.1 (4), Q2",
            source="Assumptions 3.1 and 4.1, item 4 (seed Q2: 'bounded by a certain constant "
            "1/C')",
            formula="eta <= 1/C", constant=f"C = {c.eta_C:g}", holds=_at_most(eta, 1 / c.eta_C),
            estimated=eta_est, role=ASSUMPTION,
            note="share of labels differing from the carried signal" if eta_est else "",
        ),
        _row(
            noisy_count, 1, name="noisy_samples", tag="Q1",
            source="GD analysis (seed Q1: 'at least one noisy sample')",
            formula="#{i : y_i != y~_i} >= 1", constant="-", holds=noisy_count >= 1,
            estimated=ds.flipped is None, role=ASSUMPTION,
            note=f"n eta = {n * eta:.3g} (Q1: noisy samples exist whp when eta >> 1/n)",
        ),
        _row(
            d, dim_bound, name="dimension_theorem", tag="Q3.1",
            source="seed Q3.1: 'Omega(n^2) dimension requirement' (with log factors, design "
            "section 6)",
            formula="d >= C_d n^2 log(n/delta)", constant=f"C_d = {c.dim_C:g}, delta = {c.delta:g}",
            holds=d >= dim_bound, estimated=False, role=SOFT,
            note="d below the theorems' sufficient dimension; the authors call it loose (Q3.1)",
        ),
        _row(
            d, c.dim_experiment * n, name="dimension_experiment", tag="Q3.1 (Fig. 4)",
            source="seed Q3.1: 'benign overfitting occurs for d = 2n'",
            formula="d >= C_exp n", constant=f"C_exp = {c.dim_experiment:g}",
            holds=d >= c.dim_experiment * n, estimated=False, role=SOFT,
            note="d below the smallest dimension where the authors observed benign overfitting",
        ),
        _row(
            geo.max_overlap, c.orth_C / n, name="noise_orthogonality", tag="Q3.1, proofs",
            source="seed Q3.1: 'sufficient separation between token inner products'",
            formula="max_{a!=b} |<xi_a, xi_b>| / ||xi_a||^2 <= C_orth / n",
            constant=f"C_orth = {c.orth_C:g}", holds=_at_most(geo.max_overlap, c.orth_C / n),
            estimated=est.estimated_index, role=SOFT,
            note="noise tokens not near-orthogonal at the n-sample scale the proofs use "
            "(d ~ n^2 log n); the typical cross-talk row decides interpolation",
        ),
        _row(
            geo.median_crosstalk, c.crosstalk_max, name="noise_crosstalk", tag="heuristic",
            source="two-step GD interpolation (package heuristic, design section 5)",
            formula="median_a sqrt(sum_b <xi_a, xi_b>^2) / ||xi_a||^2 <= C_xt",
            constant=f"C_xt = {c.crosstalk_max:g}",
            holds=_at_most(geo.median_crosstalk, c.crosstalk_max),
            estimated=est.estimated_index, role=INTERPOLATION,
            note="~ sqrt(n (T-1) / d): a noisy sample's own noise token must outweigh the others",
        ),
        _row(
            geo.norm_deviation, c.norm_tol, name="noise_norm_concentration", tag="proofs",
            source="noise-norm concentration used by the proofs (design section 6)",
            formula="max_a | ||xi_a||^2 / mean ||xi||^2 - 1 | <= C_norm",
            constant=f"C_norm = {c.norm_tol:g}", holds=_at_most(geo.norm_deviation, c.norm_tol),
            estimated=est.estimated_index, role=ASSUMPTION,
        ),
        _row(
            geo.signal_cosine, sn_bound, name="signal_noise_orthogonality", tag="model, W3",
            source="data model (seed W3: 'the noise tokens are orthogonal to the signal')",
            formula="max |cos(xi, mu_+-)| <= C_sn sqrt(2 log(2 N_pairs) / d)",
            constant=f"C_sn = {c.signal_noise_C:g}", holds=_at_most(geo.signal_cosine, sn_bound),
            estimated=est.estimated_index or est.estimated_classes, role=ASSUMPTION,
            note="mu_+- are the class means of the signal tokens",
        ),
    ]


def _snr_side(rows: list[Condition], c: Constants) -> tuple[str, str]:
    """The regime the SNR rows alone predict, with its reason."""
    benign, harmful = (next(r for r in rows if r.name == k) for k in ("snr_benign", "snr_harmful"))
    kappa = benign.value
    if kappa is None:
        return OUTSIDE, "SNR unknown (could not be estimated)"
    if benign.holds:
        return BENIGN, f"kappa = n SNR^2 = {kappa:.3g} >= C_benign = {c.kappa_benign:g}"
    if harmful.holds:
        return HARMFUL, f"kappa = n SNR^2 = {kappa:.3g} <= c_harmful = {c.kappa_harmful:g}"
    return OUTSIDE, (
        f"kappa = {kappa:.3g} in the transition band ({c.kappa_harmful:g}, {c.kappa_benign:g}) "
        "where the theorems give no prediction"
    )


def _predict(
    rows: list[Condition], snr_regime: str, snr_reason: str, conflicts: list[tuple[int, int]]
) -> tuple[str, str]:
    """The predicted regime and its reason: the rules of the module docstring, in order."""
    if conflicts:
        return NO_INTERPOLATION, (
            f"{len(conflicts)} pair(s) of samples with the same tokens and opposite labels "
            f"(first: {conflicts[0]}): f is the same on both for every (v, p), so no model of "
            "this form interpolates"
        )
    failed = [r for r in rows if r.role == ASSUMPTION and r.holds is False]
    if failed:
        return OUTSIDE, "assumption(s) fail: " + ", ".join(r.name for r in failed)
    blocked = [r for r in rows if r.role == INTERPOLATION and r.holds is False]
    if blocked:
        r = blocked[0]
        return NO_INTERPOLATION, (
            f"{r.name} = {r.value:.3g} > {r.threshold:g}: noise tokens too correlated for "
            f"two-step GD to memorise the noisy samples (scaling heuristic); for an "
            f"interpolator found otherwise the SNR side says {snr_regime}"
        )
    return snr_regime, snr_reason


def _metrics_dict(m: Metrics) -> dict[str, Any]:
    out = m.to_dict()
    out.pop("selected_token")
    return out


def _observe(
    ds: Dataset,
    est: SignalNoiseEstimate,
    vectors: tuple[np.ndarray, np.ndarray],
    test: Dataset | None,
    eta: float,
    c: Constants,
) -> ObservedBehaviour:
    v, p = vectors
    # Attention split by clean/noisy needs signal positions and clean labels: the estimated
    # ones stand in where the dataset lacks them.
    train = trusted_metrics(v, p, ds, est.signal_class, est.signal_index)
    interpolates = train.min_margin > 0
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
        regime = NO_INTERPOLATION
        reason = f"min train margin {train.min_margin:.3g} <= 0 (train error {train.error:.3g})"
        if clean_error is not None:
            reason += f"; clean test error {clean_error:.3g}"
    elif clean_error is None:
        regime, reason = None, "interpolates; no test set to judge generalisation"
    elif clean_error <= c.benign_error:
        regime = BENIGN
        reason = f"interpolates and clean test error {clean_error:.3g} <= {c.benign_error:g}"
    elif clean_error >= c.harmful_error:
        regime = HARMFUL
        reason = f"interpolates and clean test error {clean_error:.3g} >= {c.harmful_error:g}"
    else:
        regime = INTERMEDIATE
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
        reason=reason,
    )


def _verdict(predicted: str, snr_regime: str, observed: ObservedBehaviour | None) -> str:
    if observed is None:
        return "no solution given: nothing observed"
    seen = observed.regime
    if predicted == NO_INTERPOLATION and observed.interpolates:
        head = (
            "predicted no interpolation by two-step GD, but this solution interpolates "
            "(another method may); "
        )
        if seen is None:
            return head + "give a test set to compare its generalisation with the SNR side"
        return head + _compare(snr_regime, seen, "SNR side")
    if seen is None:
        return "partial: the solution interpolates; give a test set to judge benign vs harmful"
    return _compare(predicted, seen, "predicted")


def _compare(predicted: str, seen: str, what: str) -> str:
    if predicted == OUTSIDE:
        return f"no prediction to compare ({what}: outside the theory); observed {seen}"
    if seen == INTERMEDIATE:
        return f"inconclusive: {what} {predicted}, observed intermediate test error"
    word = "AGREES" if seen == predicted else "DISAGREES"
    return f"{word}: {what} {predicted}, observed {seen}"


def format_report(report: ConditionReport) -> str:
    """The report as a terminal table (what ``str(report)`` returns)."""
    head = ("condition", "value", "threshold", "holds", "role", "source", "rule (constant)")
    table = []
    for r in report.conditions:
        value = format_cell(r.value) + ("*" if r.estimated and r.value is not None else "")
        rule = r.formula + ("" if r.constant == "-" else f" ({r.constant})")
        table.append((r.name, value, format_cell(r.threshold), format_cell(r.holds), r.role, r.tag, rule))
    widths = [max(len(row[i]) for row in [head, *table]) for i in range(len(head))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()

    est = report.estimates
    out = [
        f"Theorem-condition check: n={report.n}, T={report.T}, d={report.d}",
        (
            f"measured: rho={format_cell(est.rho)} sigma={format_cell(est.sigma)} SNR={format_cell(est.snr)} "
            f"eta={format_cell(est.eta)} (signal index {est.signal_index_source}, classes from "
            f"{est.class_source}); * = estimated from the data"
        ),
        "",
        line(head),
        line(tuple("-" * w for w in widths)),
        *(line(row) for row in table),
        "",
        f"predicted regime: {report.predicted_regime} ({report.regime_reason})",
    ]
    if report.snr_regime != report.predicted_regime:
        out.append(f"SNR side alone: {report.snr_regime}")
    for w in report.warnings:
        out.append(f"warning: {w}")
    obs = report.observed
    if obs is not None:
        tr = obs.train
        out.append(
            f"observed: interpolates={format_cell(obs.interpolates)}, train error={format_cell(tr['error'])}, "
            f"min margin={format_cell(tr['min_margin'])}"
        )
        out.append(
            f"  attention on signal: clean {format_cell(tr['attn_signal_clean'])}, noisy "
            f"{format_cell(tr['attn_signal_noisy'])}"
            + (" (estimated split)" if obs.attention_estimated else "")
            + " [Thm 3.3 item 3 / seed Q5.1: clean -> signal, noisy -> noise]"
        )
        if obs.test is not None:
            out.append(
                f"  test error {format_cell(obs.test['error'])} vs eta {format_cell(obs.eta)}; clean test error "
                f"{format_cell(obs.clean_error)}{' (estimated)' if obs.clean_error_estimated else ''} vs 0"
            )
        out.append(f"  observed regime: {obs.regime or '-'} ({obs.reason})")
    out.append(f"verdict: {report.verdict}")
    out.append(f"note: {report.disclaimer}")
    return "\n".join(out)
