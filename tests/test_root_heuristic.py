"""solve_min_norm(certify=True) bounds first (issue 40): LB's branch-and-bound runs, its best
selection is realised and polished (the root heuristic), and when that point meets LB within
gap_tol it is returned certified without the first starts or the search."""

import math

import numpy as np
import pytest

from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import margins
from margin_solver.minnorm.solve import solve_min_norm


def _paper(n, T=2, d=300, kappa=4.0, seed=0):
    dist = PaperDistribution(d=d, T=T, snr=math.sqrt(kappa / n), eta=0.15)
    return dist.sample(n, seed=seed)


@pytest.mark.parametrize("T", [2, 3])
def test_the_root_heuristic_certifies_the_point_the_starts_reach(T):
    ds = _paper(14, T=T)
    R = 100 / math.sqrt(ds.d)
    certified = solve_min_norm(ds, R=R, certify=True)
    searched = solve_min_norm(ds, R=R, search_starts=8)  # the starts and the search
    assert certified.status == "optimal" and certified.certified
    assert certified.start == "lb_selection" and set(certified.start_norms) == {"lb_selection"}
    assert "root heuristic" in certified.message
    # the starts it leaves out are left out by design: no time limit acted
    assert "not run" not in certified.message and "time limit" not in certified.message
    assert 0 <= certified.gap <= certified.gap_tol
    # no worse than the starts and the search beyond what the certificate allows
    assert certified.norm <= searched.norm * (1 + certified.gap_tol)
    assert np.min(margins(ds.X, ds.y, certified.v, certified.p)) >= 1 - certified.feas_tol
    assert np.array_equal(certified.selected_token, certified.bound.selection)


def test_the_work_is_counted_and_the_same_on_every_call():
    ds = _paper(14)
    R = 100 / math.sqrt(ds.d)
    first = solve_min_norm(ds, R=R, certify=True)
    again = solve_min_norm(ds, R=R, certify=True)
    run_solves = first.work - first.nodes
    assert first.nodes == first.bound.nodes >= 1 and run_solves >= 1
    assert (first.nodes, first.work, first.norm) == (again.nodes, again.work, again.norm)
    plain = solve_min_norm(ds, R=R)
    assert plain.nodes == 0 and plain.work > run_solves  # six starts against one polish


def test_soft_attention_leaves_the_gap_to_the_starts_and_the_bound(counted_bound):
    # at R = 1/sqrt(d) the attention stays soft: LB's selection is not polished, LB is loose,
    # and the first starts, the search and the finite-R stages run as before
    ds = _paper(10, d=40)
    res = solve_min_norm(ds, R=1 / math.sqrt(ds.d), certify=True)
    assert {"zero", "first_step", "lb_selection"} <= set(res.start_norms)
    assert "root heuristic" not in res.message
    assert res.norm >= res.lower_bound * (1 - 1e-9)
