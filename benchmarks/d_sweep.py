"""Dimension sweep at fixed n, from d = 2n to d >> n^2.

Usage: python benchmarks/d_sweep.py [--quick | --tiny] [--out DIR] [--jobs N] [--scheduler ADDRESS]
(the full size by default). Writes dsweep.csv, dsweep.json, dsweep.png and dsweep.md under --out.
"""

import sys

from margin_solver.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "--only", "dsweep", *sys.argv[1:]]))
