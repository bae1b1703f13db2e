"""Claim 4: harmful overfitting persists after many GD steps when SNR = o(1/sqrt(n))
(authors' reply, W4 and their Figure 1).

One task per cell (paper data, n, kappa = n SNR^2, seed) and weight decay: GD from zero with
the constant default step for ``steps`` steps (optionally with weight decay
``(lam / 2)(||v||^2 + ||p||^2)``), its trajectory recorded at geometric checkpoints with a
held-out test set: clean test error, training error, attention on the signal token split clean
/ flipped. Small kappa means SNR = sqrt(kappa / n) well below 1 / sqrt(n).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.bench.claim_runner import ClaimTask, pick, read_claim_rows, run_and_plot
from margin_solver.bench.plots import save_figure
from margin_solver.bench.style import figure_style
from margin_solver.bench.sweeps import Cell
from margin_solver.gd.endpoints import gradient_descent

FIELDS = (
    "n",
    "d",
    "kappa",
    "weight_decay",
    "seed",
    "step",
    "status",
    "loss",
    "train_error",
    "test_error_clean",
    "attn_signal_clean",
    "attn_signal_noisy",
    "norm_v",
    "norm_p",
)
KEY_FIELDS = ("n", "d", "kappa", "weight_decay", "seed", "step")
TEXT = ("status",)
SWEEP_SEED = 2410_07746
COLUMNS = (
    "loss",
    "train_error",
    "test_error_clean",
    "attn_signal_clean",
    "attn_signal_noisy",
    "norm_v",
    "norm_p",
)


def checkpoints(steps: int) -> list[int]:
    """0, 1 and about five points per decade up to ``steps``."""
    grid = np.unique(np.round(np.geomspace(1, steps, 5 * max(1, int(np.log10(steps))) + 1)))
    return [0, *(int(s) for s in grid)]


def longgd_cell(
    train: Any, test: Any, init: np.random.SeedSequence, *, steps: int, weight_decay: float
) -> list[dict[str, Any]]:
    """Trajectory rows of one long GD run."""
    res = gradient_descent(
        train,
        schedule="constant",
        steps=steps,
        weight_decay=weight_decay,
        test=test,
        record_steps=checkpoints(steps),
    )
    traj = res.trajectory
    return [
        {
            "step": int(traj["step"][k]),
            "status": res.status,
            **{c: float(traj[c][k]) for c in COLUMNS},
        }
        for k in range(len(traj["step"]))
    ]


def tasks(size: str) -> list[ClaimTask]:
    """The study's cells at ``size``."""
    out = []
    steps = pick(size, 100, 2000, 10000)
    for n in pick(size, [8], [40], [40, 160]):
        d = pick(size, 100, 1000, 4000)
        for kappa in pick(size, [0.1], [0.1, 0.5], [0.05, 0.1, 0.25, 0.5]):
            for wd in pick(size, [0.0, 1e-3], [0.0, 1e-3], [0.0, 1e-4, 1e-3]):
                for seed in range(pick(size, 1, 1, 5)):
                    cell = Cell(n, d, 2, None, kappa, 0.1, seed, "long-gd")
                    key = {"n": n, "d": d, "kappa": kappa, "weight_decay": wd, "seed": seed}
                    out.append(
                        ClaimTask(
                            key,
                            cell,
                            pick(size, 100, 1000, 2000),
                            SWEEP_SEED,
                            longgd_cell,
                            {"steps": steps, "weight_decay": wd},
                        )
                    )
    return out


@figure_style()
def plot(csv: Path, png: Path) -> Path:
    """Clean test error and clean-sample signal attention against the step, one column per n."""
    from matplotlib.figure import Figure

    from margin_solver.bench.study_plots import aggregate

    rows = [r for r in read_claim_rows(csv, FIELDS, TEXT) if r["step"] > 0]
    ns = sorted({r["n"] for r in rows})
    kappas = sorted({r["kappa"] for r in rows})
    fig = Figure(figsize=(max(5.2 * len(ns), 9.0), 7.0), layout="constrained")
    axes = fig.subplots(2, len(ns), squeeze=False, sharex=True)
    cmap = __import__("matplotlib").colormaps["viridis"]
    for j, n in enumerate(ns):
        for i, col in enumerate(("test_error_clean", "attn_signal_clean")):
            ax = axes[i, j]
            for c, kappa in enumerate(kappas):
                for wd in sorted({r["weight_decay"] for r in rows}):
                    agg = aggregate(
                        [
                            r
                            for r in rows
                            if r["n"] == n and r["kappa"] == kappa and r["weight_decay"] == wd
                        ],
                        ("step",),
                        col,
                    )
                    steps = sorted(agg)
                    ax.plot(
                        [s[0] for s in steps],
                        [agg[s][0] for s in steps],
                        "-" if wd == 0 else "--",
                        color=cmap(c / max(len(kappas) - 1, 1)),
                        label=rf"$\kappa$ = {kappa:g}, $\lambda$ = {wd:g}",
                    )
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.set_title(f"n = {n:g}" if i == 0 else "")
            ax.set_ylabel("clean test error" if i == 0 else "attention on signal (clean train)")
            if i == 1:
                ax.set_xlabel("GD step (log scale)")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(
        r"Long GD at small $\kappa = n\,\mathrm{SNR}^2$ (T=2, $\eta$=0.1; solid: no "
        r"weight decay, dashed: $\lambda$ > 0; mean over seeds)",
        fontsize=10,
    )
    return save_figure(fig, png)


def run(out: Path, size: str, **backend: Any) -> tuple[Path, Path, str, str]:
    """Run (or resume) the study into ``out``; return (csv, png, markdown table, message).
    ``backend``: ``jobs``, ``scheduler``, ``progress`` of the claim runner."""
    from margin_solver.bench.studies import markdown_table

    csv, png = out / "claim_longgd.csv", out / "claim_longgd.png"
    message, rows = run_and_plot(tasks(size), csv, png, (FIELDS, KEY_FIELDS, TEXT), plot, **backend)
    last = max(r["step"] for r in rows)
    shown = [r for r in rows if r["step"] in (1, 10, 100, 1000, last)]
    table = markdown_table(
        shown,
        ("n", "kappa", "weight_decay", "step"),
        ("train_error", "test_error_clean", "attn_signal_clean", "attn_signal_noisy"),
    )
    return csv, png, table, message
