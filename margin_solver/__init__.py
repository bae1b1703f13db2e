"""margin_solver: min-norm / max-margin interpolators of single-head softmax attention.

The model is f(X; v, p) = v^T X^T softmax(X p) (Magen et al., *Benign Overfitting in
Single-Head Attention*, arXiv:2410.07746).
"""

import logging

from margin_solver._version import __version__
from margin_solver.bounds import LowerBoundResult, global_lower_bound
from margin_solver.compare import Comparison, compare
from margin_solver.data import Dataset, PaperDistribution, load_dataset
from margin_solver.estimator import SingleHeadAttentionClassifier
from margin_solver.gd import GDResult, gradient_descent
from margin_solver.metrics import Metrics, evaluate
from margin_solver.minnorm import MinNormResult, solve_min_norm
from margin_solver.results import ConvergenceWarning
from margin_solver.theory import ConditionReport, Constants, check_conditions
from margin_solver.validation import InvalidInputError
from margin_solver.vstep import VStepResult, solve_vstep

# Library diagnostics go to the "margin_solver" logger; nothing prints unless the caller
# configures logging (the CLI does with --verbose).
logging.getLogger("margin_solver").addHandler(logging.NullHandler())

__all__ = [
    "Comparison",
    "ConditionReport",
    "Constants",
    "ConvergenceWarning",
    "Dataset",
    "GDResult",
    "InvalidInputError",
    "LowerBoundResult",
    "Metrics",
    "MinNormResult",
    "PaperDistribution",
    "SingleHeadAttentionClassifier",
    "VStepResult",
    "check_conditions",
    "compare",
    "evaluate",
    "global_lower_bound",
    "gradient_descent",
    "load_dataset",
    "solve_min_norm",
    "solve_vstep",
]
