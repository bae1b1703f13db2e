"""Solver-speed report: the speed benchmarks of the v-step, the min-norm solver and GD, run
side by side and gathered in one markdown file.

The benchmarks themselves are the scripts ``benchmarks/vstep_speed.py``,
``benchmarks/minnorm_scaling.py`` and ``benchmarks/gd_speed.py`` (each documented in
``docs/benchmarks.md``); this module only runs them with sizes matching the bench size, keeps
each one's JSON and printed table, and records the command, exit code and wall time per
script in a CSV (a finished script is not re-run when the report is resumed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from margin_solver.fileio import atomic_write_text
from margin_solver.resultlog import ResultLog, progress_message, read_rows

FIELDS = ("script", "size", "command", "exit_code", "seconds", "output")
KEY_FIELDS = ("script", "size")

#: Arguments per script and bench size (None: not run at that size); ``{out}`` is the JSON path.
SCRIPT_ARGS: dict[str, dict[str, list[str] | None]] = {
    "vstep_speed": {
        "tiny": ["--n", "20", "--d", "200", "--repeats", "1", "--json", "{out}"],
        "quick": ["--n", "100", "--d", "2000", "--repeats", "1", "--json", "{out}"],
        "full": ["--n", "100", "--d", "10000", "--repeats", "3", "--json", "{out}"],
    },
    "minnorm_scaling": {
        "tiny": None,
        "quick": ["--quick", "--out", "{out}"],
        "full": ["--out", "{out}"],
    },
    "gd_speed": {
        "tiny": None,
        "quick": ["--repeats", "1", "--out", "{out}"],
        "full": ["--out", "{out}"],
    },
}


def benchmarks_dir() -> Path | None:
    """``benchmarks/`` of the source checkout this package runs from, or None."""
    path = Path(__file__).resolve().parent.parent / "benchmarks"
    return path if path.is_dir() else None


def run_speed_report(
    out_dir: str | os.PathLike, size: str, timeout: float = 3600.0
) -> tuple[Path, Path, str]:
    """Run the speed scripts for ``size``; write ``speed.csv`` and ``speed.md`` under ``out_dir``.

    Returns
    -------
    (csv, markdown, summary) : (Path, Path, str)
    """
    out = Path(out_dir)
    csv, md = out / "speed.csv", out / "speed.md"
    bench = benchmarks_dir()
    ran = 0
    with ResultLog(csv, FIELDS, KEY_FIELDS) as log:
        for script, sizes in SCRIPT_ARGS.items():
            args = sizes.get(size)
            path = None if bench is None else bench / f"{script}.py"
            if args is None or log.key_of({"script": script, "size": size}) in log.done:
                continue
            json_out = out / f"speed_{script}.json"
            argv = [a.replace("{out}", str(json_out)) for a in args]
            command = " ".join(["python", f"benchmarks/{script}.py", *argv])
            if path is None or not path.is_file():
                log.append(
                    {
                        "script": script,
                        "size": size,
                        "command": command,
                        "exit_code": None,
                        "seconds": None,
                        "output": f"benchmarks/{script}.py not found (run from a source checkout)",
                    }
                )
                continue
            started = time.perf_counter()
            try:
                proc = subprocess.run(
                    [sys.executable, str(path), *argv],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    cwd=path.parent.parent,
                    check=False,
                )
                code, text = (
                    proc.returncode,
                    proc.stdout + (f"\n[stderr]\n{proc.stderr}" if proc.returncode else ""),
                )
            except subprocess.TimeoutExpired:
                code, text = None, f"timed out after {timeout:g} s"
            seconds = time.perf_counter() - started
            log.append(
                {
                    "script": script,
                    "size": size,
                    "command": command,
                    "exit_code": code,
                    "seconds": seconds,
                    "output": text.replace("\n", "\\n"),
                }
            )
            ran += 1
    rows = [r for r in read_rows(csv, FIELDS) if r["size"] == size]
    parts = [
        f"Speed benchmarks of the earlier issues, run one after the other at bench size {size!r}.\n"
    ]
    for r in rows:
        secs = f"{float(r['seconds']):.1f} s" if r["seconds"] else "-"
        parts.append(
            f"### {r['script']}\n\n`{r['command']}` (exit {r['exit_code'] or '-'}, {secs})\n\n"
            "```\n" + r["output"].replace("\\n", "\n").strip() + "\n```\n"
        )
    atomic_write_text(md, "\n".join(parts))
    return csv, md, progress_message("speed script", "run", ran, len(rows) - ran)
