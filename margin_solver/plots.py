"""Figures, one function per figure, drawn with matplotlib's Agg canvas (no display needed).

Each function takes results (never recomputes them), writes a PNG atomically and returns
its path. The pyplot state machine is not used, so calls are safe in scripts and tests.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["plot_gd_trajectory"]


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
    for ax, name, ylabel, series in panels:
        for key, label in series:
            values = np.asarray(trajectory.get(key, []), dtype=np.float64)
            if values.size and np.any(np.isfinite(values)):
                ax.plot(step, values, marker="o" if len(step) <= 12 else None, label=label)
        ax.set_title(name)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    loss = np.asarray(trajectory.get("loss", []), dtype=np.float64)
    if loss.size and np.all(loss[np.isfinite(loss)] > 0):
        axes[0, 0].set_yscale("log")
    norms = [np.asarray(trajectory.get(k, []), dtype=np.float64) for k in ("norm_v", "norm_p")]
    if all(np.all(x[np.isfinite(x)] > 0) for x in norms if x.size) and step.size > 1:
        axes[1, 1].set_yscale("symlog", linthresh=1e-3)
    axes[0, 1].set_ylim(-0.02, 1.02)
    axes[1, 0].set_ylim(-0.02, 1.02)
    for ax in axes[1]:
        ax.set_xlabel("GD step")
    fig.suptitle(title or "Gradient descent trajectory")
    return _save(fig, path)


def _save(fig: Figure, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
