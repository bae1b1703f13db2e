"""Where and with what a measurement ran: the ``meta`` block of every benchmark results file.

One function, :func:`run_metadata`, used by every module in :mod:`margin_solver.bench.measure`
that writes a results file, so that each file records the same facts under the same keys and
:mod:`margin_solver.bench.page` can print them under its table: the date, the commit measured,
the machine (CPU model and cores, the load average when the run began: the machine may be
shared) and the versions of Python, numpy, scipy and cvxpy. No host name and no paths.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The libraries whose versions a results file records (the solver's three dependencies).
LIBRARIES = ("numpy", "scipy", "cvxpy")


def run_metadata(module: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The facts a results file records about its run.

    Parameters
    ----------
    module : str
        The measurement's dotted module name (its ``__spec__.name``).
    argv : sequence of str, optional
        Its arguments (default ``sys.argv[1:]``); with ``module`` they make the recorded
        ``command``, ``python -m MODULE ARGS``, which the page prints under the table.

    Returns
    -------
    dict
        ``date`` (UTC, ``YYYY-MM-DD``), ``commit`` (short hash of the checkout the package is
        imported from, ``+dirty`` when tracked files differ from it, ``unknown`` outside git),
        ``machine`` (``cpu``, ``cores``, ``load_average``), ``versions`` (Python and
        :data:`LIBRARIES`) and ``command``.
    """
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": _commit(),
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 2),
        },
        "versions": versions,
    }
    args = sys.argv[1:] if argv is None else list(argv)
    meta["command"] = shlex.join(["python", "-m", module, *args])
    return meta


def _commit() -> str:
    """Short hash of the git checkout holding this package, marked ``+dirty`` if modified."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what :mod:`platform` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
