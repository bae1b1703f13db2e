"""margin_solver: min-norm / max-margin interpolators of single-head softmax attention.

The model is f(X; v, p) = v^T X^T softmax(X p) (Magen et al., *Benign Overfitting in
Single-Head Attention*, arXiv:2410.07746).
"""

from margin_solver.compare import Comparison, compare
from margin_solver.data import Dataset, PaperDistribution, load_dataset
from margin_solver.estimator import SingleHeadAttentionClassifier
from margin_solver.gd import GDResult, gradient_descent
from margin_solver.metrics import Metrics, evaluate
from margin_solver.validation import InvalidInputError
from margin_solver.vstep import VStepResult, solve_vstep

__version__ = "0.1.0"

__all__ = [
    "Comparison",
    "Dataset",
    "GDResult",
    "InvalidInputError",
    "Metrics",
    "PaperDistribution",
    "SingleHeadAttentionClassifier",
    "VStepResult",
    "compare",
    "evaluate",
    "gradient_descent",
    "load_dataset",
    "solve_vstep",
]
