"""Dimension sweep at fixed n, from d = 2n to d >> n^2.

Usage: python benchmarks/d_sweep.py [--quick | --tiny] [--out DIR] [--jobs N] [--scheduler ADDRESS]
(the full size by default). Writes dsweep.csv, dsweep.json, dsweep.png and dsweep.md under --out.
"""

import sys

from margin_solver.cli.bench import study_script

if __name__ == "__main__":
    sys.exit(study_script("dsweep"))
