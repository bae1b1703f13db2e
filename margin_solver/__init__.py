"""margin_solver: min-norm / max-margin interpolators of single-head softmax attention.

The model is f(X; v, p) = v^T X^T softmax(X p) (Magen et al., *Benign Overfitting in
Single-Head Attention*, arXiv:2410.07746).
"""

import importlib
import importlib.util
import logging

from margin_solver import _compat
from margin_solver._version import __version__ as __version__

# Eager, unlike the names below (it costs numpy and scipy.special, which every verb needs).
from margin_solver.analysis.compare import Comparison, compare

# ``import margin_solver.vstep`` and the other module paths before the subpackages keep
# working, with a DeprecationWarning (margin_solver._compat).
_compat.install()

#: Public name -> the module defining it. The names load on first use (PEP 562), so that
#: ``import margin_solver.cli`` or ``margin_solver.core.data`` does not pay for the solvers'
#: imports (scipy.optimize, scipy.special): each CLI verb imports what it runs.
_EXPORTS = {
    "LowerBoundResult": "bounds.lower",
    "global_lower_bound": "bounds.lower",
    "Dataset": "core.data",
    "PaperDistribution": "core.data",
    "load_dataset": "core.data",
    "SingleHeadAttentionClassifier": "estimator",
    "GDResult": "gd.endpoints",
    "gradient_descent": "gd.endpoints",
    "Metrics": "analysis.metrics",
    "evaluate": "analysis.metrics",
    "MinNormResult": "minnorm.solve",
    "solve_min_norm": "minnorm.solve",
    "MultiHeadMinNormResult": "minnorm.multihead",
    "solve_min_norm_heads": "minnorm.multihead",
    "ConvergenceWarning": "core.results",
    "solve_attention_svm": "svm.selection",
    "ConditionReport": "theory",
    "Constants": "theory",
    "check_conditions": "theory",
    "InvalidInputError": "core.validation",
    "VStepResult": "svm.vstep",
    "solve_vstep": "svm.vstep",
}


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"margin_solver.{_EXPORTS[name]}"), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"margin_solver.{name}"):
        # ``margin_solver.svm`` after a bare ``import margin_solver`` (or an old module path,
        # with a warning) works as when every module was imported eagerly.
        value = importlib.import_module(f"margin_solver.{name}")
    else:
        raise AttributeError(f"module 'margin_solver' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


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
    "MultiHeadMinNormResult",
    "PaperDistribution",
    "SingleHeadAttentionClassifier",
    "VStepResult",
    "check_conditions",
    "compare",
    "evaluate",
    "global_lower_bound",
    "gradient_descent",
    "load_dataset",
    "solve_attention_svm",
    "solve_min_norm",
    "solve_min_norm_heads",
    "solve_vstep",
]
