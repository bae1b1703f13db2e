"""The regime rules: one table, read in order, first match wins.

Each check row (:class:`Condition`) has a *role* saying how its failure changes the
prediction; :data:`RULES` turns the rows into a predicted :class:`Regime`. ``docs/theory.md``
shows :func:`rules_table` verbatim (a test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from margin_solver.theory.constants import Constants

__all__ = [
    "ASSUMPTION",
    "CALIBRATION",
    "COVERAGE",
    "INTERPOLATION",
    "REGIME",
    "RULES",
    "SOFT",
    "Condition",
    "Regime",
    "RegimeRule",
    "predict",
    "rules_table",
    "snr_side",
]


class Regime(str, Enum):
    """Regimes the checker predicts or observes; the values are what reports print and save."""

    BENIGN = "benign"
    HARMFUL = "harmful"
    NO_INTERPOLATION = "no interpolation"
    OUTSIDE = "outside the theory"
    #: Predicted only: an estimate the prediction rests on is too uncertain to decide it.
    CANNOT_TELL = "cannot tell"
    #: Observed only: a clean test error between the benign and harmful thresholds.
    INTERMEDIATE = "intermediate"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# Row roles: how a failing row changes the prediction.
REGIME, ASSUMPTION, INTERPOLATION, SOFT = "regime", "assumption", "interpolation", "soft"
#: A row saying whether the method's setting (step sizes, R) is one the theorem covers.
COVERAGE = "coverage"
#: A row saying whether the data lie where the method's thresholds were calibrated.
CALIBRATION = "calibration"


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
        Where the condition comes from (the paper, or the authors' reply by point).
    formula : str
        The condition with symbols.
    value : float or None
        Measured left-hand side (None when not applicable or unknown).
    threshold : float or None
        Right-hand side with the constant applied.
    constant : str
        The constant used and its value.
    holds : bool or None
        None when the value is unknown or, for an estimated value, when its interval
        straddles the threshold or the estimator's reliability check failed ("cannot tell",
        the reason in ``note``).
    estimated : bool
        True when ``value`` depends on a quantity estimated from the data rather than given.
    role : {"regime", "assumption", "interpolation", "coverage", "calibration", "soft"}
        How a failure changes the prediction (:data:`RULES`); ``"soft"`` rows only warn.
    note : str
    interval : (float, float) or None
        Bootstrap interval of an estimated ``value`` (``report.intervals.level``).
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
    interval: tuple[float, float] | None = None


class Evidence(NamedTuple):
    """What the rules read: the rows, the conflicting pairs, the constants, the SNR side."""

    rows: list[Condition]
    conflicts: list[tuple[int, int]]
    constants: Constants
    snr_regime: Regime | None = None
    method: str = "min-norm"


@dataclass(frozen=True)
class RegimeRule:
    """One rule: when ``match`` gives a reason, the prediction is ``regime``.

    Attributes
    ----------
    when : str
        The rule in words (the table in ``docs/theory.md``).
    regime : Regime
    snr_side : bool
        A rule on the SNR rows alone (they give ``report.snr_regime``).
    match : callable
        ``match(evidence) -> str | None``: the reason when the rule applies, else None.
    """

    when: str
    regime: Regime
    snr_side: bool
    match: Callable[[Evidence], str | None]


def _row(rows: list[Condition], name: str) -> Condition:
    return next(r for r in rows if r.name == name)


def _conflicts(ev: Evidence) -> str | None:
    if not ev.conflicts:
        return None
    return (
        f"{len(ev.conflicts)} pair(s) of samples with the same tokens and opposite labels "
        f"(first: {ev.conflicts[0]}): f is the same on both for every (v, p), so no model of "
        "this form interpolates"
    )


def _assumption_fails(ev: Evidence) -> str | None:
    failed = [r.name for r in ev.rows if r.role == ASSUMPTION and r.holds is False]
    return "assumption(s) fail: " + ", ".join(failed) if failed else None


def _not_covered(ev: Evidence) -> str | None:
    failed = [r for r in ev.rows if r.role == COVERAGE and r.holds is False]
    if not failed:
        return None
    return f"outside what the theorem covers for {ev.method}: " + "; ".join(
        f"{r.name}: {r.note}" for r in failed
    )


def _uncalibrated(ev: Evidence) -> str | None:
    failed = [r for r in ev.rows if r.role == CALIBRATION and r.holds is False]
    return failed[0].note if failed else None


def _undecided(ev: Evidence) -> str | None:
    rows = [
        r
        for r in ev.rows
        if r.role in (ASSUMPTION, INTERPOLATION) and r.holds is None and r.value is not None
    ]
    if not rows:
        return None
    why: dict[str, list[str]] = {}
    for r in rows:
        cut = r.note.find("cannot tell: ")
        why.setdefault(r.note[cut + 13 :] if cut >= 0 else r.note, []).append(r.name)
    return "cannot tell: " + "; ".join(f"{', '.join(names)}: {w}" for w, names in why.items())


def _interpolation_fails(ev: Evidence) -> str | None:
    blocked = [r for r in ev.rows if r.role == INTERPOLATION and r.holds is False]
    if not blocked:
        return None
    r = blocked[0]
    return (
        f"{r.name} = {r.value:.3g} > {r.threshold:.3g}: {r.note}; for an interpolator found "
        f"otherwise the SNR side says {ev.snr_regime}"
    )


def _benign(ev: Evidence) -> str | None:
    row = _row(ev.rows, "snr_benign")
    if row.value is None or not row.holds:
        return None
    return f"kappa = n SNR^2 = {row.value:.3g} >= C_benign = {row.threshold:g} ({ev.method})"


def _harmful(ev: Evidence) -> str | None:
    row = _row(ev.rows, "snr_harmful")
    if row.value is None or not row.holds:
        return None
    return f"kappa = n SNR^2 = {row.value:.3g} <= c_harmful = {row.threshold:g} ({ev.method})"


def _snr_undecided(ev: Evidence) -> str | None:
    benign, harmful = _row(ev.rows, "snr_benign"), _row(ev.rows, "snr_harmful")
    if benign.value is None:
        return "cannot tell: the SNR could not be estimated"
    if benign.holds is None or harmful.holds is None:
        return "cannot tell: " + (benign.note if benign.holds is None else harmful.note)
    return None


def _transition(ev: Evidence) -> str:
    benign, harmful = _row(ev.rows, "snr_benign"), _row(ev.rows, "snr_harmful")
    return (
        f"kappa = {benign.value:.3g} in the transition band ({harmful.threshold:g}, "
        f"{benign.threshold:g}) where the theorems give no prediction ({ev.method})"
    )


#: The regime rules in order; the first whose ``match`` gives a reason decides.
RULES: tuple[RegimeRule, ...] = (
    RegimeRule(
        "two samples hold the same tokens (in any order) with opposite labels: every (v, p) "
        "gives them the same output",
        Regime.NO_INTERPOLATION,
        False,
        _conflicts,
    ),
    RegimeRule("an `assumption` row fails", Regime.OUTSIDE, False, _assumption_fails),
    RegimeRule(
        "a `coverage` row fails: the method's setting (two-step GD's step sizes, min-norm's R) "
        "is outside what the theorem covers",
        Regime.OUTSIDE,
        False,
        _not_covered,
    ),
    RegimeRule(
        "the `calibration` row fails: d / n^2, T or min-norm's R nu lies outside the range "
        "the method's thresholds were calibrated on (cannot tell: outside the calibrated range)",
        Regime.CANNOT_TELL,
        False,
        _uncalibrated,
    ),
    RegimeRule(
        "an `assumption` or `interpolation` row cannot be decided: its estimate's interval "
        "straddles the threshold or the estimator's reliability check failed",
        Regime.CANNOT_TELL,
        False,
        _undecided,
    ),
    RegimeRule(
        "an `interpolation` row fails (two-step GD only): noise cross-talk too large, or "
        "kappa above the upper SNR limit of two steps",
        Regime.NO_INTERPOLATION,
        False,
        _interpolation_fails,
    ),
    RegimeRule(
        "`kappa = n SNR^2 >= C_benign` (the method's constant)", Regime.BENIGN, True, _benign
    ),
    RegimeRule("`kappa <= c_harmful` (the method's constant)", Regime.HARMFUL, True, _harmful),
    RegimeRule(
        "the SNR is unknown, or its interval straddles `C_benign` or `c_harmful`",
        Regime.CANNOT_TELL,
        True,
        _snr_undecided,
    ),
    RegimeRule(
        "otherwise: kappa in the transition band",
        Regime.OUTSIDE,
        True,
        _transition,
    ),
)


def _first(rules: tuple[RegimeRule, ...], ev: Evidence) -> tuple[Regime, str]:
    for rule in rules:
        reason = rule.match(ev)
        if reason is not None:
            return rule.regime, reason
    raise AssertionError("the last rule always matches")


def snr_side(
    rows: list[Condition], constants: Constants, method: str = "min-norm"
) -> tuple[Regime, str]:
    """The regime the SNR rules alone give, with its reason (``report.snr_regime``)."""
    ev = Evidence(rows, [], constants, method=method)
    return _first(tuple(r for r in RULES if r.snr_side), ev)


def predict(
    rows: list[Condition],
    conflicts: list[tuple[int, int]],
    constants: Constants,
    method: str = "min-norm",
) -> tuple[Regime, str, Regime, str]:
    """Apply :data:`RULES` in order: ``(regime, reason, snr_regime, snr_reason)``."""
    snr_regime, snr_reason = snr_side(rows, constants, method)
    regime, reason = _first(RULES, Evidence(rows, conflicts, constants, snr_regime, method))
    return regime, reason, snr_regime, snr_reason


def rules_table() -> str:
    """:data:`RULES` as the Markdown table that ``docs/theory.md`` shows."""
    lines = ["| rule | when | predicted regime | SNR side |", "|---|---|---|---|"]
    for k, rule in enumerate(RULES):
        side = "yes" if rule.snr_side else "no"
        lines.append(f"| {k} | {rule.when} | **{rule.regime.value}** | {side} |")
    return "\n".join(lines) + "\n"
