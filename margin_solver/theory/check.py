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

import hashlib
import math
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
from margin_solver.solutions import solution_vectors
from margin_solver.theory.constants import Constants
from margin_solver.theory.report import ConditionReport, ObservedBehaviour
from margin_solver.theory.rules import (
    ASSUMPTION,
    INTERPOLATION,
    REGIME,
    SOFT,
    Condition,
    Regime,
    predict,
)
from margin_solver.validation import InvalidInputError

__all__ = ["check_conditions", "conflicting_pairs"]

_REL_TOL = 1e-9


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
    >>> str(check_conditions(ds).predicted_regime)
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
    conflicts = conflicting_pairs(dataset.X, dataset.y)
    regime, reason, snr_regime, _ = predict(rows, conflicts, c)
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
    """Pairs (i, j), i < j, of samples with the same multiset of tokens and opposite labels,
    naming every sample that has such a twin.

    Attention without positions is blind to token order, so such samples get the same output
    ``f(X; v, p)`` for every (v, p) and no interpolator exists. Tokens are compared exactly
    (by a hash of their bytes). In each group of samples with the same tokens and both labels,
    every sample is paired with the group's first sample of the other label: at most n - 1
    pairs, so memory stays linear in n (listing every pair would be quadratic: 25,000 copies
    of one token with 10% flipped labels make 56 million pairs).

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
    pairs: list[tuple[int, int]] = []
    for members in groups.values():
        first: dict[Any, int] = {}
        for i in members:
            first.setdefault(y[i], i)
        if len(first) < 2:
            continue
        for i in members:
            j = next(first[label] for label in first if label != y[i])
            pairs.append((min(i, j), max(i, j)))
    return sorted(set(pairs))  # the two firsts were paired from both sides


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
        reason=reason,
    )


def _verdict(predicted: Regime, snr_regime: Regime, observed: ObservedBehaviour | None) -> str:
    if observed is None:
        return "no solution given: nothing observed"
    seen = observed.regime
    if predicted == Regime.NO_INTERPOLATION and observed.interpolates:
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


def _compare(predicted: Regime, seen: Regime, what: str) -> str:
    if predicted == Regime.OUTSIDE:
        return f"no prediction to compare ({what}: outside the theory); observed {seen}"
    if seen == Regime.INTERMEDIATE:
        return f"inconclusive: {what} {predicted}, observed intermediate test error"
    word = "AGREES" if seen == predicted else "DISAGREES"
    return f"{word}: {what} {predicted}, observed {seen}"


