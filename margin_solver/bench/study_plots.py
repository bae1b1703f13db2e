"""Figures of the benchmark studies, drawn from results CSVs only (never recomputed).

Every figure has a title, labelled axes (with the definition of the quantity), a colour bar
or legend, and is saved at :data:`margin_solver.bench.plots.DPI` (200 dpi). Values are means over
seeds; error bars are one standard deviation over seeds.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.bench.plots import save_figure
from margin_solver.bench.sweeps import load_results
from margin_solver.theory import Regime

#: Regime codes of the phase map.
#: The observed regimes in the order of the regime map's colour scale.
REGIME_ORDER = (Regime.NO_INTERPOLATION, Regime.BENIGN, Regime.HARMFUL)

_LABELS = {
    "test_error_clean": "test error vs clean labels",
    "test_error_noisy": "test error vs noisy labels",
    "train_error": "training error (observed labels)",
    "attn_signal_clean": "attention on signal token, clean train samples",
    "attn_signal_noisy": "attention on signal token, flipped train samples",
}


def agg_pyplot():
    """``matplotlib.pyplot`` on the Agg canvas (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def aggregate(
    rows: Iterable[dict[str, Any]], by: Sequence[str], value: str | Callable[[dict], float]
) -> dict[tuple, tuple[float, float, int]]:
    """Mean, standard deviation and count of ``value`` over rows grouped by the ``by`` columns.

    ``value`` is a column name or a function of a row; NaN values are left out of the mean.
    """
    groups: dict[tuple, list[float]] = defaultdict(list)
    for row in rows:
        x = row[value] if isinstance(value, str) else value(row)
        groups[tuple(_key(row[k]) for k in by)].append(float(x))
    out = {}
    for key, xs in groups.items():
        arr = np.asarray(xs, dtype=float)
        ok = arr[~np.isnan(arr)]
        out[key] = (
            float(ok.mean()) if ok.size else float("nan"),
            float(ok.std()) if ok.size else float("nan"),
            int(ok.size),
        )
    return out


# NaN != NaN, so every NaN group value maps to this one object (dicts match keys by identity first).
_NAN_KEY = float("nan")


def _key(value: Any) -> Any:
    return _NAN_KEY if isinstance(value, float) and np.isnan(value) else value


def _interpolates(row: dict[str, Any]) -> float:
    """1 when the method returned a solution with zero training error, else 0."""
    return float(row["status"] not in ("failed", "infeasible") and row["train_error"] == 0.0)


def regime_map(
    rows: list[dict[str, Any]], benign_max_error: float = 0.1
) -> dict[tuple, Regime]:
    """Regime per (method, n, snr): no interpolation / benign / harmful.

    A point interpolates when most seeds reach zero training error; it is *benign* when it
    interpolates and its mean clean test error is at most ``benign_max_error``, *harmful*
    otherwise. The threshold is this package's choice, not the paper's (the theorems state
    rates, not a number).
    """
    interp = aggregate(rows, ("method", "n", "snr"), _interpolates)
    err = aggregate(rows, ("method", "n", "snr"), "test_error_clean")
    out = {}
    for key, (frac, _, _) in interp.items():
        if not frac > 0.5:
            out[key] = Regime.NO_INTERPOLATION
        else:
            out[key] = Regime.BENIGN if err[key][0] <= benign_max_error else Regime.HARMFUL
    return out


#: The checker's SNR-side prediction, as plotted.
PREDICTIONS = ("harmful", "outside the theory", "benign")


def predicted_map(rows: list[dict[str, Any]]) -> dict[tuple, str]:
    """The checker's SNR-side regime per (n, snr): the most frequent over seeds and methods."""
    votes: dict[tuple, list[str]] = defaultdict(list)
    for row in rows:
        if row.get("snr_regime"):
            votes[(row["n"], row["snr"])].append(row["snr_regime"])
    return {k: max(set(v), key=v.count) for k, v in votes.items()}


def _edges(values: np.ndarray) -> np.ndarray:
    """Cell edges on a log scale (geometric midpoints) for a heatmap over sorted values."""
    logv = np.log(values)
    if len(values) == 1:
        return np.exp([logv[0] - 0.5, logv[0] + 0.5])
    mid = (logv[1:] + logv[:-1]) / 2
    return np.exp(np.concatenate([[2 * logv[0] - mid[0]], mid, [2 * logv[-1] - mid[-1]]]))


def plot_phase_diagram(
    csv: str | os.PathLike, png: str | os.PathLike, benign_max_error: float = 0.1
) -> Path:
    """Heatmaps over n x SNR of the clean test error and of the regime, one row per method.

    The dashed curve is SNR = 1/sqrt(n) (kappa = n SNR^2 = 1), the order of the
    benign/harmful threshold in the authors' reply (seed W4, Q3).
    """
    plt = agg_pyplot()
    from matplotlib.colors import BoundaryNorm, ListedColormap

    rows = load_results(csv)
    methods = sorted({r["method"] for r in rows})
    ns = np.array(sorted({r["n"] for r in rows}))
    snrs = np.array(sorted({r["snr"] for r in rows}))
    err = aggregate(rows, ("method", "n", "snr"), "test_error_clean")
    regimes = regime_map(rows, benign_max_error)
    meta = rows[0]
    predicted = predicted_map(rows)
    ncols = 3 if predicted else 2
    fig, axes = plt.subplots(
        len(methods), ncols, figsize=(5.6 * ncols, 4.4 * len(methods)), squeeze=False
    )
    cmap_reg = ListedColormap(["#bdbdbd", "#4daf4a", "#e41a1c"])
    cmap_pred = ListedColormap(["#fbb4ae", "#fff2ae", "#ccebc5"])
    curve_n = np.geomspace(ns[0] * 0.8, ns[-1] * 1.25, 100)
    for row_axes, method in zip(axes, methods):
        E = np.array([[err.get((method, n, s), (np.nan,))[0] for n in ns] for s in snrs])
        Rg = np.array(
            [[_regime_index(regimes.get((method, n, s))) for n in ns] for s in snrs], dtype=float
        )
        ax = row_axes[0]
        mesh = ax.pcolormesh(
            _edges(ns), _edges(snrs), E, cmap="viridis", vmin=0, vmax=0.5, shading="flat"
        )
        fig.colorbar(mesh, ax=ax, label="clean test error (mean over seeds)")
        for i, s in enumerate(snrs):
            for j, n in enumerate(ns):
                if np.isfinite(E[i, j]):
                    ax.text(
                        n,
                        s,
                        f"{E[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if E[i, j] > 0.25 else "black",
                    )
        ax.set_title(f"{method}: clean test error", fontsize=10)
        ax2 = row_axes[1]
        mesh2 = ax2.pcolormesh(
            _edges(ns),
            _edges(snrs),
            Rg,
            cmap=cmap_reg,
            norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5], 3),
            shading="flat",
        )
        cbar = fig.colorbar(mesh2, ax=ax2, ticks=[0, 1, 2])
        cbar.ax.set_yticklabels([r.value for r in REGIME_ORDER])
        ax2.set_title(
            f"{method}: observed regime\n(benign = interpolates and clean error <= {benign_max_error:g})",
            fontsize=9,
        )
        used = [ax, ax2]
        if predicted:
            ax3 = row_axes[2]
            P = np.array(
                [
                    [
                        PREDICTIONS.index(predicted[(n, s)]) if (n, s) in predicted else np.nan
                        for n in ns
                    ]
                    for s in snrs
                ],
                dtype=float,
            )
            mesh3 = ax3.pcolormesh(
                _edges(ns),
                _edges(snrs),
                P,
                cmap=cmap_pred,
                norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5], 3),
                shading="flat",
            )
            cbar3 = fig.colorbar(mesh3, ax=ax3, ticks=[0, 1, 2])
            cbar3.ax.set_yticklabels(["harmful", "no prediction\n(transition band)", "benign"])
            for i, s in enumerate(snrs):
                for j, n in enumerate(ns):
                    mark = _agreement(predicted.get((n, s)), regimes.get((method, n, s)))
                    ax3.text(n, s, mark, ha="center", va="center", fontsize=8)
            ax3.set_title(
                f"checker's SNR-side prediction vs {method}\n"
                "(agree / DIFFER / no-int = observed does not interpolate)",
                fontsize=9,
            )
            used.append(ax3)
        for a in used:
            a.plot(curve_n, 1 / np.sqrt(curve_n), "w--", lw=2)
            a.plot(curve_n, 1 / np.sqrt(curve_n), "k--", lw=1, label="SNR = 1/sqrt(n)  (kappa = 1)")
            a.set_xscale("log")
            a.set_yscale("log")
            a.set_xlim(_edges(ns)[0], _edges(ns)[-1])
            a.set_ylim(_edges(snrs)[0], _edges(snrs)[-1])
            a.set_xticks(ns, [f"{n:g}" for n in ns])
            a.set_yticks(snrs, [f"{s:.3g}" for s in snrs])
            a.minorticks_off()
            a.set_xlabel("n (training samples)")
            a.set_ylabel("SNR = rho / (sigma sqrt(d))")
    # One legend for all panels, below them, so that it hides no cell.
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles[:1], labels[:1], loc="lower center", fontsize=9, frameon=False)
    fig.suptitle(
        f"Phase diagram: d={meta['d']:g}, T={meta['T']:g}, eta={meta['eta']:g}, "
        f"{int(max(v[2] for v in err.values()))} seeds per cell"
    )
    return save_pyplot_figure(fig, png, rect=(0, 0.03, 1, 1))


def _regime_index(regime: Regime | None) -> float:
    """Position of a regime on the regime map's colour scale (NaN: no data)."""
    return np.nan if regime is None else float(REGIME_ORDER.index(regime))


def _agreement(predicted: str | None, observed: Regime | None) -> str:
    if predicted is None or observed is None:
        return ""
    if observed == Regime.NO_INTERPOLATION:
        return "no-int"
    if predicted not in ("benign", "harmful"):
        return ""
    return "agree" if (predicted == "benign") == (observed == Regime.BENIGN) else "DIFFER"


def plot_curves(
    csv: str | os.PathLike,
    png: str | os.PathLike,
    x: str,
    panels: Sequence[str],
    title: str,
    xlabel: str,
    logx: bool = False,
    vlines: dict[str, float] | None = None,
    diagonal: str | None = None,
) -> Path:
    """One panel per column in ``panels``: its mean +- std over seeds against ``x``, one line
    per method (and, for attention, one line per clean/noisy split)."""
    plt = agg_pyplot()
    rows = load_results(csv)
    methods = sorted({r["method"] for r in rows})
    ncols = 2 if len(panels) == 4 else len(panels)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.6 * ncols, 4.0 * nrows + 0.6), squeeze=False)
    for ax, col in zip(axes.ravel(), panels):
        agg = aggregate(rows, ("method", x), col)
        for method in methods:
            pts = sorted((k[1], v) for k, v in agg.items() if k[0] == method)
            if not pts or all(np.isnan(v[0]) for _, v in pts):
                continue
            xs = np.array([p[0] for p in pts])
            mean = np.array([p[1][0] for p in pts])
            std = np.array([p[1][1] for p in pts])
            ax.errorbar(xs, mean, yerr=std, marker="o", capsize=3, label=method)
        for name, value in (vlines or {}).items():
            ax.axvline(value, color="grey", ls=":", lw=1)
            ax.text(
                value,
                0.98,
                f"{name} ",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
                color="dimgrey",
            )
        if diagonal == col:
            lim = np.array([min(r[x] for r in rows), max(r[x] for r in rows)])
            ax.plot(lim, lim, "k--", lw=1, label="Bayes error = eta")
        if logx:
            ax.set_xscale("log")
            ticks = sorted({r[x] for r in rows})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
        # Fixed ranges make panels and studies comparable at a glance.
        ax.set_ylim(-0.03, 1.03) if col.startswith("attn") else ax.set_ylim(
            -0.02, max(0.52, ax.get_ylim()[1])
        )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(_LABELS.get(col, col))
        ax.set_title(_LABELS.get(col, col), fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    return save_pyplot_figure(fig, png)


def save_pyplot_figure(
    fig, png: str | os.PathLike, rect: tuple[float, float, float, float] = (0, 0, 1, 1)
) -> Path:
    """Lay out a pyplot figure inside ``rect`` (room kept for a figure legend), save it with
    :func:`margin_solver.bench.plots.save_figure` and release it from pyplot."""
    fig.tight_layout(rect=rect)
    try:
        return save_figure(fig, png)
    finally:
        agg_pyplot().close(fig)
