"""Tests for the v-step (margin_solver.vstep)."""

import numpy as np
import pytest

from margin_solver.vstep import ENGINES, solve_vstep

# z1 = (1, 0), y = +1 forces v1 >= 1; z2 = (0, 2), y = -1 forces v2 <= -1/2; z3 = (2, 0),
# y = +1 is then satisfied with margin 2. So v = (1, -1/2), ||v||^2 = 5/4, and
# v = a1 z1 - a2 z2 gives alpha = (1, 1/4, 0) with sum(alpha) = 5/4 = ||v||^2.
HAND_Z = np.array([[1.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
HAND_Y = np.array([1.0, -1.0, 1.0])


@pytest.mark.parametrize("solver", ENGINES)
def test_hand_example(solver):
    res = solve_vstep(HAND_Z, HAND_Y, solver)
    assert res.status == "optimal" and res.solver == solver and res.fallbacks == []
    np.testing.assert_allclose(res.v, [1.0, -0.5], atol=1e-8)
    np.testing.assert_allclose(res.alpha, [1.0, 0.25, 0.0], atol=1e-6)
    assert res.norm == pytest.approx(np.sqrt(1.25), rel=1e-9)
    assert res.min_margin == pytest.approx(1.0, abs=1e-12)
