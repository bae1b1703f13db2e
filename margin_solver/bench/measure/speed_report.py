"""Solver-speed report: the speed benchmarks of the v-step, the min-norm solver and GD, run
side by side and gathered in one markdown file.

The benchmarks themselves are the ``main`` functions of
:mod:`margin_solver.bench.measure.vstep_speed`, :mod:`margin_solver.bench.measure.minnorm_scaling`
and :mod:`margin_solver.bench.measure.gd_speed` (each documented in ``docs/benchmarks.md``;
``benchmarks/NAME.py`` are command shims over them). This module runs them in this process with
sizes matching the bench size, keeps each one's JSON and printed table, and records the equivalent
command, exit code and wall time per benchmark in a CSV (a finished benchmark is not re-run when the
report is resumed).
"""

from __future__ import annotations

import contextlib
import io
import os
import time
import traceback
from pathlib import Path

from margin_solver.bench.resultlog import ResultLog, progress_message, read_rows
from margin_solver.core.fileio import atomic_write_text

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
        # its own --quick took 573 s of bench --quick's (under load; docs/decisions.md)
        "quick": None,
        "full": ["--out", "{out}"],
    },
    "gd_speed": {
        "tiny": None,
        "quick": ["--repeats", "1", "--out", "{out}"],
        "full": ["--out", "{out}"],
    },
}


def _run_main(script: str, argv: list[str]) -> tuple[int, str]:
    """Exit code and printed output of ``margin_solver.bench.SCRIPT.main(argv)``.

    A benchmark that raises is reported (code 1, the traceback in the output) rather than
    ending the bench run: the other benchmarks and studies still run.
    """
    # vstep_speed imports cvxpy: load the benchmarks only when the report runs.
    from margin_solver.bench.measure import gd_speed, minnorm_scaling, vstep_speed

    main = {"vstep_speed": vstep_speed, "minnorm_scaling": minnorm_scaling, "gd_speed": gd_speed}[
        script
    ].main
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = int(main(argv) or 0)
    except SystemExit as exc:  # argparse rejecting the arguments
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception:  # recorded in the report, see the docstring
        return 1, out.getvalue() + "\n[error]\n" + traceback.format_exc()
    return code, out.getvalue()


def run_speed_report(out_dir: str | os.PathLike, size: str) -> tuple[Path, Path, str]:
    """Run the speed benchmarks for ``size``; write ``speed.csv`` and ``speed.md`` in ``out_dir``.

    Returns
    -------
    (csv, markdown, summary) : (Path, Path, str)
    """
    out = Path(out_dir)
    csv, md = out / "speed.csv", out / "speed.md"
    ran = 0
    with ResultLog(csv, FIELDS, KEY_FIELDS) as log:
        for script, sizes in SCRIPT_ARGS.items():
            args = sizes.get(size)
            if args is None or log.key_of({"script": script, "size": size}) in log.done:
                continue
            json_out = out / f"speed_{script}.json"
            argv = [a.replace("{out}", str(json_out)) for a in args]
            command = " ".join(["python", "-m", f"margin_solver.bench.measure.{script}", *argv])
            started = time.perf_counter()
            code, text = _run_main(script, argv)
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
