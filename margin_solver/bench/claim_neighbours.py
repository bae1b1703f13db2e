"""Claim 5: the neighbouring papers' settings, measured with this package.

Sakamoto et al. (ICML 2025) fix the value head ``v`` and train the attention only; Tarzanagh
et al. (NeurIPS 2023, max-margin token selection) show that for a fixed ``v`` the direction of
``p`` under GD tends to the attention SVM (:func:`margin_solver.svm.selection.solve_attention_svm`)
of the tokens it selects. Here the fixed head is ``v_1``, the value head after the first GD step
from zero (``(beta0 / (2n)) sum_i y_i xbar_i``, correlated with the signal through the labels;
our choice, not Sakamoto et al.'s assumption on ``v``, which the authors' reply, W3, notes
holds with exponentially small probability for a random ``v``).

``sakamoto`` rows (one per method and cell, over a kappa = n SNR^2 grid): ``p-only`` (GD on p,
``v = v_1`` fixed), ``v-only`` (GD on v, ``p = 0`` fixed: uniform attention) and ``joint``
(GD on both from zero), each for ``steps`` constant steps. ``tarzanagh`` rows (one per
checkpoint): the p-only run's ``cos(p_t, p_svm)`` for three token selections: the tokens p_t
selects (``cos_current``), the tokens the run ends up selecting (``cos_final``) and each sample's
highest-scoring token for ``v_1``, ``argmax_t y_i <v_1, x_it>`` (``cos_opt``, Tarzanagh et al.'s
"optimal" tokens; NaN where their SVM is infeasible).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.analysis.metrics import evaluate
from margin_solver.bench.claim_runner import ClaimTask, pick, read_claim_rows, run_and_plot
from margin_solver.bench.plots import save_figure
from margin_solver.bench.style import figure_style
from margin_solver.bench.sweeps import Cell
from margin_solver.core.kernel import attention
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent
from margin_solver.svm.selection import solve_attention_svm

SAK_FIELDS = (
    "n",
    "d",
    "kappa",
    "seed",
    "method",
    "status",
    "train_error",
    "test_error_clean",
    "attn_signal_clean",
    "attn_signal_noisy",
    "norm_p",
)
SAK_KEYS = ("n", "d", "kappa", "seed", "method")
TAR_FIELDS = (
    "n",
    "d",
    "kappa",
    "seed",
    "step",
    "norm_p",
    "cos_current",
    "cos_final",
    "cos_opt",
    "same_as_final",
    "train_error",
)
TAR_KEYS = ("n", "d", "kappa", "seed", "step")
TEXT = ("method", "status")
SWEEP_SEED = 2410_07746


def first_step_head(train: Any) -> np.ndarray:
    """``v_1``: the value head after GD's first (default) step from zero."""
    beta0 = default_step_sizes(train.X)[0]
    return (beta0 / (2 * train.n)) * np.einsum(
        "i,id->d", train.y.astype(float), train.X.mean(axis=1)
    )


def sakamoto_cell(train: Any, test: Any, init: np.random.SeedSequence, *, steps: int) -> list[dict]:
    """p-only, v-only and joint GD on one cell."""
    v1 = first_step_head(train)
    runs = {
        "p-only": {"train": ("p",), "v0": v1},
        "v-only": {"train": ("v",)},
        "joint": {},
    }
    rows = []
    for method, kw in runs.items():
        res = gradient_descent(train, schedule="constant", steps=steps, record_steps=[steps], **kw)
        fit, held = evaluate(res.v, res.p, train), evaluate(res.v, res.p, test)
        rows.append(
            {
                "method": method,
                "status": res.status,
                "train_error": fit.error,
                "test_error_clean": held.error_clean,
                "attn_signal_clean": fit.attn_signal_clean,
                "attn_signal_noisy": fit.attn_signal_noisy,
                "norm_p": res.p_norm,
            }
        )
    return rows


def _cos(a: np.ndarray | None, b: np.ndarray) -> float:
    if a is None:
        return math.nan
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else math.nan


def tarzanagh_cell(
    train: Any, test: Any, init: np.random.SeedSequence, *, steps: int
) -> list[dict]:
    """The p-only run (``v = v_1``) at checkpoints against the attention SVMs."""
    v1 = first_step_head(train)
    marks = sorted({int(s) for s in np.round(np.geomspace(1, steps, 9))})
    # GD from a fixed start is deterministic: the iterate at step k is a k-step run's endpoint.
    ends = {
        k: gradient_descent(
            train, schedule="constant", steps=k, record_steps=[k], train=("p",), v0=v1
        )
        for k in marks
    }
    final_sel = np.argmax(attention(train.X, ends[steps].p), axis=1)
    p_final = solve_attention_svm(train.X, final_sel)
    opt_sel = np.argmax(train.y[:, None] * np.einsum("itd,d->it", train.X, v1), axis=1)
    p_opt = solve_attention_svm(train.X, opt_sel)
    rows = []
    for k, res in ends.items():
        sel = np.argmax(attention(train.X, res.p), axis=1)
        rows.append(
            {
                "step": k,
                "norm_p": res.p_norm,
                "cos_current": _cos(solve_attention_svm(train.X, sel), res.p),
                "cos_final": _cos(p_final, res.p),
                "cos_opt": _cos(p_opt, res.p),
                "same_as_final": float(np.mean(sel == final_sel)),
                "train_error": evaluate(res.v, res.p, train).error,
            }
        )
    return rows


def _tasks(size: str, work: Any, steps: int, kappas: list[float]) -> list[ClaimTask]:
    n, d = pick(size, 8, 12, 40), pick(size, 100, 500, 2000)
    out = []
    for kappa in kappas:
        for seed in range(pick(size, 1, 2, 5)):
            cell = Cell(n, d, 2, None, kappa, 0.1, seed, work.__name__)
            key = {"n": n, "d": d, "kappa": kappa, "seed": seed}
            out.append(
                ClaimTask(key, cell, pick(size, 100, 500, 2000), SWEEP_SEED, work, {"steps": steps})
            )
    return out


def sakamoto_tasks(size: str) -> list[ClaimTask]:
    """Cells of the fixed-head study at ``size``."""
    return _tasks(
        size,
        sakamoto_cell,
        pick(size, 100, 1000, 3000),
        pick(
            size,
            [0.5, 8.0],
            [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
            [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        ),
    )


def tarzanagh_tasks(size: str) -> list[ClaimTask]:
    """Cells of the attention-SVM study at ``size``."""
    return _tasks(
        size,
        tarzanagh_cell,
        pick(size, 100, 3000, 30000),
        pick(size, [4.0], [1.0, 4.0, 16.0], [1.0, 4.0, 16.0]),
    )


@figure_style()
def plot_sakamoto(csv: Path, png: Path) -> Path:
    """Training and clean test error against kappa per method (from the CSV only)."""
    from matplotlib.figure import Figure

    from margin_solver.bench.study_plots import aggregate, constant_value

    rows = read_claim_rows(csv, SAK_FIELDS, TEXT)
    colours = {"p-only": "#0072B2", "v-only": "#D55E00", "joint": "#009E73"}
    panels = {
        "train_error": "training error",
        "test_error_clean": "clean test error",
        "attn_signal_clean": "attention on signal (clean train)",
    }
    # panels carry information only: one whose means are a single value for every method is
    # named under the title instead (the training error where every run interpolates)
    same = {col: constant_value(aggregate(rows, ("method", "kappa"), col)) for col in panels}
    drawn = [col for col in panels if same[col] is None]
    fig = Figure(figsize=(3.7 * max(len(drawn), 1) + 0.4, 4.0), layout="constrained")
    axes = fig.subplots(1, max(len(drawn), 1), sharex=True, squeeze=False)[0]
    for ax, col in zip(axes, drawn):
        label = panels[col]
        for method, colour in colours.items():
            agg = aggregate([r for r in rows if r["method"] == method], ("kappa",), col)
            ks = sorted(agg)
            ax.errorbar(
                [k[0] for k in ks],
                [agg[k][0] for k in ks],
                yerr=[agg[k][1] for k in ks],
                fmt="-o",
                ms=3,
                capsize=2,
                color=colour,
                label=method,
            )
        ax.set_xscale("log")
        ax.set_xlabel(r"$\kappa = n\,\mathrm{SNR}^2$ (signal norm$^2$, log scale)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    r0 = rows[0]
    notes = "".join(
        f"\nNot drawn: {panels[col]} = {same[col]:g} for every method and point."
        for col in panels
        if same[col] is not None
    )
    fig.suptitle(
        f"Fixed head (p-only, v = $v_1$) vs fixed attention (v-only, p = 0) vs joint GD: "
        f"n={r0['n']:g}, d={r0['d']:g}, T=2{notes}",
        fontsize=10,
    )
    return save_figure(fig, png)


@figure_style()
def plot_tarzanagh(csv: Path, png: Path) -> Path:
    """cos(p_t, attention SVM) against the step (from the CSV only)."""
    from matplotlib.figure import Figure

    from margin_solver.bench.study_plots import aggregate

    rows = read_claim_rows(csv, TAR_FIELDS, TEXT)
    kappas = sorted({r["kappa"] for r in rows})
    fig = Figure(figsize=(max(4.2 * len(kappas), 8.0), 4.0), layout="constrained")
    axes = fig.subplots(1, len(kappas), squeeze=False, sharey=True)[0]
    for ax, kappa in zip(axes, kappas):
        sub = [r for r in rows if r["kappa"] == kappa]
        for col, colour, fmt, label in (
            ("cos_current", "#0072B2", "-o", "SVM of p_t's own selection"),
            ("cos_final", "#D55E00", "--s", "SVM of the final selection"),
            ("cos_opt", "#009E73", ":^", r"SVM of argmax$_t\ y_i\langle v_1, x_{it}\rangle$"),
        ):
            agg = aggregate(sub, ("step",), col)
            st = sorted(agg)
            ax.errorbar(
                [s[0] for s in st],
                [agg[s][0] for s in st],
                yerr=[agg[s][1] for s in st],
                fmt=fmt,
                ms=4,
                capsize=2,
                color=colour,
                label=label,
            )
        ax.set_xscale("log")
        ax.set_xlabel("GD step on p (log scale)")
        ax.set_title(rf"$\kappa$ = {kappa:g}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(r"$\cos(p_t, p_{\mathrm{svm}})$")
    axes[0].legend(fontsize=7)
    fig.suptitle(
        "GD on p with v = $v_1$ fixed: direction against the attention SVM (Tarzanagh et al.)",
        fontsize=10,
    )
    return save_figure(fig, png)


def run(out: Path, size: str, which: str, **backend: Any) -> tuple[Path, Path, str, str]:
    """Run (or resume) ``which`` ("sakamoto" or "tarzanagh") into ``out``; ``backend``:
    ``jobs``, ``scheduler``, ``progress`` of the claim runner."""
    from margin_solver.bench.studies import markdown_table

    csv, png = out / f"claim_{which}.csv", out / f"claim_{which}.png"
    if which == "sakamoto":
        message, rows = run_and_plot(
            sakamoto_tasks(size), csv, png, (SAK_FIELDS, SAK_KEYS, TEXT), plot_sakamoto, **backend
        )
        table = markdown_table(
            rows,
            ("kappa", "method"),
            ("train_error", "test_error_clean", "attn_signal_clean", "attn_signal_noisy"),
        )
    else:
        message, rows = run_and_plot(
            tarzanagh_tasks(size), csv, png, (TAR_FIELDS, TAR_KEYS, TEXT), plot_tarzanagh, **backend
        )
        table = markdown_table(
            rows,
            ("kappa", "step"),
            ("norm_p", "cos_current", "cos_final", "cos_opt", "same_as_final"),
        )
    return csv, png, table, message
