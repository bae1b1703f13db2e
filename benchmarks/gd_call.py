"""A whole short ``gradient_descent`` call against one torch step
(:mod:`margin_solver.bench.gd_call`).

Usage::

    .venv/bin/python benchmarks/gd_call.py [--repeats 7]
"""

import sys

from margin_solver.bench.gd_call import main

if __name__ == "__main__":
    sys.exit(main())
