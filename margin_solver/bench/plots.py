"""Figures, one function per figure, drawn with matplotlib's Agg canvas (no display needed).

Each function takes results (never recomputes them), writes a PNG atomically and returns
its path. The pyplot state machine is not used, so calls are safe in scripts and tests.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from margin_solver.fileio import atomic_write

__all__ = [
    "DPI",
    "plot_attention_allocation",
    "plot_gd_trajectory",
    "plot_step_size_grid",
    "save_figure",
]

#: Print resolution of every figure the package writes (dots per inch).
DPI = 200


def plot_gd_trajectory(
    trajectory: Mapping[str, np.ndarray], path: str | os.PathLike, title: str | None = None
) -> Path:
    """Four panels of a GD trajectory: loss, errors, attention on the signal, norms.

    Parameters
    ----------
    trajectory : mapping of str to array
        :attr:`margin_solver.gd.GDResult.trajectory` (columns of
        :data:`margin_solver.gd.TRAJECTORY_COLUMNS`); NaN columns (e.g. no test set) are
        left out.
    path : str or PathLike
        Output PNG.
    title : str, optional
        Figure title; default "Gradient descent trajectory".

    Returns
    -------
    Path
        The file written.
    """
    step = np.asarray(trajectory["step"])
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2, sharex=True)
    panels = [
        (axes[0, 0], "Training loss", "mean logistic loss",
         [("loss", "loss"), ("objective", "objective (with weight decay)")]),
        (axes[0, 1], "Errors", "error rate",
         [("train_error", "train (observed labels)"), ("test_error", "test (noisy labels)"),
          ("test_error_clean", "test (clean labels)")]),
        (axes[1, 0], "Attention on the signal token (train)", "mean attention",
         [("attn_signal_clean", "clean samples"), ("attn_signal_noisy", "noisy samples")]),
        (axes[1, 1], "Norms and normalised margin", "value",
         [("norm_v", "||v||"), ("norm_p", "||p||"), ("normalized_margin", "min margin / ||v||")]),
    ]
    loss = np.asarray(trajectory.get("loss", []), dtype=np.float64)
    for ax, name, ylabel, series in panels:
        for key, label in series:
            values = np.asarray(trajectory.get(key, []), dtype=np.float64)
            if key == "objective" and np.array_equal(values, loss):
                continue  # no weight decay: the objective is the loss
            if values.size and np.any(np.isfinite(values)):
                ax.plot(step, values, marker="o" if len(step) <= 12 else None, label=label)
        ax.set_title(name)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    if loss.size and np.all(loss[np.isfinite(loss)] > 0):
        axes[0, 0].set_yscale("log")
    norms = [np.asarray(trajectory.get(k, []), dtype=np.float64) for k in ("norm_v", "norm_p")]
    if all(np.all(x[np.isfinite(x)] > 0) for x in norms if x.size) and step.size > 1:
        axes[1, 1].set_yscale("symlog", linthresh=1e-3)
    axes[0, 1].set_ylim(-0.02, 1.02)
    axes[1, 0].set_ylim(-0.02, 1.02)
    for ax in axes[1]:
        ax.set_xlabel("GD step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title or "Gradient descent trajectory")
    return save_figure(fig, path)


def plot_step_size_grid(
    rows: list[Mapping], path: str | os.PathLike, n: int, d: int, default: tuple[str, str]
) -> Path:
    """Two-step GD over kappa: clean test error and fraction of runs that interpolate.

    Top row: every step-size constant pair ``(c0, g)`` (and the long constant-step runs,
    labelled ``c0 = "const<steps>"``) at one size ``(n, d)``; bottom row: the ``default``
    pair at every size. ``rows`` are those of ``benchmarks/gd_defaults.py``
    (keys ``n, d, kappa, c0, g, interpolates, test_error_clean``), averaged over seeds here.

    Returns
    -------
    Path
        The file written.
    """
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2, sharex=True)
    pairs = sorted({(str(r["c0"]), str(r["g"])) for r in rows})
    sizes = sorted({(int(r["n"]), int(r["d"])) for r in rows})
    top = [(_pair_label(c0, g), lambda r, c0=c0, g=g: (str(r["c0"]), str(r["g"])) == (c0, g)
            and (int(r["n"]), int(r["d"])) == (n, d)) for c0, g in pairs]
    bottom = [(f"n={nn}, d={dd}", lambda r, nn=nn, dd=dd: (str(r["c0"]), str(r["g"])) == default
               and (int(r["n"]), int(r["d"])) == (nn, dd)) for nn, dd in sizes]
    for row_axes, series, what in ((axes[0], top, f"n={n}, d={d}"),
                                   (axes[1], bottom, f"default c0={default[0]}, g={default[1]}")):
        for label, keep in series:
            sel = [r for r in rows if keep(r)]
            kappas = sorted({float(r["kappa"]) for r in sel})
            if not kappas:
                continue
            for ax, key in zip(row_axes, ("test_error_clean", "interpolates")):
                mean = [np.mean([float(r[key]) for r in sel if float(r["kappa"]) == k]) for k in kappas]
                ax.plot(kappas, mean, marker="o", label=label)
        row_axes[0].set_title(f"Clean test error after GD ({what})")
        row_axes[0].set_ylabel("clean test error")
        row_axes[1].set_title(f"Runs that interpolate ({what})")
        row_axes[1].set_ylabel("fraction of seeds")
        for ax in row_axes:
            ax.set_ylim(-0.03, 1.03)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    for ax in axes[1]:
        ax.set_xlabel("kappa = n SNR^2")
    fig.suptitle("GD endpoints over kappa: two-step step-size constants and long runs, T = 2")
    return save_figure(fig, path)


def plot_attention_allocation(
    panels: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str | None = None
) -> Path:
    """Attention on the signal token per sample, clean vs noisy, for several models.

    Parameters
    ----------
    panels : sequence of mapping
        One panel each, with ``"title"`` (str) and ``"models"``: a mapping from model name
        to ``(clean, noisy)``, two arrays of per-sample attention on the signal token.
    path : str or PathLike
        Output PNG.
    title : str, optional
        Figure title.

    Returns
    -------
    Path
        The file written.
    """
    fig = Figure(figsize=(5.2 * len(panels), 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    colours = {"clean": "tab:blue", "noisy": "tab:red"}
    jitter = np.random.default_rng(0)  # fixed jitter: the figure is reproducible
    for ax, panel in zip(axes, panels):
        models = panel["models"]
        for k, (name, groups) in enumerate(models.items()):
            for j, (kind, values) in enumerate(zip(("clean", "noisy"), groups)):
                values = np.asarray(values, dtype=np.float64)
                x = 3 * k + j
                label = f"{kind} samples" if k == 0 else None
                if values.size:
                    ax.bar(x, values.mean(), width=0.8, color=colours[kind], alpha=0.35, label=label)
                    ax.scatter(x + jitter.uniform(-0.25, 0.25, values.size), values, s=9,
                               color=colours[kind], zorder=3)
                    ax.annotate(f"{values.mean():.2f}", (x, min(values.mean() + 0.03, 1.02)),
                                ha="center", fontsize=8)
        ax.set_xticks([3 * k + 0.5 for k in range(len(models))], list(models))
        ax.set_title(panel["title"])
        ax.set_ylim(-0.03, 1.1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("attention on the signal token (per training sample)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=9)
    fig.suptitle(title or "Where the attention goes: clean vs noisy training samples")
    return save_figure(fig, path)


def _pair_label(c0: str, g: str) -> str:
    if c0.startswith("const"):
        return f"constant step, {c0[len('const'):]} steps"
    return f"two-step, c0={c0}, g={g}"


def save_figure(fig: Figure, path: str | os.PathLike, dpi: int = DPI) -> Path:
    """Write ``fig`` as a PNG at ``dpi`` dots per inch, atomically.

    The image is re-encoded with an adaptive 256-colour palette: figures have few distinct
    colours, so it looks the same and is about 3x smaller.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, laid out already (constrained layout or ``tight_layout``).
    path : str or PathLike
        Output PNG; parent folders are created.
    dpi : int, default :data:`DPI`
        Resolution, also stored in the PNG's metadata.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(2, 2))
    >>> _ = fig.add_subplot().plot([0, 1], [1, 0])
    >>> save_figure(fig, Path(tempfile.mkdtemp()) / "line.png").name
    'line.png'
    """
    from PIL import Image  # matplotlib's own dependency

    def write(fh) -> None:
        raw = io.BytesIO()
        fig.savefig(raw, format="png", dpi=dpi)
        raw.seek(0)
        with Image.open(raw) as img:
            small = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(fh, format="png", optimize=True, dpi=(dpi, dpi))

    return atomic_write(path, write)
