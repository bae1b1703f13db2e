"""Do the default two-step step sizes work? (:mod:`margin_solver.bench.gd_defaults`).

Usage::

    .venv/bin/python benchmarks/gd_defaults.py --out results/gd_defaults.csv [--quick]
"""

import sys

from margin_solver.bench.gd_defaults import main

if __name__ == "__main__":
    sys.exit(main())
