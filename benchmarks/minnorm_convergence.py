"""Convergence of the P_R descent on the digits study's cells and the paper's data, one row
per variant (:mod:`margin_solver.bench.minnorm_convergence`).

Usage::

    .venv/bin/python benchmarks/minnorm_convergence.py [--variants quasi-Newton "SQP after 250"]
        [--n 20 40] [--seeds 0 1] [--no-paper]
"""

import sys

from margin_solver.bench.minnorm_convergence import main

if __name__ == "__main__":
    sys.exit(main())
