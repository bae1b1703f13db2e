"""Label-noise sweep: clean and noisy-label test error against eta.

Usage: python benchmarks/eta_sweep.py [--quick | --tiny] [--out DIR] [--jobs N] [--scheduler ADDRESS]
(the full size by default). Writes eta.csv, eta.json, eta.png and eta.md under --out.
"""

import sys

from margin_solver.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "--only", "eta", *sys.argv[1:]]))
