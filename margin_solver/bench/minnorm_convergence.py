"""Convergence of the P_R descent: plain projected-gradient, quasi-Newton and Newton steps.

Runs :func:`margin_solver.minnorm.solve_min_norm` (R = 100 / nu with nu the RMS token norm,
as the benchmark's ``min-norm`` method) on each case with the descent's plain schedule
(``options={"memory": 0, "use_bb": False, "newton": False}``: the method before the
quasi-Newton direction), the quasi-Newton one without Newton steps (``{"newton": False}``)
and with Newton steps in the score space (``{"newton": True}``), and prints status, accepted p-steps of the winning start, ||v|| and
seconds. Cases: three digits training sets (3 vs 8, T = 4 patches, ReLU lift, eta = 0.1) and
the paper's data (n = 40, T = 2, d = 2000, eta = 0.15) at kappa 0.25, 4, 8, certified.

Usage::

    .venv/bin/python benchmarks/minnorm_convergence.py [--variants quasi-Newton Newton]
"""

from __future__ import annotations

import argparse
import math
import time

from margin_solver.minnorm import solve_min_norm
from margin_solver.data import PaperDistribution
from margin_solver.gd import token_scale
from margin_solver.bench.realdata import digits_train_test

VARIANTS = {
    "plain": {"memory": 0, "use_bb": False, "newton": False},
    "quasi-Newton": {"newton": False},
    "Newton": {"newton": True},
}


def cases():
    for n, lift, seed in [(40, 1024, 0), (80, 2048, 1), (160, 2048, 2)]:
        train, _ = digits_train_test(n, 0.1, seed, seed + 1000, lift=lift, lift_seed=0)
        yield f"digits n={n} d={lift} seed={seed}", train, False
    for kappa in (0.25, 4, 8):
        ds = PaperDistribution(d=2000, T=2, snr=math.sqrt(kappa / 40), eta=0.15).sample(40, seed=1)
        yield f"paper n=40 T=2 d=2000 kappa={kappa}", ds, True


def main(argv: list[str] | None = None) -> int:
    """Print the table (markdown) on stdout; ``--variants`` picks the rows' methods."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    variants = parser.parse_args(argv).variants
    print("| case | method | status | steps | norm | lower bound | seconds |")
    print("|---|---|---|---|---|---|---|")
    for label, data, certify in cases():
        R = 100 / math.sqrt(token_scale(data.X))
        for name in variants:
            options = VARIANTS[name]
            t0 = time.perf_counter()
            res = solve_min_norm(data, R=R, certify=certify, options=options)
            elapsed = time.perf_counter() - t0
            lb = "-" if res.lower_bound is None else f"{res.lower_bound:.10g}"
            print(f"| {label} | {name} | {res.status} | {res.nit} | {res.norm:.10g} | {lb} "
                  f"| {elapsed:.2f} |", flush=True)
    return 0
