"""Metrics of a model with H attention heads, f(X) = sum_h v_h^T X^T softmax(X p_h).

Kept apart from :mod:`margin_solver.minnorm.multihead` (the H-head min-norm solver) so that gradient
descent, ``compare`` and the sweep methods evaluate multi-head models without loading the
solvers.
"""

from __future__ import annotations

import numpy as np

from margin_solver.analysis.metrics import Metrics, output_metrics, trusted_metrics
from margin_solver.core.data import Dataset
from margin_solver.core.kernel import multihead_outputs, softmax

__all__ = ["head_metrics"]


def head_metrics(v: np.ndarray, p: np.ndarray, data: Dataset) -> Metrics:
    """:func:`margin_solver.analysis.metrics.trusted_metrics` for one head (``v``, ``p`` of shape
    (d,)) or H heads (shape (H, d)); with H heads the attention metrics and ``selected_token`` use
    the heads' mean attention. Inputs are not validated (for callers that produced them).

    Examples
    --------
    >>> from margin_solver.core.data import Dataset
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 2.0], [1.0, 0.0]]])
    >>> V = np.array([[1.0, -1.0], [0.5, 0.0]])
    >>> head_metrics(V, np.zeros((2, 2)), Dataset(X, np.array([1, -1]))).error
    0.0
    """
    if np.ndim(v) == 1:
        return trusted_metrics(v, p, data)
    f = multihead_outputs(data.X, v, p)
    s = np.mean([softmax(data.X @ ph) for ph in p], axis=0)
    return output_metrics(f, s, data)
