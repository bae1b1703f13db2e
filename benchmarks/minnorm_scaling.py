"""Speed of the P_R solver and of the lower bound (:mod:`margin_solver.bench.minnorm_scaling`).

Usage::

    python benchmarks/minnorm_scaling.py [--quick] [--study whole_solve] [--out FILE.json]
"""

import sys

from margin_solver.bench.minnorm_scaling import main

if __name__ == "__main__":
    sys.exit(main())
