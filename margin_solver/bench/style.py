"""The one style of every figure the package draws, and the figure formats it writes.

Importing this module does not import matplotlib (the command line checks an output's suffix
before any work, without loading it); :func:`figure_style` imports it on first use.

Use :func:`figure_style` around the code that *creates* a figure (sizes, fonts, colours and
line widths are read when artists are made) and save through
:func:`margin_solver.bench.plots.save_figure`, which applies the same style to the saving and
picks the format from the file's suffix::

    with figure_style():
        fig = Figure(layout="constrained")
        ...
    save_figure(fig, "fig.pdf")

``figure_style()`` also works as a decorator (``@figure_style()``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from margin_solver.core.validation import InvalidInputError

__all__ = [
    "FORMATS",
    "OKABE_ITO",
    "STYLE",
    "figure_format",
    "figure_style",
    "figure_target",
    "saving_as",
    "text_colour_on",
]

#: File suffixes (lower case) and the matplotlib format each writes.
#: (No EPS: PostScript has no transparency, and writing it took seconds per figure.)
FORMATS: dict[str, str] = {".pdf": "pdf", ".svg": "svg", ".png": "png"}

#: Okabe and Ito's palette for colour-vision deficiencies ("Color Universal Design", 2008),
#: most distinguishable first; yellow, weak on white, comes last and black is left out
#: (reference lines are black). ``tests/test_figures_style.py`` simulates the three
#: dichromacies (Machado et al. 2009) and checks the pairs stay apart.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
)

#: rcParams of every figure: sizes for a page (a 2 x 2 grid of panels is 7.2 inches wide,
#: a paper's text width, at 9 pt), the Okabe-Ito colour cycle, viridis as the colour map,
#: TrueType fonts in PDF (journals refuse Type 3) and reproducible SVG ids.
STYLE: dict[str, Any] = {
    "figure.figsize": (7.2, 5.4),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "figure.titlesize": 11,
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 7.5,
    "legend.framealpha": 0.85,
    "lines.linewidth": 1.5,
    "lines.markersize": 4.5,
    "errorbar.capsize": 2.5,
    "image.cmap": "viridis",
    "mathtext.fontset": "dejavusans",
    "savefig.dpi": 200,
    "pdf.fonttype": 42,
    "svg.fonttype": "path",
    "svg.hashsalt": "margin-solver",
}

_AS: contextvars.ContextVar[str | None] = contextvars.ContextVar("figure_format", default=None)


def _prop_cycle() -> Any:
    from cycler import cycler  # matplotlib's own dependency

    return cycler(color=list(OKABE_ITO))


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """Context (or decorator) in which matplotlib uses :data:`STYLE` and the Okabe-Ito cycle.

    Examples
    --------
    >>> import matplotlib
    >>> with figure_style():
    ...     matplotlib.rcParams["font.size"]
    9.0
    """
    import matplotlib

    with matplotlib.rc_context({**STYLE, "axes.prop_cycle": _prop_cycle()}):
        yield


def figure_format(path: str | os.PathLike) -> str:
    """The matplotlib format that the suffix of ``path`` names (case does not matter).

    Raises
    ------
    InvalidInputError
        The suffix is not one of :data:`FORMATS`.

    Examples
    --------
    >>> figure_format("phase.PDF")
    'pdf'
    >>> figure_format("phase.jpg")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    margin_solver.core.validation.InvalidInputError: phase.jpg: unknown figure format '.jpg';
    give a file name ending in .pdf, .svg or .png.
    """
    suffix = Path(path).suffix
    if suffix.lower() not in FORMATS:
        *first, last = FORMATS
        known = f"{', '.join(first)} or {last}"
        what = f"unknown figure format {suffix!r}" if suffix else "no suffix"
        raise InvalidInputError(f"{path}: {what}; give a file name ending in {known}.")
    return FORMATS[suffix.lower()]


@contextlib.contextmanager
def saving_as(fmt: str | None) -> Iterator[None]:
    """Context in which every figure is written as ``fmt`` (``"pdf"``, ``"svg"``, ...),
    whatever suffix its code gives: ``margin-solver bench --format pdf`` runs the studies in
    it. None changes nothing.

    Raises
    ------
    InvalidInputError
        ``fmt`` is not a format of :data:`FORMATS`.
    """
    if fmt is not None:
        figure_format(f"figure.{fmt}")
    token = _AS.set(fmt)
    try:
        yield
    finally:
        _AS.reset(token)


def figure_target(path: str | os.PathLike) -> tuple[Path, str]:
    """The file a figure meant for ``path`` goes to and its format: ``path`` itself, or its
    stem with the suffix of the :func:`saving_as` format in force.

    Raises
    ------
    InvalidInputError
        The suffix of ``path`` is not one of :data:`FORMATS`.
    """
    fmt = figure_format(path)
    forced = _AS.get()
    if forced is None or forced == fmt:
        return Path(path), fmt
    return Path(path).with_suffix(f".{forced}"), forced


def _linear(channel: float) -> float:
    """sRGB channel in [0, 1] to linear light (IEC 61966-2-1)."""
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def text_colour_on(rgb: Sequence[float]) -> str:
    """``"white"`` or ``"black"``: whichever contrasts more with the background ``rgb``.

    The contrast ratio is WCAG 2's, (L1 + 0.05) / (L2 + 0.05) with L the relative luminance
    of the linearised sRGB colour; white wins below L = 0.179.

    Parameters
    ----------
    rgb : sequence of float
        Red, green, blue in [0, 1] (an alpha channel after them is ignored), e.g. what a
        colour map returns.

    Examples
    --------
    >>> text_colour_on((0.267, 0.005, 0.329))  # viridis at 0: dark purple
    'white'
    >>> text_colour_on((0.993, 0.906, 0.144))  # viridis at 1: yellow
    'black'
    """
    r, g, b = (_linear(float(c)) for c in rgb[:3])
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "white" if 1.05 / (luminance + 0.05) > (luminance + 0.05) / 0.05 else "black"
