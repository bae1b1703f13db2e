"""Trajectory study: GD iterates against the min-norm interpolator of the same data.

For each seed, one training set of the paper's distribution, its min-norm solution (the
``min-norm`` sweep method's radius rule) and GD from zero with a constant step, evaluated at
checkpoints: the margin-normalised norm ``||v|| / min_margin``, the normalised margin
``min_margin / ||v||``, the cosines of ``v`` and ``p`` with the min-norm ``v*`` and ``p*``, the
fraction of training samples attending most to the same token, attention on the signal split
clean / noisy, and errors. GD from zero is deterministic, so the iterate at step k is the
endpoint of a k-step run; each checkpoint is one such run. The two-step endpoint is one more
row (``method = "gd-two-step"``, step 2).

Rows go to a :class:`~margin_solver.bench.resultlog.ResultLog` as they are computed (key: seed,
method, step), so an interrupted study resumes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from margin_solver.analysis.compare import compare
from margin_solver.bench.methods import min_norm_solution, model_fields
from margin_solver.bench.resultlog import ResultLog, progress_message
from margin_solver.bench.sweeps import Cell, cell_seeds
from margin_solver.core.data import PaperDistribution
from margin_solver.gd.endpoints import gradient_descent

FIELDS = (
    "n",
    "d",
    "kappa",
    "eta",
    "seed",
    "method",
    "step",
    "norm",
    "normalized_margin",
    "cos_v",
    "cos_p",
    "same_token",
    "train_error",
    "test_error_clean",
    "attn_signal_clean",
    "attn_signal_noisy",
    "seconds",
)
KEY_FIELDS = ("n", "d", "kappa", "eta", "seed", "method", "step")


def run_trajectories(
    csv: str | os.PathLike,
    n: int,
    d: int,
    kappa: float,
    eta: float,
    seeds: int,
    checkpoints: list[int],
    n_test: int,
    sweep_seed: int,
) -> str:
    """Compute (or resume) the trajectory rows into ``csv``; return a one-line summary."""
    written = skipped = 0
    with ResultLog(csv, FIELDS, KEY_FIELDS) as log:
        for seed in range(seeds):
            cell = Cell(n, d, 2, None, kappa, eta, seed, "trajectory")
            base = {"n": n, "d": d, "kappa": kappa, "eta": eta, "seed": seed}
            planned = (
                [("min-norm", None)]
                + [("gd-two-step", 2)]
                + [("gd-constant", k) for k in checkpoints]
            )
            todo = [
                (m, k)
                for m, k in planned
                if log.key_of({**base, "method": m, "step": k}) not in log.done
            ]
            skipped += len(planned) - len(todo)
            if not todo:
                continue
            seeds_ = cell_seeds(cell, sweep_seed)
            dist = PaperDistribution(d=d, T=2, snr=cell.snr, eta=eta)
            train, test = dist.sample(n, seeds_.train), dist.sample(n_test, seeds_.test)
            t0 = time.perf_counter()
            ref, _ = min_norm_solution(train, {}, seeds_.init)
            ref_seconds = time.perf_counter() - t0
            if ref.v is None:
                raise RuntimeError(f"min-norm found no interpolator for seed {seed}: {ref.message}")
            for method, step in todo:
                t0 = time.perf_counter()
                if method == "min-norm":
                    v, p, seconds = ref.v, ref.p, ref_seconds
                else:
                    schedule = "two-step" if method == "gd-two-step" else "constant"
                    res = gradient_descent(
                        train, schedule=schedule, steps=step, record_steps=[step]
                    )
                    v, p, seconds = res.v, res.p, time.perf_counter() - t0
                log.append(
                    {
                        **base,
                        "method": method,
                        "step": step,
                        "seconds": seconds,
                        **_row(v, p, ref, train, test),
                    }
                )
                written += 1
    return progress_message("row", "computed", written, skipped)


def _row(v: np.ndarray, p: np.ndarray, ref: Any, train, test) -> dict[str, Any]:
    fields = model_fields(v, p, train, test)
    cmp = compare(SimpleNamespace(v=v, p=p), ref, train)
    return {
        "norm": fields["norm"],
        "normalized_margin": fields["min_margin"] / np.linalg.norm(v)
        if np.linalg.norm(v) > 0
        else None,
        "cos_v": cmp.cos_v,
        "cos_p": cmp.cos_p,
        "same_token": cmp.same_token_train,
        "train_error": fields["train_error"],
        "test_error_clean": fields["test_error_clean"],
        "attn_signal_clean": fields["attn_signal_clean"],
        "attn_signal_noisy": fields["attn_signal_noisy"],
    }


def read_trajectories(csv: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a trajectory CSV with numbers as floats (NaN where empty)."""
    from margin_solver.bench.resultlog import read_rows

    return [
        {k: (v if k == "method" else float(v) if v != "" else float("nan")) for k, v in r.items()}
        for r in read_rows(csv, FIELDS)
    ]


def plot_trajectories(csv: str | os.PathLike, png: str | os.PathLike) -> Path:
    """Four panels against the GD step: norm, cosines, attention, errors; the min-norm
    solution (dashed) and the two-step endpoint (dotted) drawn as reference levels in the
    colour of the quantity. ``png`` is the output file; its suffix picks the format."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from margin_solver.bench.plots import plain_log_labels, save_figure
    from margin_solver.bench.study_plots import aggregate
    from margin_solver.bench.style import figure_style

    rows = read_trajectories(csv)
    gd = [r for r in rows if r["method"] == "gd-constant"]
    ref = {m: [r for r in rows if r["method"] == m] for m in ("min-norm", "gd-two-step")}
    panels = [
        ("Norm at margin 1", [("norm", None)], r"$\|v_t\|\,/\,\mathrm{min}_i\, y_i f(X_i)$", True),
        (
            "Closeness to the min-norm solution",
            [
                ("cos_v", r"$\cos(v_t, v^*)$"),
                ("cos_p", r"$\cos(p_t, p^*)$"),
                ("same_token", "same top token as min-norm"),
            ],
            "cosine / fraction of samples",
            False,
        ),
        (
            "Attention on the signal token (train)",
            [("attn_signal_clean", "clean samples"), ("attn_signal_noisy", "flipped samples")],
            "mean attention",
            False,
        ),
        (
            "Errors",
            [
                ("test_error_clean", "clean test error"),
                ("train_error", "training error (observed labels)"),
            ],
            "error rate",
            False,
        ),
    ]
    styles = {"min-norm": "--", "gd-two-step": ":"}
    with figure_style():
        fig = Figure(figsize=(7.2, 5.9))
        axes = fig.subplots(2, 2, sharex=True)
        for ax, (title, series, ylabel, logy) in zip(axes.ravel(), panels):
            for col, label in series:
                agg = aggregate(gd, ("step",), col)
                steps = np.array(sorted(agg))[:, 0]
                mean = np.array([agg[(s,)][0] for s in steps])
                std = np.array([agg[(s,)][1] for s in steps])
                line = ax.errorbar(steps, mean, yerr=std, marker="o", ms=3, label=label)
                colour = line[0].get_color()
                if col not in (
                    "norm",
                    "attn_signal_clean",
                    "attn_signal_noisy",
                    "test_error_clean",
                ):
                    continue
                for method, style in styles.items():
                    values = np.array([r[col] for r in ref[method]], dtype=float)
                    if np.isfinite(values).any():
                        ax.axhline(
                            values[np.isfinite(values)].mean(), color=colour, ls=style, lw=1.2
                        )
            ax.set_xscale("log")
            if logy:
                ax.set_yscale("log")
                plain_log_labels(ax.yaxis)
            ax.set_title(title)
            ax.set_ylabel(ylabel)
            if any(label for _, label in series):
                ax.legend()
        for ax in axes[1]:
            ax.set_xlabel("GD step $t$ (log scale)")
        kinds = [Line2D([], [], color="dimgrey", marker="o", ms=3)] + [
            Line2D([], [], color="dimgrey", ls=style) for style in styles.values()
        ]
        fig.legend(
            kinds,
            [
                "constant-step GD at step $t$ (mean ± std)",
                "min-norm solution",
                "two-step GD endpoint",
            ],
            loc="outside lower center",
            ncols=3,
            frameon=False,
        )
        r0 = rows[0]
        fig.suptitle(
            f"GD trajectory vs the min-norm interpolator: $n = {r0['n']:g}$, $d = {r0['d']:g}$, "
            f"$\\kappa = {r0['kappa']:g}$, $\\eta = {r0['eta']:g}$, "
            f"{len(ref['min-norm'])} seeds"
        )
    return save_figure(fig, png)
