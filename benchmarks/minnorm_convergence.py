"""Convergence of the P_R descent, plain against quasi-Newton steps
(:mod:`margin_solver.bench.minnorm_convergence`).

Usage::

    .venv/bin/python benchmarks/minnorm_convergence.py
"""

import sys

from margin_solver.bench.minnorm_convergence import main

if __name__ == "__main__":
    sys.exit(main())
