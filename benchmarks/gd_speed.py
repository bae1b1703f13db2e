"""Per-step time of our GD against PyTorch autograd (:mod:`margin_solver.bench.gd_speed`).

Usage::

    .venv/bin/python benchmarks/gd_speed.py --out results/gd_speed.json [--threads 1]
"""

import sys

from margin_solver.bench.gd_speed import main

if __name__ == "__main__":
    sys.exit(main())
