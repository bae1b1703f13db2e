"""The finite-R bound on tokens whose attended features are zero up to rounding.

Reproducer (issue-19 benchmark, integer tokens, n = 8, T = 3, d = 3, R sqrt(d) = 10, seed
20261287): a sample whose mean token is zero gave the uniform-attention Gram matrix a diagonal
entry of -1.1e-16, and ``solve_min_norm(certify=True)`` raised InvalidInputError from the
public v-step's input check instead of answering.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from margin_solver.bench.measure.search_quality import make_instance
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.results import ConvergenceWarning
from margin_solver.minnorm.solve import solve_min_norm


def test_certified_solve_answers_where_a_mean_token_rounds_below_zero(counted_bound):
    X, y = make_instance("integer", 8, 3, 3, 20261287)
    means = X.mean(axis=1)
    assert np.any(np.all(means == 0, axis=1))  # the case: a zero mean token
    R = 10 / math.sqrt(X.shape[2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_min_norm(X, y, R=R, certify=True)
        bound = global_lower_bound(X, y, R=R)
    assert res.min_margin >= 1 - 1e-6 and math.isfinite(res.norm)
    assert 0 < res.lower_bound <= res.norm * (1 + 1e-9)
    assert 0 < bound.value <= res.norm * (1 + 1e-9)
