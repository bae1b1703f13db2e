"""Claim 1: weight decay lam -> 0 gives the min-norm interpolator (authors' reply, W2 and Q1).

For each cell (paper data, kappa, seed) and attention radius ``R = R_scale / nu``: P_R's solution
(:func:`margin_solver.minnorm.solve.solve_min_norm`, certified for small n), the weight-decay path
(:func:`margin_solver.gd.regpath.regularization_path`, ``method = "path"``), the constrained path
(:func:`margin_solver.gd.regpath.constrained_path`, ``method = "constrained"``: ``||v|| <= r`` with
``r = r_scale * ||v*||``, ``||v*||`` P_R's norm at margin 1, so ``r_scale`` is the largest
margin an interpolator of norm ``r`` can have if P_R's point is the global one; its ``mu``
column is the multiplier of ``||v|| <= r``, the weight decay at which the point is stationary)
and weight-decayed GD from zero at each ``lam`` (``method = "gd-wd"``: the authors' procedure;
its decay ``(lam / 2)(||v||^2 + ||p||^2)`` also acts on ``p``, capped at ``R``). Each row
compares the point with P_R's: cosines of ``v`` and ``p``, the share of training samples
attending most to the same token, and the margin-normalised norm ``||v|| / min margin`` over
P_R's value.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from margin_solver.analysis.compare import compare
from margin_solver.analysis.metrics import evaluate
from margin_solver.bench.claim_runner import ClaimTask, pick, read_claim_rows, run_and_plot
from margin_solver.bench.plots import save_figure
from margin_solver.bench.style import figure_style
from margin_solver.bench.sweeps import Cell
from margin_solver.gd.endpoints import gradient_descent, token_scale
from margin_solver.gd.regpath import constrained_path, regularization_path
from margin_solver.minnorm.solve import solve_min_norm

FIELDS = (
    "n",
    "d",
    "kappa",
    "R_scale",
    "seed",
    "method",
    "lam",
    "r_scale",
    "R",
    "mu",
    "status",
    "ref_status",
    "cos_v",
    "cos_p",
    "same_token",
    "norm_ratio",
    "train_error",
    "test_error_clean",
    "ref_test_error_clean",
    "iterations",
    "seconds",
)
KEY_FIELDS = ("n", "d", "kappa", "R_scale", "seed", "method", "lam", "r_scale")
TEXT = ("method", "status", "ref_status")
SWEEP_SEED = 2410_07746


def regpath_cell(
    train: Any,
    test: Any,
    init: np.random.SeedSequence,
    *,
    R_scale: float,
    lambdas: list[float],
    r_scales: list[float],
    gd_steps: int,
    certify_max_n: int,
) -> list[dict[str, Any]]:
    """Rows of one cell: both paths and weight-decayed GD, against P_R."""
    R = R_scale / np.sqrt(token_scale(train.X))
    ref = solve_min_norm(
        train, R=R, certify=train.n <= certify_max_n, seed=int(init.generate_state(1)[0])
    )
    if ref.v is None:
        return [{"method": "min-norm", "lam": 0.0, "R": R, "status": ref.status}]
    against = (ref, evaluate(ref.v, ref.p, test).error_clean, train, test, R)
    rows = []
    path = regularization_path(train, R=R, lambdas=lambdas)
    for pt in path.points:
        rows.append(
            _row(
                against,
                "path",
                pt.v,
                pt.p,
                pt.status,
                pt.iterations,
                path.solve_time / len(path.points),
                lam=pt.lam,
            )
        )
    r_scales = sorted(r_scales)
    cpath = constrained_path(train, R=R, radii=[s * ref.norm for s in r_scales])
    for s, pt in zip(r_scales, cpath.points):
        rows.append(
            _row(
                against,
                "constrained",
                pt.v,
                pt.p,
                pt.status,
                pt.iterations,
                cpath.solve_time / len(cpath.points),
                r_scale=s,
                mu=pt.lam,
            )
        )
    for lam in lambdas:
        t0 = time.perf_counter()
        res = gradient_descent(
            train,
            schedule="constant",
            steps=gd_steps,
            weight_decay=lam,
            R=R,
            record_steps=[gd_steps],
        )
        rows.append(
            _row(
                against,
                "gd-wd",
                res.v,
                res.p,
                res.status,
                res.nit,
                time.perf_counter() - t0,
                lam=lam,
            )
        )
    return rows


def _row(
    against: tuple,
    method: str,
    v: np.ndarray,
    p: np.ndarray,
    status: str,
    iterations: int,
    seconds: float,
    **columns: float,
) -> dict:
    """A row comparing ``(v, p)`` with P_R's. ``against``: (P_R's result, its clean test
    error, train, test, R); ``columns``: the row's ``lam``, ``r_scale`` or ``mu``."""
    ref, ref_test, train, test, R = against
    cmp = compare(SimpleNamespace(v=v, p=p), ref, train)
    fit, held = evaluate(v, p, train), evaluate(v, p, test)
    ratio = np.linalg.norm(v) / fit.min_margin / ref.norm if fit.min_margin > 0 else None
    return {
        "method": method,
        **columns,
        "R": R,
        "status": status,
        "ref_status": ref.status,
        "cos_v": cmp.cos_v,
        "cos_p": cmp.cos_p,
        "same_token": cmp.same_token_train,
        "norm_ratio": ratio,
        "train_error": fit.error,
        "test_error_clean": held.error_clean,
        "ref_test_error_clean": ref_test,
        "iterations": iterations,
        "seconds": seconds,
    }


def tasks(size: str) -> list[ClaimTask]:
    """The study's cells at ``size``."""
    n = pick(size, 8, 24, 40)
    d = pick(size, 100, 1000, 2000)
    kappas = pick(size, [4.0], [0.5, 4.0], [0.5, 2.0, 4.0, 8.0])
    R_scales = pick(size, [10.0], [3.0, 30.0], [3.0, 10.0, 30.0, 100.0])
    options = {
        "lambdas": pick(
            size,
            [1e-1, 1e-3],
            np.geomspace(1e-1, 1e-6, 6).tolist(),
            np.geomspace(1e-1, 1e-8, 8).tolist(),
        ),
        # Up to r = 32 ||v*||: multipliers down to ~1e-15, past the lam grid's end.
        "r_scales": pick(
            size, [1.0, 8.0], [2.0**k for k in range(-1, 6)], [2.0**k for k in range(-1, 7)]
        ),
        "gd_steps": pick(size, 200, 1000, 10000),
        "certify_max_n": 16,
    }
    out = []
    for kappa in kappas:
        for R_scale in R_scales:
            for seed in range(pick(size, 1, 1, 5)):
                cell = Cell(n, d, 2, None, kappa, 0.1, seed, "regpath")
                key = {"n": n, "d": d, "kappa": kappa, "R_scale": R_scale, "seed": seed}
                out.append(
                    ClaimTask(
                        key,
                        cell,
                        pick(size, 100, 500, 2000),
                        SWEEP_SEED,
                        regpath_cell,
                        {**options, "R_scale": R_scale},
                    )
                )
    return out


@figure_style()
def plot(csv: Path, png: Path) -> Path:
    """cos(v, v*) and cos(p, p*) against the weight decay (the constrained path's at its
    multiplier mu), one column per kappa, one line per seed (from the CSV only)."""
    from matplotlib.figure import Figure

    rows = [r for r in read_claim_rows(csv, FIELDS, TEXT) if r["method"] in STYLES]
    kappas = sorted({r["kappa"] for r in rows})
    fig = Figure(figsize=(max(3.6 * len(kappas), 9.0), 6.4), layout="constrained")
    axes = fig.subplots(2, len(kappas), squeeze=False, sharex=True, sharey="row")
    colours = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]
    for j, kappa in enumerate(kappas):
        sub = [r for r in rows if r["kappa"] == kappa]
        for i, col in enumerate(("cos_v", "cos_p")):
            ax = axes[i, j]
            # One line per seed: a cell can reach another stationary point than P_R's, and a
            # mean over seeds would hide that.
            for c, R_scale in enumerate(sorted({r["R_scale"] for r in sub})):
                for method, style in STYLES.items():
                    for seed in sorted({r["seed"] for r in sub}):
                        line = sorted(
                            (_decay(r), r[col])
                            for r in sub
                            if r["R_scale"] == R_scale
                            and r["method"] == method
                            and r["seed"] == seed
                        )
                        line = [(x, y) for x, y in line if x > 0]  # mu = 0: inside the ball
                        if not line:
                            continue
                        ax.plot(
                            *zip(*line),
                            style,
                            ms=3,
                            lw=1,
                            alpha=0.8,
                            color=colours[c % len(colours)],
                            label=f"{method}, R = {R_scale:g}/$\\nu$" if seed == 0 else None,
                        )
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.set_title(f"$\\kappa$ = {kappa:g}" if i == 0 else "")
            ax.set_ylabel(r"$\cos(v, v^*)$" if i == 0 else r"$\cos(p, p^*)$")
    axes[0, 0].invert_xaxis()  # shared by every panel: the decay falls to the right
    axes[0, 0].legend(fontsize=7)
    fig.supxlabel(
        r"weight decay $\lambda$; constrained path ($||v|| \leq r$): its multiplier "
        r"$\mu$ (log scale, decreasing)"
    )
    r0 = rows[0]
    fig.suptitle(
        f"Weight-decay and constrained paths vs the min-norm interpolator $P_R$: "
        f"n={r0['n']:g}, d={r0['d']:g}, T=2, $\\eta$=0.1 (one line per seed)"
    )
    return save_figure(fig, png)


#: Line style of each method in the figure.
STYLES = {"path": "-o", "constrained": ":^", "gd-wd": "--s"}


def _decay(row: dict[str, Any]) -> float:
    """The weight decay a row sits at: ``lam``, or the constrained path's multiplier ``mu``."""
    return row["mu"] if row["method"] == "constrained" else row["lam"]


def run(out: Path, size: str, **backend: Any) -> tuple[Path, Path, str, str]:
    """Run (or resume) the study into ``out``; return (csv, png, markdown table, message).
    ``backend``: ``jobs``, ``scheduler``, ``progress`` of the claim runner."""
    from margin_solver.bench.studies import markdown_table

    csv, png = out / "claim_regpath.csv", out / "claim_regpath.png"
    message, rows = run_and_plot(tasks(size), csv, png, (FIELDS, KEY_FIELDS, TEXT), plot, **backend)
    table = markdown_table(
        rows,
        ("kappa", "R_scale", "method", "lam", "r_scale"),
        ("cos_v", "cos_p", "same_token", "norm_ratio", "test_error_clean", "iterations", "seconds"),
    )
    counts = []
    for method in ("path", "constrained"):
        mine = [r for r in rows if r["method"] == method]
        counts.append(f"{sum(r['status'] == 'converged' for r in mine)} of {len(mine)}")
    certified = sum(r["ref_status"] == "optimal" for r in rows if r["method"] == "path")
    return (
        csv,
        png,
        (
            f"Path points converged: weight-decay path {counts[0]}, constrained path "
            f"{counts[1]}; P_R certified (status optimal) in {certified} of the "
            "weight-decay path's rows.\n\n" + table
        ),
        message,
    )
