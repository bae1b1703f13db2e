"""Budgets in work, not seconds: a certified solve gives the same norm, status, gap and count
of work, bit for bit, on a slow clock, on a fast clock and beside busy processes; the
caller's time limits are guards that change the answer only when they act, and then say so
(docs/decisions.md, "Budgets in work")."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import numpy as np
import pytest

from margin_solver.bench.measure.search_quality import make_instance
from margin_solver.bench.realdata import load_digits_images
from margin_solver.core.data import PaperDistribution
from margin_solver.minnorm.solve import solve_min_norm


def _paper(n: int, seed: int, scale: float):
    ds = PaperDistribution(d=2000, T=2, snr=math.sqrt(4 / n), eta=0.15).sample(n, seed=seed)
    return ds.X, ds.y, scale / math.sqrt(2000)


def _digits(n: int, seed: int, scale: float):
    # images of 3 and 8 cut into their top and bottom halves (T = 2, d = 32); R in units of
    # the tokens' root mean square norm
    images, labels = load_digits_images()
    keep = np.flatnonzero(np.isin(labels, (3, 8)))
    pick = np.random.default_rng(seed).choice(keep, size=n, replace=False)
    X = images[pick].reshape(n, 2, 32)
    return X, np.where(labels[pick] == 3, 1.0, -1.0), scale / math.sqrt(np.mean(X**2) * 32)


def _gaussian_n_above_d():
    # n = 6 > d = 2: the finite-R bound branches on boxes of p and certifies at 9.9e-5
    X, y = make_instance("gaussian", 6, 2, 2, 5)
    return X, y, 10 / math.sqrt(2)


#: The instances, each ending in a different way: certified by the Lagrangian bound (paper,
#: n = 12, R sqrt(d) = 1), the score-box search stopped after its SVMs without progress (the
#: others but the last; n = 40 is the Lagrangian bound by SCS, whose budget is its
#: iterations), the search over boxes of p closing the gap (gaussian).
CASES = {
    "paper n=12 R sqrt(d)=1": lambda: _paper(12, 0, 1.0),
    "paper n=12 R sqrt(d)=10": lambda: _paper(12, 0, 10.0),
    "paper n=40 R sqrt(d)=1": lambda: _paper(40, 4, 1.0),
    "digits halves n=10": lambda: _digits(10, 1, 1.0),
    "gaussian n=6 > d=2": _gaussian_n_above_d,
}


#: Smaller budgets than the defaults (2,000 SVMs without progress, 2,500 SCS iterations), to
#: keep the suite short: what is tested is that every budget is a count, whatever its size.
#: (The stall budget gives these cases the same gaps as the default; the SCS budget, the
#: larger part of the n = 40 case, gives its Lagrangian bound less.)
BUDGETS = {"bound_stall_nodes": 300, "lagrangian_scs_iters": 300}


def _answer(case: str) -> tuple[float, str, float, int]:
    X, y, R = CASES[case]()
    res = solve_min_norm(X, y, R=R, certify=True, options=BUDGETS)
    return res.norm, res.status, res.gap, res.work


@pytest.fixture(scope="module")
def normal_speed() -> dict[str, tuple[float, str, float, int]]:
    """Every case's answer on the real clock, computed once for the module."""
    return {case: _answer(case) for case in CASES}


def _scale_the_clock(monkeypatch, factor: float) -> None:
    """``time.perf_counter`` and ``time.monotonic`` run ``factor`` times as fast as real time
    from now on (every module reads them as ``time.perf_counter()``)."""
    for name in ("perf_counter", "monotonic"):
        real = getattr(time, name)
        origin = real()

        def scaled(real=real, origin=origin) -> float:
            return origin + (real() - origin) * factor

        monkeypatch.setattr(time, name, scaled)


@pytest.mark.slow
@pytest.mark.parametrize("factor", [0.1, 10.0], ids=["slow clock", "fast clock"])
def test_the_same_answer_on_a_slow_and_a_fast_clock(normal_speed, monkeypatch, factor):
    # the old default gave the bound 30 s of this clock in shares of a quarter and a half:
    # on the fast clock its stages stopped sooner, on the slow one later. The fast clock
    # skips the n = 40 case (the n = 12 ones take the same stages; the n = 40 one costs
    # most of the time here, in the Lagrangian bound's SCS iterations).
    _scale_the_clock(monkeypatch, factor)
    for case, expected in normal_speed.items():
        if factor > 1 and "n=40" in case:
            continue
        assert _answer(case) == expected, case


@pytest.mark.slow
def test_the_same_answer_beside_two_busy_processes(normal_speed):
    # the cheapest case: the busy processes slow the suite's other worker too (the issue's
    # own case, R sqrt(d) = 10, is the slow and the fast clock's)
    case = "paper n=12 R sqrt(d)=1"
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        assert _answer(case) == normal_speed[case]
    finally:
        for process in busy:
            process.kill()
            process.wait()
