"""Certified gaps at R sqrt(d) = 100 (:mod:`margin_solver.bench.certified_gaps`).

Usage::

    .venv/bin/python benchmarks/certified_gaps.py [--large]
"""

import sys

from margin_solver.bench.certified_gaps import main

if __name__ == "__main__":
    sys.exit(main())
