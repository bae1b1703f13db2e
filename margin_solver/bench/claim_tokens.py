"""Claims 2 and 3: large T (authors' reply, Q3.2) and one dominant noise token (reply, Q2).

One task per cell (paper data, n, d, T, kappa, seed) fits three models on the same data: the
min-norm interpolator P_R (``min-norm``, the sweep method's radius rule; certified, i.e. with
the lower bound, only for ``T <= certify_max_T`` and ``n <= 16``, since the bound's cost grows
fast with T), two-step GD (``gd-two-step``, package default steps) and long GD from zero
(``gd-long``, constant default step). SNR is the package's: ``SNR = rho / (sigma sqrt(d))``,
``kappa = n SNR^2``, with one signal token and ``T - 1`` noise tokens per sample.

Rows hold the errors, the signal attention split clean / flipped, and for the flipped
training samples the attention on their top noise token (``top_noise_attention``) and its
share of the attention on all noise tokens (``top_noise_fraction``), averaged over those
samples. Two figures come from the one CSV: the threshold ``kappa*(T)`` (the kappa at which the
mean clean test error first falls below :data:`BENIGN_LEVEL`, interpolated on log kappa) and the
top-noise-token share against T.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.analysis.metrics import evaluate
from margin_solver.bench.claim_runner import ClaimTask, pick, read_claim_rows, run_and_plot
from margin_solver.bench.methods import R_SCALE
from margin_solver.bench.plots import save_figure
from margin_solver.bench.style import figure_style
from margin_solver.bench.sweeps import Cell
from margin_solver.core.kernel import attention
from margin_solver.gd.endpoints import gradient_descent, token_scale
from margin_solver.minnorm.solve import solve_min_norm

FIELDS = (
    "n",
    "d",
    "T",
    "kappa",
    "seed",
    "method",
    "status",
    "certified",
    "train_error",
    "test_error_clean",
    "attn_signal_clean",
    "attn_signal_noisy",
    "n_noisy",
    "top_noise_attention",
    "top_noise_fraction",
    "seconds",
)
KEY_FIELDS = ("n", "d", "T", "kappa", "seed", "method")
TEXT = ("method", "status")
SWEEP_SEED = 2410_07746
METHODS = ("min-norm", "gd-two-step", "gd-long")
#: The threshold kappa* is where the mean clean test error crosses this level (chance is 1/2).
BENIGN_LEVEL = 0.25


def top_noise_share(train: Any, p: np.ndarray) -> tuple[float, float, int]:
    """Mean attention on the top noise token of the flipped training samples, and its mean
    share of their noise-token attention; NaN when no sample is flipped or T = 1."""
    s = attention(train.X, p)
    noisy = np.flatnonzero(train.flipped)
    if noisy.size == 0 or train.T < 2:
        return math.nan, math.nan, int(noisy.size)
    noise = s[noisy].copy()
    noise[np.arange(noisy.size), train.signal_index[noisy]] = 0.0
    top = noise.max(axis=1)
    return float(top.mean()), float(np.mean(top / noise.sum(axis=1))), int(noisy.size)


def tokens_cell(
    train: Any, test: Any, init: np.random.SeedSequence, *, certify_max_T: int, gd_steps: int
) -> list[dict[str, Any]]:
    """Rows of one cell: P_R, two-step GD and long GD, fitted on the same data."""
    rows = []
    for method in METHODS:
        t0 = time.perf_counter()
        if method == "min-norm":
            R = R_SCALE / np.sqrt(token_scale(train.X))
            certify = certify_max_T >= train.T and train.n <= 16
            res = solve_min_norm(train, R=R, certify=certify, seed=int(init.generate_state(1)[0]))
            certified = float(res.status == "optimal") if certify else None
        else:
            res = gradient_descent(
                train,
                schedule="two-step" if method == "gd-two-step" else "constant",
                steps=None if method == "gd-two-step" else gd_steps,
                record_steps=[2 if method == "gd-two-step" else gd_steps],
            )
            certified = None
        seconds = time.perf_counter() - t0
        row: dict[str, Any] = {
            "method": method,
            "status": res.status,
            "certified": certified,
            "seconds": seconds,
        }
        if res.v is not None:
            fit, held = evaluate(res.v, res.p, train), evaluate(res.v, res.p, test)
            top, frac, k = top_noise_share(train, res.p)
            row.update(
                train_error=fit.error,
                test_error_clean=held.error_clean,
                attn_signal_clean=fit.attn_signal_clean,
                attn_signal_noisy=fit.attn_signal_noisy,
                n_noisy=k,
                top_noise_attention=top,
                top_noise_fraction=frac,
            )
        rows.append(row)
    return rows


def tasks(size: str) -> list[ClaimTask]:
    """The study's cells at ``size``."""
    n = pick(size, 8, 12, 40)
    d = pick(size, 100, 500, 2000)
    Ts = pick(size, [2, 3], [2, 3, 4, 8], [2, 3, 4, 8, 16])
    kappas = pick(
        size,
        [0.5, 8.0],
        [0.25, 1.0, 4.0],
        [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
    )
    options = {"certify_max_T": pick(size, 2, 3, 4), "gd_steps": pick(size, 100, 500, 10000)}
    out = []
    for T in Ts:
        for kappa in kappas:
            for seed in range(pick(size, 1, 2, 5)):
                cell = Cell(n, d, T, None, kappa, 0.1, seed, "tokens")
                key = {"n": n, "d": d, "T": T, "kappa": kappa, "seed": seed}
                out.append(
                    ClaimTask(
                        key, cell, pick(size, 100, 500, 2000), SWEEP_SEED, tokens_cell, options
                    )
                )
    return out


def kappa_star(rows: list[dict[str, Any]], level: float = BENIGN_LEVEL) -> float:
    """Smallest kappa where the mean clean test error falls to ``level`` (log-linear between
    grid points); NaN when it never does, the smallest kappa when it already does there."""
    from margin_solver.bench.study_plots import aggregate

    agg = aggregate(rows, ("kappa",), "test_error_clean")
    ks = sorted(agg)
    errs = [agg[k][0] for k in ks]
    for i, (k, e) in enumerate(zip(ks, errs)):
        if e <= level:
            if i == 0:
                return float(k[0])
            k0, e0 = ks[i - 1][0], errs[i - 1]
            w = (e0 - level) / (e0 - e)
            return float(math.exp((1 - w) * math.log(k0) + w * math.log(k[0])))
    return math.nan


def thresholds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kappa*(T) per method, with the share of certified min-norm rows."""
    out = []
    for T in sorted({r["T"] for r in rows}):
        for method in METHODS:
            sub = [r for r in rows if r["T"] == T and r["method"] == method]
            if not sub:
                continue
            cert = [r["certified"] for r in sub if not math.isnan(r["certified"])]
            out.append(
                {
                    "T": T,
                    "method": method,
                    "kappa_star": kappa_star(sub),
                    "certified_share": float(np.mean(cert)) if cert else math.nan,
                }
            )
    return out


_COLOURS = {"min-norm": "#0072B2", "gd-two-step": "#D55E00", "gd-long": "#009E73"}


@figure_style()
def plot_threshold(csv: Path, png: Path) -> Path:
    """kappa*(T) per method; open markers: no threshold inside the grid (drawn at its top)."""
    from matplotlib.figure import Figure

    rows = read_claim_rows(csv, FIELDS, TEXT)
    top = max(r["kappa"] for r in rows)
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.subplots()
    table = thresholds(rows)
    for method in METHODS:
        pts = [t for t in table if t["method"] == method]
        Ts = [t["T"] for t in pts]
        ks = [t["kappa_star"] for t in pts]
        ax.plot(Ts, ks, "-o", color=_COLOURS[method], label=method)
        miss = [T for T, k in zip(Ts, ks) if math.isnan(k)]
        ax.plot(miss, [top] * len(miss), "^", mfc="none", color=_COLOURS[method], ms=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("T (tokens per sample, log scale)")
    ax.set_ylabel(rf"$\kappa^*$: mean clean test error $\leq$ {BENIGN_LEVEL:g}")
    ax.grid(alpha=0.3)
    ax.legend(
        fontsize=8,
        title=r"open $\triangle$: not reached by $\kappa$ = " + f"{top:g}",
        title_fontsize=7,
    )
    r0 = rows[0]
    fig.suptitle(
        rf"Threshold $\kappa^* = n\,\mathrm{{SNR}}^2$ against T: n={r0['n']:g}, "
        f"d={r0['d']:g}, $\\eta$=0.1",
        fontsize=10,
    )
    return save_figure(fig, png)


@figure_style()
def plot_dominant(csv: Path, png: Path) -> Path:
    """Top noise token's share of a flipped sample's noise attention against T, per kappa."""
    from matplotlib.figure import Figure

    from margin_solver.bench.study_plots import aggregate

    rows = [r for r in read_claim_rows(csv, FIELDS, TEXT) if r["T"] > 2]
    fig = Figure(figsize=(11, 4.0), layout="constrained")
    axes = fig.subplots(1, len(METHODS), sharey=True)
    kappas = sorted({r["kappa"] for r in rows})
    cmap = __import__("matplotlib").colormaps["viridis"]
    for ax, method in zip(axes, METHODS):
        for j, kappa in enumerate(kappas):
            agg = aggregate(
                [r for r in rows if r["method"] == method and r["kappa"] == kappa],
                ("T",),
                "top_noise_fraction",
            )
            Ts = sorted(agg)
            ax.errorbar(
                [t[0] for t in Ts],
                [agg[t][0] for t in Ts],
                yerr=[agg[t][1] for t in Ts],
                fmt="-o",
                ms=3,
                capsize=2,
                color=cmap(j / max(len(kappas) - 1, 1)),
                label=rf"$\kappa$ = {kappa:g}",
            )
        if Ts:
            xs = np.array([t[0] for t in Ts], dtype=float)
            ax.plot(xs, 1 / (xs - 1), ":", color="grey", label="uniform over noise: 1/(T-1)")
        ax.set_xscale("log", base=2)
        ax.set_title(method)
        ax.set_xlabel("T (log scale)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("top noise token / all noise attention\n(flipped training samples)")
    axes[0].legend(fontsize=7)
    r0 = rows[0]
    fig.suptitle(
        f"Attention of flipped training samples on their top noise token: n={r0['n']:g}, "
        f"d={r0['d']:g}, $\\eta$=0.1 (mean ± std over seeds with a flipped sample)",
        fontsize=10,
    )
    return save_figure(fig, png)


def run(out: Path, size: str, which: str, **backend: Any) -> tuple[Path, Path, str, str]:
    """Run (or resume) the tasks into ``out/claim_tokens.csv``; ``which`` is ``"threshold"``
    (claim 2's figure and table) or ``"dominant"`` (claim 3's); ``backend``: ``jobs``,
    ``scheduler``, ``progress`` of the claim runner."""
    from margin_solver.bench.studies import markdown_table

    csv, png = out / "claim_tokens.csv", out / f"claim_{which}.png"
    plot = plot_threshold if which == "threshold" else plot_dominant
    message, rows = run_and_plot(tasks(size), csv, png, (FIELDS, KEY_FIELDS, TEXT), plot, **backend)
    if which == "threshold":
        lines = ["| T | method | kappa* | certified share (min-norm) |", "|---|---|---|---|"]
        lines += [
            f"| {t['T']:g} | {t['method']} | {t['kappa_star']:.3g} | {t['certified_share']:.2g} |"
            for t in thresholds(rows)
        ]
        table = (
            "\n".join(lines)
            + "\n\n"
            + markdown_table(rows, ("T", "kappa", "method"), ("train_error", "test_error_clean"))
        )
    else:
        table = markdown_table(
            [r for r in rows if r["T"] > 2],
            ("T", "kappa", "method"),
            ("top_noise_attention", "top_noise_fraction", "attn_signal_noisy"),
        )
    return csv, png, table, message
