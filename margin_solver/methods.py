"""Methods a sweep can run: a registry name -> function(train, test, call) -> row fields.

A method fits a model (v, p) on ``train`` and returns a dict of result columns
(:data:`margin_solver.sweeps.METHOD_FIELDS`). Shared meanings:

- ``train_error`` / ``train_error_clean``: training error against observed / clean labels;
- ``test_error_clean``: test error against clean labels (Bayes optimum 0);
  ``test_error_noisy``: against the test set's flipped labels (Bayes optimum eta);
- ``attn_signal_clean`` / ``attn_signal_noisy``: mean attention on the signal token over
  the *training* samples whose label was kept / flipped (the two-mode behaviour of the
  authors' reply, seed Q5.1 and W2); ``attn_signal_test``: over all test samples;
- ``min_margin``: ``min_i y_i f(X_i)`` on the training set;
- ``norm``: ``||v|| / min_margin``, the norm of the value vector that interpolates with margin
  1 at the method's attention p (comparable between the min-norm solver and GD endpoints);
  empty when the method does not interpolate;
- ``R``: the attention radius: the constraint ``||p|| <= R`` of a min-norm solve, or ``||p||``
  for methods without one; ``p_norm``: ``||p||``;
- ``lower_bound`` / ``gap``: a certified lower bound on the min-norm value and
  ``norm - lower_bound`` when the method provides one.

Register a new method with :func:`register_method`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.data import Dataset
from margin_solver.metrics import evaluate
from margin_solver.vstep import solve_vstep  # at import, so a cell's timing excludes it

#: Registry of sweep methods.
METHODS: dict[str, Callable[..., dict[str, Any]]] = {}


@dataclass(frozen=True)
class MethodCall:
    """What a method gets besides the data.

    Attributes
    ----------
    cell : margin_solver.sweeps.Cell
        The grid point (n, d, T, snr, kappa, eta, seed, method).
    options : dict
        The method's options from the sweep config.
    init_seed : numpy.random.SeedSequence
        The cell's initialisation stream (independent of the data streams).
    """

    cell: Any
    options: dict[str, Any] = field(default_factory=dict)
    init_seed: np.random.SeedSequence = field(default_factory=np.random.SeedSequence)


def register_method(name: str) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Decorator adding a function ``(train, test, call) -> dict`` to :data:`METHODS`."""

    def decorate(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        METHODS[name] = fn
        return fn

    return decorate


def model_fields(v: np.ndarray, p: np.ndarray, train: Dataset, test: Dataset) -> dict[str, Any]:
    """Result columns of a fitted (v, p) from :func:`margin_solver.metrics.evaluate`.

    Parameters
    ----------
    v, p : ndarray of shape (n_features,)
    train, test : Dataset

    Returns
    -------
    dict
        ``train_error, train_error_clean, test_error_clean, test_error_noisy,
        attn_signal_clean, attn_signal_noisy, attn_signal_test, min_margin, norm, p_norm``.
    """
    fit = evaluate(v, p, train)
    held = evaluate(v, p, test)
    v_norm = float(np.linalg.norm(v))
    return {
        "train_error": fit.error,
        "train_error_clean": fit.error_clean,
        "test_error_clean": held.error_clean,
        "test_error_noisy": held.error,
        "attn_signal_clean": fit.attn_signal_clean,
        "attn_signal_noisy": fit.attn_signal_noisy,
        "attn_signal_test": held.attn_signal,
        "min_margin": fit.min_margin,
        "norm": v_norm / fit.min_margin if fit.min_margin > 0 else None,
        "p_norm": float(np.linalg.norm(p)),
    }


@register_method("uniform-svm")
def uniform_svm(train: Dataset, test: Dataset, call: MethodCall) -> dict[str, Any]:
    """The v-step at ``p = 0``: a hard-margin SVM on the token means (uniform attention).

    The baseline that ignores attention: ``f = v^T mean_t x_t``. Options: ``solver``
    (a :func:`margin_solver.vstep.solve_vstep` engine, default ``"ldp"``, exact and fast).
    """
    Z = train.X.mean(axis=1)
    res = solve_vstep(Z, train.y.astype(float), solver=call.options.get("solver", "ldp"))
    out: dict[str, Any] = {"status": res.status, "message": res.message, "R": 0.0}
    if res.v is None:
        return out
    out.update(model_fields(res.v, np.zeros(train.d), train, test))
    out["gap"] = res.gap
    return out
