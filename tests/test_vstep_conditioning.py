"""A nearly infeasible v-step (opposite labels on almost equal features) cannot be certified
in float64; the engine chain must say so instead of falling back to engines that do worse."""

import numpy as np
import pytest

from margin_solver.core.results import OPTIMAL, OPTIMAL_INACCURATE
from margin_solver.svm import vstep


def _near_conflict(delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Two equal same-label features (a singular K, as with saturated attention) and a third,
    opposite-labelled one at distance ``delta``: ``||v|| ~ 2 / delta``."""
    rng = np.random.default_rng(0)
    d = 50
    mu = rng.standard_normal(d)
    mu /= np.linalg.norm(mu)
    e = rng.standard_normal(d)
    e -= (e @ mu) * mu
    e /= np.linalg.norm(e)
    Z = np.vstack([mu, mu, mu + delta * e, 0.3 * rng.standard_normal((7, d)) + 0.5 * mu])
    y = np.array([1, 1, -1, 1, -1, 1, -1, 1, -1, 1.0])
    K = Z @ Z.T
    return (K + K.T) / 2, y


@pytest.mark.parametrize("delta", [1e-5, 3e-6, 1e-6])
def test_nearly_infeasible_vstep_stops_at_ldp_without_fallback(delta):
    K, y = _near_conflict(delta)
    res = vstep.solve_trusted_vstep(K, y, "ldp")
    assert res.status == OPTIMAL_INACCURATE
    assert res.solver == "ldp" and res.fallbacks == []
    assert "no engine can certify it" in res.message
    # The answer is still the right one to the precision float64 gives it.
    assert res.norm == pytest.approx(2 / delta, rel=0.1)
    assert res.min_margin == pytest.approx(1.0)


def test_without_the_precision_floor_the_chain_falls_back(monkeypatch):
    """What the floor prevents: the same problem sent on to ECOS and Clarabel."""
    monkeypatch.setattr(vstep, "_gap_rounding", lambda data, result: 0.0)
    K, y = _near_conflict(1e-6)
    res = vstep.solve_trusted_vstep(K, y, "ldp")
    assert res.status != OPTIMAL and res.fallbacks


def test_well_conditioned_vstep_is_certified_optimal():
    K, y = _near_conflict(1e-1)
    res = vstep.solve_trusted_vstep(K, y, "ldp")
    assert res.status == OPTIMAL and res.fallbacks == []


def test_an_eigendecomposition_that_does_not_converge_falls_back_to_dsyev(monkeypatch):
    """numpy's divide and conquer raised "Eigenvalues did not converge" on a singular K of a
    sweep cell (n = 120); which matrices make it fail depends on the LAPACK build, so the
    failure is simulated here."""
    K, y = _near_conflict(1e-1)  # singular (two equal features): the LDP engine needs the factor
    expected = vstep.solve_trusted_vstep(K, y, "ldp")
    calls = []

    def diverging(a, *args, **kwargs):
        calls.append(a.shape)
        raise np.linalg.LinAlgError("Eigenvalues did not converge")

    monkeypatch.setattr(np.linalg, "eigh", diverging)
    res = vstep.solve_trusted_vstep(K, y, "ldp")
    assert calls and res.status == OPTIMAL and res.fallbacks == []
    assert res.norm == pytest.approx(expected.norm, rel=1e-9)
    lam, U = vstep.symmetric_eigh(K)
    assert np.all(np.diff(lam) >= 0)
    assert np.allclose((U * lam) @ U.T, K, atol=1e-12 * np.abs(K).max())
