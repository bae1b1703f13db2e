"""SCIP's formulation of the hard-selection problem (the benchmark's outside reference) solves
the problem LB solves: on small instances both prove the same optimum."""

import pytest

from margin_solver.bench.measure.hard_selection_scip import (
    paper_instance,
    scip_hard_selection,
    token_coordinates,
)
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.kernel import TokenGram


@pytest.mark.parametrize(("n", "T"), [(8, 2), (6, 3)])
def test_scip_proves_the_optimum_the_branch_and_bound_proves(n, T):
    X, y = paper_instance(n, T)
    H = TokenGram(X).H
    L = token_coordinates(H)
    assert abs(L @ L.T - H).max() < 1e-10 * abs(H).max()
    ours = global_lower_bound(X, y)
    scip = scip_hard_selection(H, y, T, time_limit=60.0)
    assert ours.status == "optimal" and scip["status"] == "optimal" and scip["gap"] == 0.0
    # SCIP meets its constraints to its feasibility tolerance (1e-6), so its norm may be
    # that much below the exact optimum, never more
    assert 0 <= (ours.value - scip["value"]) / ours.value < 1e-5
