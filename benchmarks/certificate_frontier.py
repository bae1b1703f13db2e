"""How far the certified lower bound reaches (finite R; T >= 3; large n).

A command shim over :mod:`margin_solver.bench.certificate_frontier`.

Usage::

    .venv/bin/python benchmarks/certificate_frontier.py --out results/certificate_frontier.json
"""

import sys

from margin_solver.bench.certificate_frontier import main

if __name__ == "__main__":
    sys.exit(main())
