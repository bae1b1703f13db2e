"""Start-up time: wall-clock of fresh processes that import the package or print CLI help.

Each command runs ``--repeats`` times in a new interpreter (the one running this module); the
table gives the minimum and the median. On a shared machine only the minimum is a property of
the code; the median says how loaded the machine was.

Usage::

    python -m margin_solver.bench.measure.startup_time [--repeats 5] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.fileio import write_json

#: What a user starts: the import alone, the CLI's help, and the help of two verbs.
COMMANDS = (
    ("-c", "import margin_solver"),
    ("-m", "margin_solver", "--help"),
    ("-m", "margin_solver", "solve", "--help"),
    ("-m", "margin_solver", "bench", "--help"),
)


def time_command(args: Sequence[str], repeats: int) -> list[float]:
    """Wall-clock seconds of ``python ARGS`` run ``repeats`` times, output discarded."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    """Time each of :data:`COMMANDS`, print the table, optionally write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    rows = []
    for command in COMMANDS:
        seconds = time_command(command, args.repeats)
        shown = " ".join(f'"{a}"' if " " in a else a for a in command)
        rows.append(
            {
                "command": f"`python {shown}`",
                "min s": min(seconds),
                "median s": statistics.median(seconds),
            }
        )
        print(f"{rows[-1]['command']}: min {min(seconds):.2f} s", flush=True)
    if args.out:
        write_json(args.out, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
