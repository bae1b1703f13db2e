"""Do the default two-step step sizes work?  A grid over kappa, n and d (and the constants).

For every (n, d, kappa, seed) a training and a test set are drawn from the paper's model
(T = 2, eta = 0.15 by default) and two-step GD from zero runs with
:func:`margin_solver.gd.endpoints.default_step_sizes` for each pair of constants
``(first_step_scale c0, gap_per_log_n g)`` in the grid; the first pair is the package default.
One CSV row per run and a figure (same name, ``.png``); the printed markdown table averages
over seeds.

    .venv/bin/python -m margin_solver.bench.measure.gd_defaults --out results/gd_defaults.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import sys
import time

import numpy as np

from margin_solver.bench.page import rows_table
from margin_solver.bench.plots import plot_step_size_grid
from margin_solver.bench.provenance import run_metadata
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import atomic_write_text, write_json
from margin_solver.gd.endpoints import (
    FIRST_STEP_SCALE,
    SCORE_GAP_PER_LOG_N,
    default_step_sizes,
    gradient_descent,
)

FIELDS = [
    "n",
    "d",
    "kappa",
    "c0",
    "g",
    "seed",
    "interpolates",
    "train_error",
    "test_error_clean",
    "test_error",
    "attn_signal_clean",
    "attn_signal_noisy",
    "seconds",
]


def run(sizes, kappas, constants, seeds, eta, n_test, constant_steps):
    """Two-step runs for each constant pair; ``constant_steps > 0`` adds a long constant-step
    run (default step) per dataset, labelled ``c0 = g = "const<steps>"``."""
    rows = []
    for (n, d), kappa, seed in itertools.product(sizes, kappas, range(seeds)):
        dist = PaperDistribution(d=d, T=2, snr=float(np.sqrt(kappa / n)), eta=eta)
        train, test = dist.sample_train_test(n, n_test, seed=seed)
        runs = []
        for c0, g in constants:
            b0, b1 = default_step_sizes(train.X, c0, g)
            runs.append(((c0, g), {"beta0": b0, "beta1": b1}))
        if constant_steps:
            label = f"const{constant_steps}"
            runs.append(((label, label), {"schedule": "constant", "steps": constant_steps}))
        for (c0, g), options in runs:
            t0 = time.perf_counter()
            last = options.get("steps", 2)
            res = gradient_descent(train, test=test, record_steps=[last], **options)
            tj = res.trajectory
            rows.append(
                {
                    "n": n,
                    "d": d,
                    "kappa": kappa,
                    "c0": c0,
                    "g": g,
                    "seed": seed,
                    "interpolates": int(res.interpolates),
                    "train_error": tj["train_error"][-1],
                    "test_error_clean": tj["test_error_clean"][-1],
                    "test_error": tj["test_error"][-1],
                    "attn_signal_clean": tj["attn_signal_clean"][-1],
                    "attn_signal_noisy": tj["attn_signal_noisy"][-1],
                    "seconds": time.perf_counter() - t0,
                }
            )
    return rows


def summary_rows(rows: list[dict]) -> list[dict]:
    """One row per (n, d, c0, g, kappa): seeds that interpolate, mean errors and attention."""
    keys = sorted({(r["n"], r["d"], str(r["c0"]), str(r["g"]), r["kappa"]) for r in rows})
    out = []
    for key in keys:
        grp = [r for r in rows if (r["n"], r["d"], str(r["c0"]), str(r["g"]), r["kappa"]) == key]
        mean = {f: float(np.nanmean([r[f] for r in grp])) for f in FIELDS[6:12]}
        out.append(
            {
                **dict(zip(("n", "d", "c0", "g", "kappa"), key, strict=True)),
                **mean,  # its share of interpolating runs is replaced by the count
                "interpolates": f"{int(sum(r['interpolates'] for r in grp))}/{len(grp)}",
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line of the study: the grid into ``--out`` (CSV), its figure and a table."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default="results/gd_defaults.csv")
    ap.add_argument("--json", metavar="FILE", help="also write the summary and the runs as JSON")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--eta", type=float, default=0.15)
    ap.add_argument("--n-test", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="one size, three kappas, two seeds")
    ap.add_argument(
        "--constant-steps",
        type=int,
        default=2000,
        help="also run constant-step GD this long (0: skip)",
    )
    args = ap.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    default = (FIRST_STEP_SCALE, SCORE_GAP_PER_LOG_N)
    if args.quick:
        sizes, kappas, constants, seeds = [(40, 5000)], [2, 4, 8], [default], 2
    else:
        sizes = [(40, 2000), (40, 20000), (100, 20000), (200, 20000)]
        kappas = [1, 2, 3, 4, 6, 8, 12]
        constants = [default, (0.1, 1.0), (0.1, 2.0), (0.5, 0.5), (0.01, 0.5)]
        seeds = args.seeds
    rows = run(sizes, kappas, constants, seeds, args.eta, args.n_test, args.constant_steps)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(args.out, buf.getvalue())
    figure = args.out.rsplit(".", 1)[0] + ".png"
    n, d = sizes[1] if len(sizes) > 1 else sizes[0]
    plot_step_size_grid(rows, figure, n=n, d=d, default=(str(default[0]), str(default[1])))
    table = summary_rows(rows)
    if args.json:
        write_json(args.json, {"meta": meta, "table": table, "rows": rows})
    print(rows_table(table, None))
    print(f"\nwrote {args.out} and {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
