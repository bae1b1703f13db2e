"""Tokens larger than memory: generate to disk, Gram-reduce and solve, locally and on a local
Dask cluster (:mod:`margin_solver.bench.out_of_core`).

Usage::

    python benchmarks/out_of_core.py [--n 1000 --T 2 --d 1000000] [--workdir DIR] [--out FILE.json]
"""

import sys

from margin_solver.bench.out_of_core import main

if __name__ == "__main__":
    sys.exit(main())
