"""Speed of the v-step engines against the plain primal SOCP.

A command shim over :mod:`margin_solver.bench.vstep_speed`.

Usage::

    python benchmarks/vstep_speed.py --n 100 --d 10000 --repeats 3 --json results/vstep_speed.json

This shim adds the checkout's git commit to the JSON report; the package never runs git.
"""

import subprocess
import sys

from margin_solver.bench.vstep_speed import main


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], commit=_git_commit()))
