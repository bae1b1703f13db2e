"""Phase diagram over n x SNR: clean test error and benign/harmful/no-interpolation map, with SNR = 1/sqrt(n).

Usage: python benchmarks/phase_diagram.py [--quick | --tiny] [--out DIR] [--jobs N] [--scheduler ADDRESS]
(the full size by default). Writes phase.csv, phase.json, phase.png and phase.md under --out.
"""

import sys

from margin_solver.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "--only", "phase", *sys.argv[1:]]))
