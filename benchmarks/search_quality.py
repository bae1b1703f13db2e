"""Quality of solve_min_norm's answer against a patient independent search
(:mod:`margin_solver.bench.search_quality`).

Usage::

    .venv/bin/python benchmarks/search_quality.py [--instances 250] [--out FILE.json]
"""

import sys

from margin_solver.bench.search_quality import main

if __name__ == "__main__":
    sys.exit(main())
