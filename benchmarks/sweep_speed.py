"""Sweep throughput per backend (:mod:`margin_solver.bench.sweep_speed`).

Usage::

    .venv/bin/python benchmarks/sweep_speed.py --grid second --jobs 1 2 [--scheduler ADDRESS]
"""

import sys

from margin_solver.bench.sweep_speed import main

if __name__ == "__main__":
    sys.exit(main())
