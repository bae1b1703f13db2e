"""Real data: two digit classes of scikit-learn's digits as patch tokens, n varied, label noise.

Usage: python benchmarks/digits.py [--quick | --tiny] [--out DIR] [--jobs N] [--scheduler ADDRESS]
(the full size by default). Writes digits.csv, digits.json, digits.png and digits.md under --out.
"""

import sys

from margin_solver.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "--only", "digits", *sys.argv[1:]]))
