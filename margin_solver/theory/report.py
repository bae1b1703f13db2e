"""The checker's report: what was measured and predicted, what was observed, as a record and
as the terminal table ``margin-solver check`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.analysis.estimation import EstimateIntervals, NoiseGeometry, SignalNoiseEstimate
from margin_solver.core.results import (
    RecordMixin,
    Renamed,
    classes_note,
    format_cell,
    renamed,
    sign_classes,
)
from margin_solver.theory.constants import DISCLAIMER, Constants
from margin_solver.theory.rules import SOFT, Condition, Regime

__all__ = ["ConditionReport", "ObservedBehaviour", "format_report"]


@dataclass(frozen=True)
class ObservedBehaviour:
    """What a fitted ``(v, p)`` does, set against the prediction.

    Attributes
    ----------
    interpolates : bool
        Every training sample has ``y_i f_i > 0`` (False when the solution carries no point).
    train : dict or None
        :class:`~margin_solver.analysis.metrics.Metrics` on the training set (without the per-sample
        token selection); None when the solution carries no point.
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
    regime : Regime or None
        "benign", "harmful", "intermediate", "no interpolation", or None without a test set
        or without a point.
    reason : str
    status : str or None
        The solution's status (None for a plain ``(v, p)``).
    success, certified : bool or None
        The solution's ``success`` and (min-norm) ``certified``, None when it does not say.
    trust : {"ok", "uncertified", "failed", "proof", "unknown"}
        Whether the observation can test the prediction: "failed" (the optimiser failed:
        no point, diverged, or a point that does not fit the training set) and "uncertified"
        (not proved to be the min-norm point) are never reported as a disagreement with the
        theory; "proof" is a certified infeasibility; "unknown" a plain ``(v, p)``.
    """

    interpolates: bool
    train: dict[str, Any] | None
    attention_estimated: bool
    test: dict[str, Any] | None
    eta: float | None
    clean_error: float | None
    clean_error_estimated: bool
    regime: Regime | None
    reason: str
    status: str | None = None
    success: bool | None = None
    certified: bool | None = None
    trust: str = "unknown"


@renamed(Renamed("steps", "step_sizes"))
@dataclass(repr=False)
class ConditionReport(RecordMixin):
    """What :func:`~margin_solver.theory.check_conditions` found (a record, not a solver result:
    it has no status; the verdicts are in its fields).

    Attributes
    ----------
    message : str
        A one-line summary.
    predicted_regime : Regime
        One of "benign", "harmful", "no interpolation", "outside the theory", "cannot tell",
        for the method ``method_label`` names.
    regime_reason : str
    snr_regime : Regime
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
    method : {"two-step-gd", "min-norm", "gd"}
        The method the prediction is for ("gd": a GD run with another schedule, which no
        theorem covers).
    method_label : str
        The method with its setting, e.g. "two-step GD at beta0 = 2, beta1 = 70".
    R : float or None
        Min-norm's radius (None: the hard-selection limit or not min-norm).
    step_sizes : (float, float) or None
        Two-step GD's ``(beta0, beta1)``, as :attr:`GDResult.step_sizes` (``steps`` is a
        deprecated alias for one release).
    intervals : EstimateIntervals or None
        Bootstrap intervals of the estimated SNR and eta.
    classes : ndarray of shape (2,)
        The dataset's two labels in sign order (``classes[0]`` is -1, ``classes[1]`` is +1):
        the labels the rows' signs stand for.
    """

    message: str
    predicted_regime: Regime
    regime_reason: str
    snr_regime: Regime
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
    method: str = "min-norm"
    method_label: str = ""
    R: float | None = None
    step_sizes: tuple[float, float] | None = None
    intervals: EstimateIntervals | None = None
    classes: np.ndarray = field(default_factory=sign_classes)

    def condition(self, name: str) -> Condition:
        """The row called ``name``."""
        for row in self.conditions:
            if row.name == name:
                return row
        raise KeyError(f"No condition {name!r}; rows are {[r.name for r in self.conditions]}.")

    def __str__(self) -> str:
        return format_report(self)


def format_report(report: ConditionReport) -> str:
    """The report as a terminal table (what ``str(report)`` returns)."""
    head = ("condition", "value", "threshold", "holds", "role", "source", "rule (constant)")
    table = []
    for r in report.conditions:
        value = format_cell(r.value) + ("*" if r.estimated and r.value is not None else "")
        rule = r.formula + ("" if r.constant == "-" else f" ({r.constant})")
        table.append(
            (r.name, value, format_cell(r.threshold), format_cell(r.holds), r.role, r.tag, rule)
        )
    widths = [max(len(row[i]) for row in [head, *table]) for i in range(len(head))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()

    est = report.estimates
    out = [
        f"Theorem-condition check: n={report.n}, T={report.T}, d={report.d}; prediction for "
        f"{report.method_label}",
        (
            f"measured: rho={format_cell(est.rho)} sigma={format_cell(est.sigma)} "
            f"SNR={format_cell(est.snr)} "
            f"eta={format_cell(est.eta)} (signal index {est.signal_index_source}, classes from "
            f"{est.class_source}); * = estimated from the data"
        ),
    ]
    note = classes_note(report.classes)
    if note is not None:
        out.insert(1, f"labels: {note}")
    ci = report.intervals
    if ci is not None:
        out.append(
            f"  {ci.level:.0%} bootstrap intervals ({ci.n_boot} replicates, {ci.conditional}): "
            f"SNR [{format_cell(ci.snr[0])}, {format_cell(ci.snr[1])}], eta "
            f"[{format_cell(ci.eta[0])}, {format_cell(ci.eta[1])}]"
        )
    undecided = [
        r for r in report.conditions if r.holds is None and r.role != SOFT and r.note
    ]  # soft rows' reasons are among the warnings
    if any(r.estimated for r in undecided) and ci is not None:
        out.append(
            "  (these intervals hold the estimated signal positions fixed; rows resting on "
            "estimates that cannot be trusted say 'cannot tell' whatever their intervals)"
        )
    out += [
        "",
        line(head),
        line(tuple("-" * w for w in widths)),
        *(line(row) for row in table),
        "",
        f"predicted regime for {report.method_label}: {report.predicted_regime} "
        f"({report.regime_reason})",
    ]
    if report.snr_regime != report.predicted_regime:
        out.append(f"SNR side alone: {report.snr_regime}")
    for r in undecided:
        out.append(f"undecided: {r.name}: {r.note}")
    for w in report.warnings:
        out.append(f"warning: {w}")
    obs = report.observed
    if obs is not None and obs.train is None:
        out.append(f"observed: no point ({obs.reason})")
    elif obs is not None:
        tr = obs.train
        out.append(
            f"observed: interpolates={format_cell(obs.interpolates)}, "
            f"train error={format_cell(tr['error'])}, min margin={format_cell(tr['min_margin'])}"
            + (f", solver status {obs.status}" if obs.status else "")
        )
        out.append(
            f"  attention on signal: clean {format_cell(tr['attn_signal_clean'])}, noisy "
            f"{format_cell(tr['attn_signal_noisy'])}"
            + (" (estimated split)" if obs.attention_estimated else "")
            + " [Thm 3.3 item 3; authors' reply, Q5.1: clean -> signal, noisy -> noise]"
        )
        if obs.test is not None:
            out.append(
                f"  test error {format_cell(obs.test['error'])} vs eta {format_cell(obs.eta)}; "
                f"clean test error {format_cell(obs.clean_error)}"
                f"{' (estimated)' if obs.clean_error_estimated else ''} vs 0"
            )
        out.append(f"  observed regime: {obs.regime or '-'} ({obs.reason})")
    out.append(f"verdict: {report.verdict}")
    out.append(f"note: {report.disclaimer}")
    return "\n".join(out)
