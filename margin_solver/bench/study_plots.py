"""Figures of the benchmark studies, drawn from results CSVs only (never recomputed).

Every figure has a title, labelled axes (with the definition of the quantity), a colour bar
or legend, is drawn in the package's style (:func:`margin_solver.bench.style.figure_style`) and
written by :func:`margin_solver.bench.plots.save_figure` in the format of its file suffix.
Values are means over seeds; error bars are one standard deviation over seeds.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.bench.plots import label_cells, plain_log_labels, save_figure
from margin_solver.bench.style import OKABE_ITO, figure_style
from margin_solver.bench.sweeps import load_results
from margin_solver.theory import Regime

#: Regime codes of the phase map.
#: The observed regimes in the order of the regime map's colour scale.
REGIME_ORDER = (Regime.NO_INTERPOLATION, Regime.BENIGN, Regime.HARMFUL)

#: Panel title and y-axis label per results column.
_PANELS = {
    "test_error_clean": ("Clean test error", "test error vs clean labels"),
    "test_error_noisy": ("Noisy test error", "test error vs noisy labels"),
    "train_error": ("Training error", "training error (observed labels)"),
    "attn_signal_clean": ("Attention, clean training samples", "attention on the signal token"),
    "attn_signal_noisy": ("Attention, flipped training samples", "attention on the signal token"),
    "norm": ("Norm of the interpolator at margin 1", r"$\|v\|\,/\,\mathrm{min}_i\, y_i f(X_i)$"),
}

#: Panels drawn on a log scale (norms span decades across a sweep).
_LOG_PANELS = frozenset({"norm"})

#: One marker per method (after its colour), so that lines stay apart in grey print too.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")

#: Regime map colours (Okabe-Ito): no interpolation grey, benign blue, harmful orange.
_REGIME_COLOURS = ("#BBBBBB", OKABE_ITO[0], OKABE_ITO[1])
#: The checker's prediction, pale versions of the same: harmful, no prediction, benign.
_PREDICTION_COLOURS = ("#F7D08A", "#F2F2F2", "#9CC9E8")

_SNR_LABEL = r"$\mathrm{SNR} = \rho\,/\,(\sigma\sqrt{d})$"


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


def regime_map(rows: list[dict[str, Any]], benign_max_error: float = 0.1) -> dict[tuple, Regime]:
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


def predicted_map(rows: list[dict[str, Any]], method: str | None = None) -> dict[tuple, str]:
    """The checker's SNR-side regime per (n, snr): the most frequent over seeds (and over
    methods unless ``method`` names one; the checker's constants depend on the method).

    A tie is no prediction (``"outside the theory"``): the checker's answers split. (Picking
    one of the tied answers made the figure depend on the order of a ``set``, which changes
    from one Python process to the next.)
    """
    votes: dict[tuple, list[str]] = defaultdict(list)
    for row in rows:
        if row.get("snr_regime") and (method is None or row["method"] == method):
            votes[(row["n"], row["snr"])].append(row["snr_regime"])
    out = {}
    for key, vote in votes.items():
        counts = {regime: vote.count(regime) for regime in set(vote)}
        top = [regime for regime, count in counts.items() if count == max(counts.values())]
        out[key] = top[0] if len(top) == 1 else PREDICTIONS[1]
    return out


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
    r"""Heatmaps over n x SNR of the clean test error and of the regime, one row per method.

    The dashed curve is :math:`\mathrm{SNR} = 1/\sqrt{n}` (:math:`\kappa = n\,\mathrm{SNR}^2
    = 1`), the order of the benign/harmful threshold in the authors' reply (Q3). Cell numbers
    are black or white, whichever reads better on the cell. ``png`` is the output file; its
    suffix picks the format (PDF, SVG, PNG).
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.figure import Figure

    rows = load_results(csv)
    methods = sorted({r["method"] for r in rows})
    ns = np.array(sorted({r["n"] for r in rows}))
    snrs = np.array(sorted({r["snr"] for r in rows}))
    err = aggregate(rows, ("method", "n", "snr"), "test_error_clean")
    regimes = regime_map(rows, benign_max_error)
    meta = rows[0]
    predicted = predicted_map(rows)
    ncols = 3 if predicted else 2
    three = BoundaryNorm([-0.5, 0.5, 1.5, 2.5], 3)
    xe, ye = _edges(ns), _edges(snrs)
    curve_n = np.geomspace(xe[0], xe[-1], 100)
    with figure_style():
        fig = Figure(figsize=(3.5 * ncols, 3.0 * len(methods) + 0.7))
        axes = fig.subplots(len(methods), ncols, squeeze=False)
        for row_axes, method in zip(axes, methods):
            E = np.array([[err.get((method, n, s), (np.nan,))[0] for n in ns] for s in snrs])
            Rg = np.array(
                [[_regime_index(regimes.get((method, n, s))) for n in ns] for s in snrs],
                dtype=float,
            )
            ax = row_axes[0]
            mesh = ax.pcolormesh(xe, ye, E, cmap="viridis", vmin=0, vmax=0.5, shading="flat")
            fig.colorbar(mesh, ax=ax, label="clean test error (mean over seeds)")
            label_cells(ax, mesh, ns, snrs, E)
            ax.set_title(f"{method}: clean test error")
            ax2 = row_axes[1]
            mesh2 = ax2.pcolormesh(
                xe, ye, Rg, cmap=ListedColormap(_REGIME_COLOURS), norm=three, shading="flat"
            )
            cbar = fig.colorbar(mesh2, ax=ax2, ticks=[0, 1, 2])
            cbar.ax.set_yticklabels(["no interp.", "benign", "harmful"])
            cbar.ax.tick_params(length=0)
            ax2.set_title(
                f"{method}: observed regime\n(benign: interpolates, clean error "
                f"$\\leq {benign_max_error:g}$)"
            )
            used = [ax, ax2]
            if predicted:
                ax3 = row_axes[2]
                mine = predicted_map(rows, method)
                P = np.array(
                    [
                        [PREDICTIONS.index(mine[(n, s)]) if (n, s) in mine else np.nan for n in ns]
                        for s in snrs
                    ],
                    dtype=float,
                )
                mesh3 = ax3.pcolormesh(
                    xe,
                    ye,
                    P,
                    cmap=ListedColormap(_PREDICTION_COLOURS),
                    norm=three,
                    shading="flat",
                )
                cbar3 = fig.colorbar(mesh3, ax=ax3, ticks=[0, 1, 2])
                cbar3.ax.set_yticklabels(["harmful", "no\nprediction", "benign"])
                cbar3.ax.tick_params(length=0)
                marks = [
                    [_agreement(mine.get((n, s)), regimes.get((method, n, s))) for n in ns]
                    for s in snrs
                ]
                label_cells(ax3, mesh3, ns, snrs, P, marks)
                ax3.set_title(f"checker's SNR-side prediction\nfor {method}, vs observed")
                used.append(ax3)
            for a in used:
                a.plot(curve_n, 1 / np.sqrt(curve_n), color="white", ls="-", lw=2.2)
                a.plot(
                    curve_n,
                    1 / np.sqrt(curve_n),
                    "k--",
                    lw=1.1,
                    label=r"$\mathrm{SNR} = 1/\sqrt{n}$  ($\kappa = n\,\mathrm{SNR}^2 = 1$)",
                )
                a.set_xscale("log")
                a.set_yscale("log")
                a.set_xlim(xe[0], xe[-1])
                a.set_ylim(ye[0], ye[-1])
                a.set_xticks(ns, [f"{n:g}" for n in ns])
                a.set_yticks(snrs, [f"{s:.3g}" for s in snrs])
                a.minorticks_off()
                a.grid(False)
                a.set_xlabel("$n$ (training samples)")
                a.set_ylabel(_SNR_LABEL)
        # One legend for all panels, below them, so that it hides no cell.
        handles, labels = axes[0, 0].get_legend_handles_labels()
        note = (
            ["marks: agree / DIFFER with the observed regime; no-int = does not interpolate"]
            if predicted
            else []
        )
        fig.legend(
            handles[-1:] + [_blank()] * len(note),
            labels[-1:] + note,
            loc="outside lower center",
            ncols=1 + len(note),
            frameon=False,
        )
        fig.suptitle(
            f"Phase diagram: $d = {meta['d']:g}$, $T = {meta['T']:g}$, "
            f"$\\eta = {meta['eta']:g}$, {int(max(v[2] for v in err.values()))} seeds per cell"
        )
    return save_figure(fig, png)


def _blank() -> Any:
    """An invisible legend handle, for a legend entry that is only text."""
    from matplotlib.patches import Rectangle

    return Rectangle((0, 0), 0, 0, visible=False)


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
    per method (colour and marker).

    Panels carry information only: a panel whose means are all one value (the training error
    where every method interpolates everywhere) is not drawn, and a line under the title says
    so. Outside the training-error panel, a point where the method's mean training error is
    above zero (it does not interpolate there) has a hollow marker. ``png`` is the output
    file; its suffix picks the format (PDF, SVG, PNG).
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    rows = load_results(csv)
    methods = sorted({r["method"] for r in rows})
    fits = aggregate(rows, ("method", x), "train_error")
    aggs = {col: aggregate(rows, ("method", x), col) for col in panels}
    constant = {col: constant_value(agg) for col, agg in aggs.items()}
    drawn = [col for col in panels if constant[col] is None]
    notes = [
        f"Not drawn: {_title(col).lower()} = {constant[col]:g} for every method and point."
        for col in panels
        if constant[col] is not None
    ]
    ncols = 2 if len(drawn) == 4 else max(min(len(drawn), 3), 1)
    nrows = max(-(-len(drawn) // ncols), 1)
    hollow_any = False
    with figure_style():
        fig = Figure(figsize=(3.6 * ncols, 2.9 * nrows + 0.6 + 0.2 * len(notes)))
        axes = fig.subplots(nrows, ncols, sharex=True, squeeze=False)
        for ax, col in zip(axes.ravel(), drawn):
            for k, method in enumerate(methods):
                pts = sorted((key[1], v) for key, v in aggs[col].items() if key[0] == method)
                if not pts or all(np.isnan(v[0]) for _, v in pts):
                    continue
                xs = np.array([p[0] for p in pts])
                mean = np.array([p[1][0] for p in pts])
                std = np.array([p[1][1] for p in pts])
                # Colour and marker by the method's place in the list: the same in every panel.
                marker = _MARKERS[k % len(_MARKERS)]
                colour = OKABE_ITO[k % len(OKABE_ITO)]
                ax.errorbar(xs, mean, yerr=std, marker=marker, color=colour, label=method)
                misses = np.array([fits.get((method, xx), (0.0,))[0] > 0 for xx in xs])
                if col != "train_error" and misses.any():
                    hollow_any = True
                    ax.plot(
                        xs[misses],
                        mean[misses],
                        ls="none",
                        marker=marker,
                        mfc="white",
                        mec=colour,
                        mew=1.2,
                        zorder=3,
                    )
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
                    fontsize="x-small",
                    color="dimgrey",
                )
            if diagonal == col:
                lim = np.array([min(r[x] for r in rows), max(r[x] for r in rows)])
                ax.plot(lim, lim, "k--", lw=1, label=r"Bayes error $= \eta$")
            if logx:
                ax.set_xscale("log")
                ticks = sorted({r[x] for r in rows})
                ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
                ax.minorticks_off()
            if col in _LOG_PANELS:
                ax.set_yscale("log")
                plain_log_labels(ax.yaxis)
            elif col.startswith("attn"):
                ax.set_ylim(-0.03, 1.03)
            else:  # fixed ranges make panels and studies comparable at a glance
                ax.set_ylim(-0.02, max(0.52, ax.get_ylim()[1]))
            ax.set_ylabel(_PANELS.get(col, (col, col))[1])
            ax.set_title(_title(col))
        for ax in axes.ravel()[len(drawn) :]:
            ax.remove()
        for ax in axes.ravel()[max(len(drawn) - ncols, 0) : len(drawn)]:  # lowest in each column
            ax.set_xlabel(xlabel)
            ax.xaxis.set_tick_params(labelbottom=True)
        handles, labels = axes.ravel()[0].get_legend_handles_labels()
        if hollow_any:
            handles.append(Line2D([], [], ls="none", marker="o", mfc="white", mec="dimgrey"))
            labels.append("hollow: training error > 0 (does not interpolate)")
        for ax in axes.ravel()[1 : len(drawn)]:  # panel-only entries (the Bayes line)
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(
            handles, labels, loc="outside lower center", ncols=min(len(labels), 4), frameon=False
        )
        fig.suptitle(title + ("\n" + " ".join(notes) if notes else ""))
    return save_figure(fig, png)


def _title(col: str) -> str:
    return _PANELS.get(col, (col, col))[0]


def constant_value(agg: dict[tuple, tuple[float, float, int]]) -> float | None:
    """The one value of every finite mean in ``agg``, or None when they differ (or none is
    finite)."""
    means = np.array([v[0] for v in agg.values()], dtype=float)
    means = means[np.isfinite(means)]
    return float(means[0]) if means.size and np.all(means == means[0]) else None
