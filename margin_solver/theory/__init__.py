"""Check the benign-overfitting theorems' conditions on a dataset and predict the regime
(Magen et al., arXiv:2410.07746, and the authors' reply to reviewers).

One module per job:

* :mod:`~margin_solver.theory.constants` -- :class:`Constants`, the thresholds (package
  defaults, not the paper's constants, which are not available here);
* :mod:`~margin_solver.theory.rules` -- the check rows' record (:class:`Condition`), the
  :class:`Regime` vocabulary and the regime rules table :data:`RULES`;
* :mod:`~margin_solver.theory.check` -- :func:`check_conditions`: measure the rows, predict,
  observe a fitted ``(v, p)``, compare; :func:`data_evidence`: the measurements that do not
  depend on the method, to share between the checks of several methods on one dataset;
* :mod:`~margin_solver.theory.report` -- :class:`ConditionReport` and its terminal table.
"""

from margin_solver.theory.check import (
    METHODS,
    DataEvidence,
    check_conditions,
    conflicting_pairs,
    data_evidence,
    two_step_upper_kappa,
)
from margin_solver.theory.constants import CALIBRATION, DISCLAIMER, Calibrated, Constants
from margin_solver.theory.report import ConditionReport, ObservedBehaviour, format_report
from margin_solver.theory.rules import RULES, Condition, Regime, rules_table

BENIGN = Regime.BENIGN
HARMFUL = Regime.HARMFUL
NO_INTERPOLATION = Regime.NO_INTERPOLATION
OUTSIDE = Regime.OUTSIDE
INTERMEDIATE = Regime.INTERMEDIATE
CANNOT_TELL = Regime.CANNOT_TELL
#: The predicted-regime vocabulary.
REGIMES = (BENIGN, HARMFUL, NO_INTERPOLATION, OUTSIDE, CANNOT_TELL)

__all__ = [
    "BENIGN",
    "CALIBRATION",
    "CANNOT_TELL",
    "DISCLAIMER",
    "HARMFUL",
    "INTERMEDIATE",
    "METHODS",
    "NO_INTERPOLATION",
    "OUTSIDE",
    "REGIMES",
    "RULES",
    "Calibrated",
    "Condition",
    "ConditionReport",
    "Constants",
    "DataEvidence",
    "ObservedBehaviour",
    "Regime",
    "check_conditions",
    "conflicting_pairs",
    "data_evidence",
    "format_report",
    "rules_table",
    "two_step_upper_kappa",
]
