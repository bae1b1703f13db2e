"""Test-suite time: one run of ``pytest`` (the project's ``addopts``: two xdist workers).

Runs ``python -m pytest -q [PYTEST_ARGS]`` from the working directory (the repository
root), prints pytest's last lines and records the counts pytest reports and the wall-clock.

Usage::

    python -m margin_solver.bench.measure.suite_time [--out FILE.json] [-- PYTEST_ARGS]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Sequence

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.fileio import write_json

#: One count of pytest's summary line ("1592 passed, 4 skipped in 346.12s").
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|warnings?)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite once; return pytest's exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", metavar="FILE.json", help="also write the result as JSON")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *args.pytest_args], capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    print("\n".join(lines[-5:]))
    counts = {word: int(k) for k, word in _COUNT.findall(lines[-1] if lines else "")}
    row = {
        "pytest": " ".join(["pytest -q", *args.pytest_args]),
        **{word: counts.get(word, 0) for word in ("passed", "failed", "skipped")},
        "wall s": wall,
        "exit code": proc.returncode,
    }
    if args.out:
        write_json(args.out, {"meta": meta, "rows": [row]})
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
