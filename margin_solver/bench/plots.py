"""Figures, one function per figure, and :func:`save_figure`, which writes every figure.

Each function takes results (never recomputes them), draws in the package's style
(:func:`margin_solver.bench.style.figure_style`), writes the file atomically in the format its
suffix names and returns its path. The pyplot state machine is not used, so calls are safe in
scripts and tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from margin_solver.bench.style import OKABE_ITO, figure_style, figure_target, text_colour_on
from margin_solver.core.fileio import WRITER, atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "DPI",
    "figure_style",
    "label_cells",
    "plain_log_labels",
    "plot_attention_allocation",
    "plot_gd_trajectory",
    "plot_step_size_grid",
    "save_figure",
]

#: Print resolution of every raster figure the package writes (dots per inch).
DPI = 200

#: Panels of :func:`plot_gd_trajectory`: title, y label, (column, legend label) pairs.
_GD_PANELS = (
    (
        "Training loss",
        "mean logistic loss",
        (("loss", "loss"), ("objective", "objective (with weight decay)")),
    ),
    (
        "Errors",
        "error rate",
        (
            ("train_error", "train (observed labels)"),
            ("test_error", "test (noisy labels)"),
            ("test_error_clean", "test (clean labels)"),
        ),
    ),
    (
        "Attention on the signal token (train)",
        "mean attention",
        (("attn_signal_clean", "clean samples"), ("attn_signal_noisy", "noisy samples")),
    ),
    (
        "Norms and normalised margin",
        "value",
        (
            ("norm_v", r"$\|v\|$"),
            ("norm_p", r"$\|p\|$"),
            ("normalized_margin", r"$\mathrm{min}_i\, y_i f(X_i)\; /\; \|v\|$"),
        ),
    ),
)


def plot_gd_trajectory(
    trajectory: Mapping[str, np.ndarray], path: str | os.PathLike, title: str | None = None
) -> Path:
    """Panels of a GD trajectory: loss, errors, attention on the signal, norms.

    A panel whose columns are all NaN (no test set; attention on data without a signal
    token) is left out, so every panel drawn carries data.

    Parameters
    ----------
    trajectory : mapping of str to array
        :attr:`margin_solver.gd.endpoints.GDResult.trajectory` (columns of
        :data:`margin_solver.gd.endpoints.TRAJECTORY_COLUMNS`); NaN columns are left out.
    path : str or PathLike
        Output file; its suffix picks the format (see :func:`save_figure`).
    title : str, optional
        Figure title; default "Gradient descent trajectory".

    Returns
    -------
    Path
        The file written.
    """
    step = np.asarray(trajectory["step"])
    loss = np.asarray(trajectory.get("loss", []), dtype=np.float64)
    panels = []
    for name, ylabel, series in _GD_PANELS:
        lines = []
        for key, label in series:
            values = np.asarray(trajectory.get(key, []), dtype=np.float64)
            if key == "objective" and np.array_equal(values, loss):
                continue  # no weight decay: the objective is the loss
            if values.size and np.any(np.isfinite(values)):
                lines.append((key, label, values))
        if lines:
            panels.append((name, ylabel, lines))
    ncols = 2 if len(panels) > 1 else 1
    nrows = -(-len(panels) // ncols)
    with figure_style():
        fig = Figure(figsize=(3.6 * ncols, 2.6 * nrows + 0.5))
        axes = fig.subplots(nrows, ncols, sharex=True, squeeze=False).ravel()
        for ax, (name, ylabel, lines) in zip(axes, panels):
            for _key, label, values in lines:
                ax.plot(step, values, marker="o" if len(step) <= 12 else None, label=label)
            ax.set_title(name)
            ax.set_ylabel(ylabel)
            ax.legend()
            keys = {key for key, _, _ in lines}
            if keys & {"loss", "objective"} and np.all(loss[np.isfinite(loss)] > 0):
                ax.set_yscale("log")
            elif keys & {"norm_v", "norm_p"} and step.size > 1:
                ax.set_yscale("symlog", linthresh=1e-3)
            elif not keys & {"norm_v", "norm_p", "normalized_margin"}:
                ax.set_ylim(-0.02, 1.02)  # errors and attention are fractions
        for ax in axes[len(panels) :]:
            ax.remove()
        for ax in axes[max(len(panels) - ncols, 0) : len(panels)]:
            ax.set_xlabel("GD step")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.xaxis.set_tick_params(labelbottom=True)
        fig.suptitle(title or "Gradient descent trajectory")
    return save_figure(fig, path)


def plot_step_size_grid(
    rows: list[Mapping], path: str | os.PathLike, n: int, d: int, default: tuple[str, str]
) -> Path:
    r"""Two-step GD over :math:`\kappa`: clean test error and fraction of runs that interpolate.

    Top row: every step-size constant pair ``(c0, g)`` (and the long constant-step runs,
    labelled ``c0 = "const<steps>"``) at one size ``(n, d)``; bottom row: the ``default``
    pair at every size. ``rows`` are those of ``python -m margin_solver.bench.measure.gd_defaults``
    (keys ``n, d, kappa, c0, g, interpolates, test_error_clean``), averaged over seeds here.

    Returns
    -------
    Path
        The file written (format from the suffix of ``path``).
    """
    pairs = sorted({(str(r["c0"]), str(r["g"])) for r in rows})
    sizes = sorted({(int(r["n"]), int(r["d"])) for r in rows})
    top = [
        (
            _pair_label(c0, g),
            lambda r, c0=c0, g=g: (
                (str(r["c0"]), str(r["g"])) == (c0, g) and (int(r["n"]), int(r["d"])) == (n, d)
            ),
        )
        for c0, g in pairs
    ]
    bottom = [
        (
            f"$n = {nn}$, $d = {dd}$",
            lambda r, nn=nn, dd=dd: (
                (str(r["c0"]), str(r["g"])) == default and (int(r["n"]), int(r["d"])) == (nn, dd)
            ),
        )
        for nn, dd in sizes
    ]
    rows_drawn = [(top, f"$n = {n}$, $d = {d}$")]
    if sizes != [(n, d)]:  # with one size the bottom row would repeat the top row's default
        rows_drawn.append((bottom, f"default $c_0 = {default[0]}$, $g = {default[1]}$"))
    with figure_style():
        fig = Figure(figsize=(7.2, 3.1 * len(rows_drawn) + 0.6))
        axes = fig.subplots(len(rows_drawn), 2, sharex=True, squeeze=False)
        for row_axes, (series, what) in zip(axes, rows_drawn):
            for label, keep in series:
                sel = [r for r in rows if keep(r)]
                kappas = sorted({float(r["kappa"]) for r in sel})
                if not kappas:
                    continue
                for ax, key in zip(row_axes, ("test_error_clean", "interpolates")):
                    mean = [
                        np.mean([float(r[key]) for r in sel if float(r["kappa"]) == k])
                        for k in kappas
                    ]
                    ax.plot(kappas, mean, marker="o", label=label)
            row_axes[0].set_title(f"Clean test error after GD\n({what})")
            row_axes[0].set_ylabel("clean test error")
            row_axes[1].set_title(f"Runs that interpolate\n({what})")
            row_axes[1].set_ylabel("fraction of seeds")
            for ax in row_axes:
                ax.set_ylim(-0.03, 1.03)
            row_axes[0].legend(fontsize="x-small")  # one legend per row: same lines in both
        for ax in axes[-1]:
            ax.set_xlabel(r"$\kappa = n\,\mathrm{SNR}^2$")
        fig.suptitle(
            r"GD endpoints over $\kappa$: two-step step-size constants and long runs, "
            r"$T = 2$"
        )
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
        Output file; its suffix picks the format (see :func:`save_figure`).
    title : str, optional
        Figure title.

    Returns
    -------
    Path
        The file written.
    """
    # Colour and marker both tell the groups apart (print in grey, colour-vision deficiency).
    kinds = {"clean": (OKABE_ITO[0], "o"), "noisy": (OKABE_ITO[3], "^")}
    jitter = np.random.default_rng(0)  # fixed jitter: the figure is reproducible
    with figure_style():
        fig = Figure(figsize=(3.6 * len(panels), 3.4))
        axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
        for ax, panel in zip(axes, panels):
            models = panel["models"]
            for k, (_name, groups) in enumerate(models.items()):
                for j, (kind, values) in enumerate(zip(kinds, groups)):
                    values = np.asarray(values, dtype=np.float64)
                    colour, marker = kinds[kind]
                    x = 3 * k + j
                    label = f"{kind} samples" if k == 0 else None
                    if values.size:
                        ax.bar(x, values.mean(), width=0.8, color=colour, alpha=0.3, label=label)
                        ax.scatter(
                            x + jitter.uniform(-0.25, 0.25, values.size),
                            values,
                            s=9,
                            color=colour,
                            marker=marker,
                            zorder=3,
                            linewidths=0,
                        )
                        ax.annotate(
                            f"{values.mean():.2f}",
                            (x, min(values.mean() + 0.03, 1.02)),
                            ha="center",
                            fontsize="small",
                            zorder=4,
                            bbox={
                                "boxstyle": "round,pad=0.15",
                                "fc": "white",
                                "ec": "none",
                                "alpha": 0.8,
                            },
                        )
            ax.set_xticks([3 * k + 0.5 for k in range(len(models))], list(models))
            ax.set_title(panel["title"])
            ax.set_ylim(-0.03, 1.1)
            ax.grid(axis="x", visible=False)
        axes[0].set_ylabel("attention on the signal token\n(per training sample)")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2)
        fig.suptitle(title or "Where the attention goes: clean vs noisy training samples")
    return save_figure(fig, path)


def _pair_label(c0: str, g: str) -> str:
    if c0.startswith("const"):
        return f"constant step, {c0[len('const') :]} steps"
    return f"two-step, $c_0 = {c0}$, $g = {g}$"


def save_figure(fig: Figure, path: str | os.PathLike, dpi: int = DPI) -> Path:
    """Write ``fig`` in the format its file suffix names, in the package's style, atomically.

    The one place where every figure of the package is written: the suffix picks the format
    (:data:`margin_solver.bench.style.FORMATS`: PDF, SVG, PNG), the saving runs under
    :func:`margin_solver.bench.style.figure_style` (TrueType fonts in PDF, reproducible
    SVG), PNGs keep their full colours (RGBA) and vector files carry no creation date, so
    that an unchanged figure gives the same bytes. Inside
    :func:`margin_solver.bench.style.saving_as` (``margin-solver bench --format``) the file
    gets that format's suffix instead.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, laid out already (constrained layout or ``tight_layout``).
    path : str or PathLike
        Output file (``.pdf``, ``.svg`` or ``.png``); parent folders are created.
    dpi : int, default :data:`DPI`
        Resolution of a PNG (and of raster parts of vector files), stored in its metadata.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    InvalidInputError
        Unknown suffix, or ``path`` exists and is not a regular file.

    Examples
    --------
    >>> import tempfile
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(2, 2))
    >>> _ = fig.add_subplot().plot([0, 1], [1, 0])
    >>> save_figure(fig, Path(tempfile.mkdtemp()) / "line.pdf").read_bytes()[:5]
    b'%PDF-'
    """
    target, fmt = figure_target(path)
    # the creator names the package (provenance); the mark atomic_write leaves beside the file
    # is what lets a later run replace it (fileio.check_replaceable)
    metadata = {**_NO_DATE.get(fmt, {}), _CREATOR_KEY[fmt]: f"{WRITER} (Matplotlib)"}

    def write(fh) -> None:
        with figure_style():
            fig.savefig(fh, format=fmt, dpi=dpi, metadata=metadata)

    return atomic_write(target, write, kind="figure")


#: Metadata that keeps the creation date out of vector files (same figure, same bytes).
_NO_DATE: dict[str, dict[str, None]] = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}

#: The metadata key naming the program that wrote a file, per format (matplotlib's names).
_CREATOR_KEY: dict[str, str] = {"pdf": "Creator", "svg": "Creator", "png": "Software"}


def label_cells(
    ax: Axes,
    mesh: Any,
    x: Sequence[float],
    y: Sequence[float],
    values: np.ndarray,
    texts: Sequence[Sequence[str]] | None = None,
    fontsize: float | str = "small",
) -> None:
    """Write a text in every cell of a heatmap, black or white, whichever reads better on
    the cell's colour (:func:`margin_solver.bench.style.text_colour_on`).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    mesh : matplotlib.cm.ScalarMappable
        What drew the cells (``pcolormesh``); its colour map and norm give each cell's colour.
    x, y : sequence of float
        Cell centres: column ``j`` at ``x[j]``, row ``i`` at ``y[i]``.
    values : ndarray of shape (len(y), len(x))
        The values coloured; NaN cells get no text.
    texts : sequence of sequence of str, optional
        The text per cell (same shape); default the value with two decimals.
    fontsize : float or str, default="small"
        Relative to the style's font size.
    """
    colours = mesh.to_rgba(np.ma.masked_invalid(values))
    for i, yy in enumerate(y):
        for j, xx in enumerate(x):
            text = texts[i][j] if texts is not None else f"{values[i, j]:.2f}"
            if np.isfinite(values[i, j]) and text:
                ax.text(
                    xx,
                    yy,
                    text,
                    ha="center",
                    va="center",
                    fontsize=fontsize,
                    color=text_colour_on(colours[i, j]),
                )


def plain_log_labels(axis: Any) -> None:
    """Label a log-scale axis with plain numbers (0.1, 0.2, 0.5, 1) instead of powers.

    Powers of ten are always labelled; when the view spans less than about one decade, so
    that at most one power of ten shows, 2x, 3x and 5x a power of ten are labelled too.
    """
    from matplotlib.ticker import FuncFormatter

    def label(value: float, _pos: int) -> str:
        if not value > 0:
            return ""
        lo, hi = sorted(axis.get_view_interval())
        mantissa = round(value / 10 ** np.floor(np.log10(value) + 1e-9), 6)
        short = lo > 0 and np.log10(hi / lo) < 1.2
        return f"{value:g}" if mantissa == 1 or (short and mantissa in (2, 3, 5)) else ""

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(FuncFormatter(label))
