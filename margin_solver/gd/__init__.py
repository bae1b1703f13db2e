"""Gradient-descent endpoints of the attention model and the weight-decay path.

Modules: ``endpoints`` (:func:`gradient_descent`: two-step, constant, normalised, weight
decay), ``regpath`` (ridge-logistic fits for decreasing weight decay).
"""

from margin_solver._compat import forward


def __getattr__(name: str) -> object:
    # ``margin_solver.gd`` was the module now at ``margin_solver.gd.endpoints``
    return forward("gd", "endpoints", name)
