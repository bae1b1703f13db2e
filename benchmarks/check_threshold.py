"""The checker's kappa band and interpolation row, measured.

A command shim over :mod:`margin_solver.bench.check_threshold`.

Usage::

    .venv/bin/python benchmarks/check_threshold.py --out results/check_threshold
"""

import sys

from margin_solver.bench.check_threshold import main

if __name__ == "__main__":
    sys.exit(main())
