"""Sweep engine: a grid of cells run in parallel, each finished row appended to a CSV at once.

A *cell* is one point of the grid (data source, n, d, T, SNR or kappa, eta, seed) with one
*method* (a name in :data:`margin_solver.bench.methods.SWEEP_METHODS`). Cells run locally
through joblib, or on an existing Dask distributed cluster when a scheduler address is given.
Workers only compute and return rows; the parent process appends them to the results file
(:class:`margin_solver.bench.resultlog.ResultLog`: one write + fsync per row under a lock), so an
interrupted sweep keeps every finished row and a re-run with the same output skips them.

Randomness: one sweep seed and the cell's parameters (through a hash of their canonical
text) give a :class:`numpy.random.SeedSequence` per cell, with separate children for the
training set, the test set and the method's initialisation. The data depend on the cell but
not on the method, so methods are compared on the same samples; nothing depends on which
worker ran a cell or in what order. The paper model's test set is drawn in the directions
each fitted model reads (:class:`margin_solver.core.data.ProjectedSamples`: the same law as
its full tokens, at a cost that does not grow with d).

Local workers are processes of the sweep's own executor: they end with :func:`run_sweep`
(killed when it did not complete) and exit by themselves within a second when the process
running the sweep is killed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import itertools
import logging
import os
import platform
import queue
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver._version import __version__
from margin_solver.bench.methods import SWEEP_METHODS, MethodCall, theory_setting
from margin_solver.bench.resultlog import ResultLog, canonical, progress_message, read_rows
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import Dataset, PaperDistribution, ProjectedSamples, load_dataset
from margin_solver.core.fileio import check_output_path, write_json
from margin_solver.core.ooc import check_scheduler_address, connect
from margin_solver.core.progress import ProgressBar, verbose_switch
from margin_solver.core.results import (
    COMPLETED,
    FAILED,
    ConvergenceWarning,
    ResultMixin,
    to_jsonable,
)
from margin_solver.core.validation import MAX_MAGNITUDE, InvalidInputError, parse_json
from margin_solver.theory import DataEvidence, check_conditions, data_evidence

logger = logging.getLogger("margin_solver")

#: Columns that identify a row: the cell's parameters, its seed and its method.
KEY_FIELDS = ("data", "n", "d", "T", "snr", "kappa", "eta", "seed", "method", "heads")

#: Columns a method may fill (see :mod:`margin_solver.bench.methods` for their meaning).
METHOD_FIELDS = (
    "status",
    "R",
    "train_error",
    "train_error_clean",
    "test_error_clean",
    "test_error_noisy",
    "attn_signal_clean",
    "attn_signal_noisy",
    "attn_signal_test",
    "min_margin",
    "norm",
    "p_norm",
    "lower_bound",
    "gap",
    "iterations",
    "message",
)

#: Every column of the results CSV, in order.
FIELDS = (
    *KEY_FIELDS,
    "n_test",
    "n_noisy",
    "predicted_regime",
    "snr_regime",
    *METHOD_FIELDS,
    "seconds",
)

#: How long to wait for a Dask scheduler to answer.
DASK_CONNECT_TIMEOUT = "20s"

#: Columns holding text; every other column is numeric.
TEXT_FIELDS = frozenset({"data", "method", "status", "message", "predicted_regime", "snr_regime"})


# -- cells and grids --------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One grid point with one method: a row of the results file.

    Parameters
    ----------
    n, d, T : int
        Training samples, token dimension, tokens per sample.
    snr, kappa : float or None
        Signal-to-noise ratio and ``kappa = n SNR^2``; give one, the other is derived
        (both None for real data, whose SNR is not a parameter).
    eta : float
        Label-flip probability.
    seed : int
        Repetition index; with the sweep seed it fixes every random draw of the cell.
    method : str
        A name in :data:`margin_solver.bench.methods.SWEEP_METHODS`.
    data : str, default="paper"
        A name in :data:`DATA_SOURCES`, or the path of a dataset file or directory
        (:func:`data_source`).
    heads : int, default=1
        Attention heads of the model the method fits (cells differing only in ``heads`` see
        the same samples).
    """

    n: int
    d: int
    T: int
    snr: float | None
    kappa: float | None
    eta: float
    seed: int
    method: str
    data: str = "paper"
    heads: int = 1

    def __post_init__(self) -> None:
        if self.snr is not None and self.kappa is None:
            object.__setattr__(self, "kappa", self.n * float(self.snr) ** 2)
        elif self.kappa is not None and self.snr is None:
            object.__setattr__(self, "snr", float(np.sqrt(float(self.kappa) / self.n)))

    def key(self) -> tuple[str, ...]:
        """The row key: canonical text of :data:`KEY_FIELDS`."""
        return tuple(canonical(getattr(self, name)) for name in KEY_FIELDS)

    def data_key(self) -> tuple[str, ...]:
        """The key without the method and heads: cells sharing it see the same samples."""
        return tuple(
            canonical(getattr(self, name)) for name in KEY_FIELDS if name not in ("method", "heads")
        )


@dataclass(frozen=True)
class SweepGrid:
    """A Cartesian grid of cells.

    Parameters
    ----------
    n, d : sequence of int
    methods : sequence of str
    snr, kappa : sequence of float, optional
        Give exactly one for synthetic data (``data="paper"``); neither for real data.
    T : sequence of int, default=(2,)
    eta : sequence of float, default=(0.1,)
    seeds : int or sequence of int, default=1
        A count (seeds 0..seeds-1) or explicit seed indices.
    data : str, default="paper"
        ``"paper"``, ``"digits"``, ``"mnist"``, or the path of the user's dataset file
        (``.npz``) or directory: each cell then draws ``n`` of its samples with the cell's
        seed, flips labels with probability ``eta``, and holds out the rest (at most
        ``n_test``) as the test set; ``T`` and ``d`` are the file's (:func:`file_shape`).
    heads : sequence of int, default=(1,)
        Attention heads (:mod:`margin_solver.minnorm.multihead`); varies with the methods, fastest.

    Examples
    --------
    >>> grid = SweepGrid(n=[10, 20], d=[100], kappa=[0.5, 4.0], seeds=2, methods=["uniform-svm"])
    >>> len(grid.cells())
    8
    """

    n: Sequence[int]
    d: Sequence[int]
    methods: Sequence[str]
    snr: Sequence[float] | None = None
    kappa: Sequence[float] | None = None
    T: Sequence[int] = (2,)
    eta: Sequence[float] = (0.1,)
    seeds: int | Sequence[int] = 1
    data: str = "paper"
    heads: Sequence[int] = (1,)

    def __post_init__(self) -> None:
        if self.data == "paper" and (self.snr is None) == (self.kappa is None):
            raise InvalidInputError("A synthetic grid needs exactly one of snr and kappa.")
        for name in ("n", "d", "methods", "T", "eta"):
            if len(getattr(self, name)) == 0:
                raise InvalidInputError(f"The grid axis {name!r} is empty.")
        # Refuse bad values here, before any cell runs, instead of writing a row of failures.
        _check_axis(self.n, "n", _is_int_at_least(2), "integers >= 2")
        _check_axis(self.d, "d", _is_int_at_least(1), "integers >= 1")
        _check_axis(self.T, "T", _is_int_at_least(1), "integers >= 1")
        _check_axis(self.heads, "heads", _is_int_at_least(1), "integers >= 1")
        _check_axis(self.eta, "eta", lambda x: _is_real(x) and 0 <= x < 0.5, "numbers in [0, 0.5)")
        for name in ("snr", "kappa"):
            if getattr(self, name) is not None:
                # Beyond MAX_MAGNITUDE the signal tokens would overflow the solvers' products.
                _check_axis(
                    getattr(self, name),
                    name,
                    lambda x: _is_real(x) and 0 <= x <= MAX_MAGNITUDE,
                    f"finite numbers >= 0 and <= {MAX_MAGNITUDE:g}",
                )
        if not isinstance(self.seeds, (int, np.integer)):
            _check_axis(self.seeds, "seeds", _is_int_at_least(0), "integers >= 0")

    @property
    def seed_list(self) -> list[int]:
        """The seed indices."""
        if isinstance(self.seeds, (int, np.integer)):
            if self.seeds < 1:
                raise InvalidInputError(f"seeds must be >= 1, got {self.seeds}.")
            return list(range(int(self.seeds)))
        return [int(s) for s in self.seeds]

    def cells(self) -> list[Cell]:
        """All cells, methods varying fastest (so a cell's methods finish close together)."""
        strength: list[tuple[float | None, float | None]]
        if self.snr is not None:
            strength = [(float(s), None) for s in self.snr]
        elif self.kappa is not None:
            strength = [(None, float(k)) for k in self.kappa]
        else:
            strength = [(None, None)]
        out = []
        for n, (snr, kappa), d, T, eta, seed, method, heads in itertools.product(
            self.n, strength, self.d, self.T, self.eta, self.seed_list, self.methods, self.heads
        ):
            out.append(
                Cell(
                    int(n),
                    int(d),
                    int(T),
                    snr,
                    kappa,
                    float(eta),
                    seed,
                    str(method),
                    self.data,
                    int(heads),
                )
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (for the sidecar)."""
        return to_jsonable(dataclasses.asdict(self))


@dataclass(frozen=True)
class SweepConfig:
    """Settings shared by every cell of a sweep; a resumed sweep must use the same ones.

    Parameters
    ----------
    sweep_seed : int, default=0
        Root of every random stream.
    n_test : int, default=1000
        Test samples per cell (>= 2; synthetic data, drawn in the fitted model's directions,
        :class:`margin_solver.core.data.ProjectedSamples`; real data use their held-out
        images).
    method_options : dict, default={}
        Per-method keyword options, e.g. ``{"gd-long": {"steps": 500}}``.
    data_options : dict, default={}
        Options of the data source, e.g. ``PaperDistribution`` keywords (``sigma``,
        ``signal``) for ``"paper"``, or the patching of ``"digits"``.
    check : bool, default=True
        Run the theorem checker (:func:`margin_solver.theory.check_conditions`, package
        constants) on each cell's training set, for the cell's method at the setting it ran
        with (:func:`margin_solver.bench.methods.theory_setting`), and record its
        ``predicted_regime`` and ``snr_regime`` (not timed).
    """

    sweep_seed: int = 0
    n_test: int = 1000
    method_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)
    check: bool = True

    def __post_init__(self) -> None:
        _check_axis([self.sweep_seed], "sweep_seed", _is_int_at_least(0), "an integer >= 0")
        _check_axis([self.n_test], "n_test", _is_int_at_least(2), "an integer >= 2")
        if not isinstance(self.data_options, dict):
            raise InvalidInputError(f"data_options must be a dict, got {self.data_options!r}.")
        if not isinstance(self.method_options, dict):
            raise InvalidInputError(f"method_options must be a dict, got {self.method_options!r}.")
        unknown = sorted(set(self.method_options) - set(SWEEP_METHODS))
        if unknown:
            raise InvalidInputError(
                f"method_options name unknown method(s) {unknown}; "
                f"available: {sorted(SWEEP_METHODS)}."
            )
        for method, options in self.method_options.items():
            # Option names and values are the method's to check (a bad one is a failed row).
            if not isinstance(options, dict):
                raise InvalidInputError(
                    f"method_options[{method!r}] must be a dict of options, got {options!r}."
                )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return to_jsonable(dataclasses.asdict(self))


# -- seeds and data -------------------------------------------------------------------------
@dataclass(frozen=True)
class CellSeeds:
    """Independent seed sequences of one cell."""

    train: np.random.SeedSequence
    test: np.random.SeedSequence
    init: np.random.SeedSequence


def cell_seeds(cell: Cell, sweep_seed: int) -> CellSeeds:
    """Seed sequences for a cell, from the sweep seed and a hash of the cell's key.

    Train and test streams depend on the data key only (same samples for every method);
    the initialisation stream also on the method.

    Examples
    --------
    >>> c = Cell(n=10, d=50, T=2, snr=0.5, kappa=None, eta=0.1, seed=0, method="uniform-svm")
    >>> a, b = cell_seeds(c, 0), cell_seeds(c, 0)
    >>> bool(a.train.generate_state(1)[0] == b.train.generate_state(1)[0])
    True
    """
    words = _hash_words(cell.data_key())
    entropy = int(sweep_seed)
    method_words = _hash_words((cell.method,))
    return CellSeeds(
        train=np.random.SeedSequence(entropy, spawn_key=(*words, 0)),
        test=np.random.SeedSequence(entropy, spawn_key=(*words, 1)),
        init=np.random.SeedSequence(entropy, spawn_key=(*words, 2, *method_words)),
    )


def _hash_words(parts: Sequence[str]) -> tuple[int, ...]:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))


def _paper_data(
    cell: Cell, seeds: CellSeeds, n_test: int, options: dict[str, Any]
) -> tuple[Dataset, ProjectedSamples]:
    dist = PaperDistribution(d=cell.d, T=cell.T, snr=cell.snr, eta=cell.eta, **options)
    return dist.sample(cell.n, seeds.train), ProjectedSamples(dist, n_test, seeds.test)


def _image_data(source: str) -> Callable[..., tuple[Dataset, Dataset]]:
    def make(
        cell: Cell, seeds: CellSeeds, n_test: int, options: dict[str, Any]
    ) -> tuple[Dataset, Dataset]:
        from margin_solver.bench import realdata

        loader = getattr(realdata, f"{source}_train_test")
        train, test = loader(cell.n, cell.eta, seeds.train, seeds.test, n_test=n_test, **options)
        if (train.T, train.d) != (cell.T, cell.d):
            raise InvalidInputError(
                f"The {source} options give T={train.T}, d={train.d} but the cell says T={cell.T}, "
                f"d={cell.d}; build the grid with realdata.{source}_shape(**options)."
            )
        return train, test

    return make


@functools.lru_cache(maxsize=4)
def _user_dataset(path: str) -> Dataset:
    """The dataset file or directory at ``path`` (read once per process)."""
    return load_dataset(path)


def file_shape(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(n, T, d)`` of the dataset file (``.npz``) or directory at ``path``.

    Raises
    ------
    InvalidInputError
        No dataset there, or an unreadable one.
    """
    X = _user_dataset(os.fspath(path)).X
    return X.shape


def _file_data(
    cell: Cell, seeds: CellSeeds, n_test: int, options: dict[str, Any]
) -> tuple[Dataset, Dataset]:
    """``cell.n`` samples of the user's dataset at ``cell.data`` drawn with the train seed,
    the rest (at most ``n_test``, in the same random order) held out as the test set; labels
    flipped with probability ``cell.eta`` (train and test, each with its own seed), the file's
    labels (its ``clean_y`` when it has them) kept as the clean labels."""
    if options:
        raise TypeError(f"a dataset file takes no data options, got {sorted(options)}")
    data = _user_dataset(cell.data)
    N, T, d = data.X.shape
    if (T, d) != (cell.T, cell.d):
        raise InvalidInputError(
            f"{cell.data} holds T={T}, d={d} but the cell says T={cell.T}, d={cell.d}; "
            "build the grid with sweeps.file_shape(path)."
        )
    if cell.n >= N:
        raise InvalidInputError(
            f"n={cell.n} leaves no test samples: {cell.data} holds {N} samples; give n < {N}."
        )
    order = np.random.default_rng(seeds.train).permutation(N)
    clean = data.y if data.clean_y is None else data.clean_y

    def part(rows: np.ndarray, seed: np.random.SeedSequence) -> Dataset:
        flip = np.random.default_rng(seed).random(len(rows)) < cell.eta
        y = np.where(flip, -clean[rows], clean[rows])
        signal = None if data.signal_index is None else data.signal_index[rows]
        return Dataset(np.asarray(data.X[rows]), y, clean_y=clean[rows], signal_index=signal)

    return part(order[: cell.n], seeds.train), part(order[cell.n : cell.n + n_test], seeds.test)


#: Data sources: name -> function(cell, seeds, n_test, options) -> (train, test). Any other
#: name is the path of a dataset file or directory (:func:`data_source`).
DATA_SOURCES: dict[str, Callable[..., tuple[Dataset, Dataset]]] = {
    "paper": _paper_data,
    "digits": _image_data("digits"),
    "mnist": _image_data("mnist"),
}


def data_source(name: str) -> Callable[..., tuple[Dataset, Dataset]]:
    """The loader of a data source: a name in :data:`DATA_SOURCES`, else the path of a
    dataset file (``.npz``) or directory (:func:`margin_solver.core.data.load_dataset`).

    Raises
    ------
    InvalidInputError
        Neither a known name nor an existing path.
    """
    if name in DATA_SOURCES:
        return DATA_SOURCES[name]
    if not os.path.exists(name):
        raise InvalidInputError(
            f"Unknown data source {name!r}: neither one of {sorted(DATA_SOURCES)} nor a dataset "
            "file or directory."
        )
    return _file_data


# -- running the cells of one data point --------------------------------------------------------
@dataclass(frozen=True)
class CellJob:
    """Everything a worker needs for one cell (picklable; the method is resolved in the parent)."""

    cell: Cell
    method: Callable[..., dict[str, Any]]
    config: SweepConfig


@dataclass(frozen=True)
class PointJob:
    """The cells of one data point (same :meth:`Cell.data_key`): one unit of work.

    Its cells share the training and test sets (drawn once from the streams every one of
    them would draw alone) and the theorem checker's measurements of the training set
    (:func:`margin_solver.theory.check.data_evidence`), so a point with k methods draws and
    measures its data once instead of k times; which regime applies at each method's setting
    is decided per cell.
    """

    jobs: tuple[CellJob, ...]


def point_jobs(jobs: Sequence[CellJob]) -> list[PointJob]:
    """Group cell jobs by data point, keeping the order of first appearance."""
    groups: dict[tuple[str, ...], list[CellJob]] = {}
    for job in jobs:
        groups.setdefault(job.cell.data_key(), []).append(job)
    return [PointJob(tuple(group)) for group in groups.values()]


def largest_first(points: Sequence[PointJob]) -> list[PointJob]:
    """The points, those with the most work first (samples x tokens x dimension x heads
    summed over the point's cells; ties keep their order), so that parallel workers do not end on a
    long point while the others idle. Rows do not depend on the order."""

    def size(point: PointJob) -> int:
        cell = point.jobs[0].cell
        return cell.n * cell.T * cell.d * sum(job.cell.heads for job in point.jobs)

    return sorted(points, key=size, reverse=True)


def run_point(point: PointJob) -> list[dict[str, Any]]:
    """Draw the point's data once and run each of its cells on it; one row per cell.

    Each row equals what :func:`run_cell` gives for that cell alone: the data come from the
    same per-cell streams (the train and test streams depend on the data key only), the
    arrays are made read-only so that no method can change what the next one sees, and a
    failure to draw the data fails every cell of the point with the same message.
    """
    # The sweep's parallelism is its workers: a multi-threaded BLAS inside a cell's small
    # products only oversubscribes the cores (a 40 x 4000 Gram product took 0.4 s instead
    # of milliseconds on the loaded 2-core machine, issue 18).
    with single_threaded_blas():
        return _run_point(point)


def _run_point(point: PointJob) -> list[dict[str, Any]]:
    first = point.jobs[0]
    cell, config = first.cell, first.config
    try:
        seeds = cell_seeds(cell, config.sweep_seed)
        train, test = data_source(cell.data)(cell, seeds, config.n_test, dict(config.data_options))
        for data in (train, test):
            if isinstance(data, Dataset):
                data.X.flags.writeable = False
        shared: dict[str, Any] = {
            "n_test": test.n,
            "n_noisy": None if train.flipped is None else int(train.flipped.sum()),
        }
    except Exception as exc:  # a failed cell is a result row, not a crashed sweep
        return [_failed_row(job, exc) for job in point.jobs]
    evidence = functools.cache(lambda: data_evidence(train))  # on first use: not if no check
    return [_method_row(job, train, test, shared, evidence) for job in point.jobs]


def run_cell(job: CellJob) -> dict[str, Any]:
    """Draw the cell's data, run its method and return its row (never raises on solver errors).

    Only the method call is timed (``seconds``, also when it raises; empty when the data
    could not be drawn). An exception inside the data source or the method gives a row with
    ``status="failed"`` and the error in ``message``.
    """
    return run_point(PointJob((job,)))[0]


def _key_row(job: CellJob) -> dict[str, Any]:
    row: dict[str, Any] = {name: getattr(job.cell, name) for name in KEY_FIELDS}
    row["n_test"] = job.config.n_test
    return row


def _failed_row(job: CellJob, exc: Exception, row: dict[str, Any] | None = None) -> dict[str, Any]:
    logger.warning("cell %s failed: %s: %s", job.cell.key(), type(exc).__name__, exc)
    row = _key_row(job) if row is None else row
    row.update(status=FAILED, message=f"{type(exc).__name__}: {exc}")
    return row


def _method_row(
    job: CellJob,
    train: Dataset,
    test: Dataset,
    shared: dict[str, Any],
    evidence: Callable[[], DataEvidence],
) -> dict[str, Any]:
    cell, config = job.cell, job.config
    row = _key_row(job) | shared
    try:
        call = MethodCall(
            cell=cell,
            options=dict(config.method_options.get(cell.method, {})),
            init_seed=cell_seeds(cell, config.sweep_seed).init,
        )
        with warnings.catch_warnings():
            # A method's failure is its row's status and message; a warning per cell on
            # stderr would only repeat them.
            warnings.simplefilter("ignore", ConvergenceWarning)
            start = time.perf_counter()
            try:
                fields = job.method(train, test, call)
            finally:  # a failed call's time is spent too (the throughput benchmark sums it)
                row["seconds"] = time.perf_counter() - start
        if config.check:
            # The prediction for this method at the setting it ran with (issue 20).
            setting = theory_setting(cell.method, fields, call.options)
            report = check_conditions(train, **setting, heads=cell.heads, evidence=evidence())
            row.update(predicted_regime=report.predicted_regime, snr_regime=report.snr_regime)
    except Exception as exc:  # a failed cell is a result row, not a crashed sweep
        return _failed_row(job, exc, row)
    unknown = set(fields) - set(METHOD_FIELDS)
    if unknown:
        raise InvalidInputError(
            f"method {cell.method!r} returned unknown fields {sorted(unknown)}."
        )
    row.update(fields)
    return row


# -- the engine ---------------------------------------------------------------------------------
@dataclass(repr=False)
class SweepResult(ResultMixin):
    """What a call of :func:`run_sweep` did.

    ``status`` is ``"completed"`` when every cell of the grid has a row and none of this run's
    rows failed, else ``"failed"`` (``success`` False).

    Attributes
    ----------
    path : str
        The results CSV.
    n_cells : int
        Cells in the grid.
    n_skipped : int
        Cells already in the file (done by an earlier run).
    n_run : int
        Cells run and appended now.
    n_failed : int
        Of those, rows with ``status="failed"``.
    seconds : float
        Wall-clock time of this call.
    n_retried : int
        Of ``n_run``, cells whose failed row was removed to run them again
        (``retry_failed=True``).
    """

    status: str
    message: str
    path: str
    n_cells: int
    n_skipped: int
    n_run: int
    n_failed: int
    seconds: float
    n_retried: int = 0


def sidecar_path(out: str | os.PathLike) -> Path:
    """The JSON sidecar next to a results CSV (``results/x.csv`` -> ``results/x.json``).

    Raises
    ------
    InvalidInputError
        ``out`` ends in ``.json``: the sidecar would be the results file itself.
    """
    out = Path(out)
    if out.suffix.lower() == ".json":
        raise InvalidInputError(
            f"{out} would be both the results log and its JSON sidecar; give the results a "
            f"name ending in .csv (e.g. {out.with_suffix('.csv')})."
        )
    return out.with_suffix(".json")


@verbose_switch
def run_sweep(
    grids: SweepGrid | Sequence[SweepGrid],
    out: str | os.PathLike,
    config: SweepConfig | None = None,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    retry_failed: bool = False,
) -> SweepResult:
    """Run every cell of ``grids`` not yet in ``out``, appending one row per finished cell.

    Parameters
    ----------
    grids : SweepGrid or sequence of SweepGrid
        The cells to run (their union; duplicates run once).
    out : path-like
        Results CSV (columns :data:`FIELDS`); a JSON sidecar with the config, the package
        version and the history of runs is written next to it (:func:`sidecar_path`).
    config : SweepConfig, optional
        Shared settings; must equal those of an existing ``out`` (else a new file is needed).
    jobs : int, optional
        Local processes: this one and ``jobs - 1`` workers (:func:`local_map`; default: all
        cores; 1 runs in this process alone).
    scheduler : str, optional
        Address of a running Dask distributed scheduler (e.g. ``"tcp://127.0.0.1:8786"``);
        when given, cells run there instead of joblib. Needs ``margin-solver[dask]``.
    progress : bool, default=False
        Show a tqdm progress bar (cells done, rate, time left) on stderr.
    retry_failed : bool, default=False
        Run again the cells of ``grids`` whose row in ``out`` has ``status="failed"``: their
        rows are removed first (:meth:`ResultLog.discard`: the file is replaced atomically,
        every other row kept byte for byte) and the new rows appended.

    Returns
    -------
    SweepResult

    Raises
    ------
    InvalidInputError
        Unknown method or data source, data options that do not give the grid's data (for
        image sources: unknown option, missing file, another token shape), an output
        written with another config or format, or a scheduler address given without dask
        installed. All checked before any cell runs.

    Notes
    -----
    A row with ``status="failed"`` is a result like any other and is not re-run on resume
    unless ``retry_failed`` is set. Extending a grid (new values on an axis) with the same
    output runs only the new cells. Local worker processes end with the sweep: when it
    returns or raises, and within a second when the process running it is killed.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "s.csv"
    >>> grid = SweepGrid(n=[8], d=[40], kappa=[4.0], methods=["uniform-svm"])
    >>> run_sweep(grid, out, SweepConfig(n_test=50), jobs=1).n_run
    1
    """
    started = time.perf_counter()
    config = config or SweepConfig()
    grids = [grids] if isinstance(grids, SweepGrid) else list(grids)
    cells = list({c.key(): c for g in grids for c in g.cells()}.values())
    _check_known(cells, config)
    if scheduler is not None:
        check_scheduler_address(scheduler, reachable=True)
    side = sidecar_path(out)
    history = _check_sidecar(side, config, Path(out).name)
    with ResultLog(out, FIELDS, KEY_FIELDS) as log:
        n_retried = 0
        if retry_failed:
            wanted = {c.key() for c in cells}
            failed = [log.key_of(r) for r in log.rows() if r["status"] == FAILED]
            n_retried = log.discard(k for k in failed if k in wanted)
        todo = [c for c in cells if c.key() not in log.done]
        n_skipped = len(cells) - len(todo)
        run = {
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "grids": [g.to_dict() for g in grids],
            "n_cells": len(cells),
            "n_skipped": n_skipped,
            "n_retried": n_retried,
            "backend": f"dask:{scheduler}" if scheduler else f"joblib:{jobs or 'all'}",
            "repaired_torn_bytes": log.repaired_bytes,
        }
        points = point_jobs([CellJob(c, SWEEP_METHODS[c.method], config) for c in todo])
        if scheduler or jobs != 1:
            points = largest_first(points)
        batches = _dask_rows(points, scheduler) if scheduler else _joblib_rows(points, jobs)
        _write_sidecar(side, config, Path(out).name, history + [run | {"state": "running"}])
        state = "interrupted"
        try:
            with ProgressBar(
                progress, total=len(todo), desc=Path(out).name, unit="cell", smoothing=0.1
            ) as bar:
                for batch in batches:
                    log.extend(batch)  # a point's rows: one write, one fsync
                    bar.update(len(batch))
            state = "complete"
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # stops the workers now, also on an interruption
            # Counted from the file: an interruption can fall between a write and its count.
            todo_keys = {c.key() for c in todo}
            new = [r for r in log.rows() if log.key_of(r) in todo_keys]
            n_run, n_failed = len(new), sum(r["status"] == FAILED for r in new)
            seconds = time.perf_counter() - started
            run.update(state=state, n_run=n_run, n_failed=n_failed, seconds=round(seconds, 3))
            _write_sidecar(side, config, Path(out).name, history + [run])
    message = progress_message("cell", "run", n_run, n_skipped, n_failed)
    if n_retried:
        message += f", {n_retried} of them retried after failing"
    return SweepResult(
        status=COMPLETED if n_failed == 0 else FAILED,
        message=message,
        path=str(out),
        n_cells=len(cells),
        n_skipped=n_skipped,
        n_run=n_run,
        n_failed=n_failed,
        seconds=seconds,
        n_retried=n_retried,
    )


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _is_int_at_least(minimum: int) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= minimum


def _check_axis(values: Sequence[Any], name: str, valid: Callable[[Any], bool], what: str) -> None:
    bad = [x for x in values if not valid(x)]
    if bad:
        raise InvalidInputError(f"{name} must be {what}; got {bad[:5]}.")


def _check_known(cells: Sequence[Cell], config: SweepConfig) -> None:
    """Refuse unknown methods and data sources, and synthetic cells whose distribution (with
    the config's data options) is invalid, before any cell runs or anything is written."""
    checked: set[tuple[Any, ...]] = set()
    for cell in cells:
        if cell.method not in SWEEP_METHODS:
            raise InvalidInputError(
                f"Unknown method {cell.method!r}; available: {sorted(SWEEP_METHODS)}."
            )
        data_source(cell.data)  # raises for an unknown name
        params = (cell.d, cell.T, cell.snr, cell.eta)
        if cell.data == "paper" and params not in checked:
            checked.add(params)
            try:
                PaperDistribution(
                    d=cell.d, T=cell.T, snr=cell.snr, eta=cell.eta, **config.data_options
                )
            except TypeError as exc:  # an option PaperDistribution does not take
                raise InvalidInputError(f"data_options for paper data: {exc}") from None
    _check_image_data(cells, config)


def _check_image_data(cells: Sequence[Cell], config: SweepConfig) -> None:
    """Draw the largest cell of each token shape of an image source once, here, so that bad
    data options (an unknown option, a missing or unreadable file, classes absent from the
    images, a shape other than the grid's, n beyond the pool) stop the sweep before any cell
    runs instead of failing every cell."""
    largest: dict[tuple[str, int, int], Cell] = {}
    for cell in cells:
        if cell.data != "paper":
            group = (cell.data, cell.T, cell.d)
            if group not in largest or cell.n > largest[group].n:
                largest[group] = cell
    for cell in largest.values():
        options = dict(config.data_options)
        try:
            data_source(cell.data)(
                cell, cell_seeds(cell, config.sweep_seed), config.n_test, options
            )
        except TypeError as exc:  # an option the loader does not take
            raise InvalidInputError(f"data options for {cell.data} data: {exc}") from None
        except InvalidInputError as exc:
            if cell.data not in DATA_SOURCES:  # a file: its message names it
                raise
            raise InvalidInputError(f"{cell.data} data with options {options}: {exc}") from None


def _check_sidecar(side: Path, config: SweepConfig, results: str) -> list[dict[str, Any]]:
    """Return the run history of an existing sidecar, after checking it is one (a sweep's,
    for the same config, of the results file named ``results``); refuse anything else,
    which would be overwritten."""
    check_output_path(side)
    if not side.exists():
        return []
    try:
        meta = parse_json(side.read_text(encoding="utf-8"), str(side))
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"Cannot read the sweep sidecar {side}: {exc}") from None
    if not isinstance(meta, dict) or meta.get("package") != "margin-solver" or "config" not in meta:
        raise InvalidInputError(
            f"{side} exists and is not a sweep's JSON sidecar; it would be overwritten. Move it "
            "or choose another --out."
        )
    # logs whose names differ only in suffix (s.csv, s.txt) would share the sidecar s.json;
    # sidecars written before they named their log ("results" missing) are taken as theirs
    if meta.get("results", results) != results:
        raise InvalidInputError(
            f"{side.name} is the sidecar of the results log {meta['results']}, not of {results}; "
            "two logs cannot share it. Give the results a name of its own."
        )
    if meta.get("config") != config.to_dict():
        raise InvalidInputError(
            f"{side.name} records another sweep config ({meta.get('config')}); resuming would mix "
            "results. Use the same settings or a new --out."
        )
    return list(meta.get("runs", []))


def _write_sidecar(
    side: Path, config: SweepConfig, results: str, runs: list[dict[str, Any]]
) -> None:
    write_json(
        side,
        {
            "package": "margin-solver",
            "results": results,
            "version": __version__,
            "python": platform.python_version(),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
            "columns": list(FIELDS),
            "key_columns": list(KEY_FIELDS),
            "config": config.to_dict(),
            "runs": runs,
        },
        kind="sweep sidecar",
    )


def _joblib_rows(points: list[PointJob], n_jobs: int | None) -> Iterator[list[dict[str, Any]]]:
    """Each point's rows, as its process finishes it (this one and ``n_jobs - 1`` workers);
    see :func:`local_map` for the workers (each point runs with one BLAS thread anyway,
    :func:`run_point`)."""
    return local_map(run_point, points, n_jobs)


def local_map(
    func: Callable[[Any], Any], items: Sequence[Any], n_jobs: int | None
) -> Iterator[Any]:
    """``func(item)`` for every item, in the order they finish, on ``n_jobs`` local processes:
    this one and ``n_jobs - 1`` workers (in this process alone when ``n_jobs == 1``; negative
    as joblib's).

    This process works as one of the ``n_jobs``: it runs an item whenever no worker's result
    is waiting, so that the workers' start-up is not idle time for the whole run, and a grid
    of a few seconds gains from ``--jobs 2`` too. A thread of this process hands the workers
    their items: first one call of :func:`_ready` per worker, then, as each returns (a worker
    has started), one item, and another as each item finishes. So no item waits in the queue
    of a worker still starting or busy while this process could run it, and the run does not
    end with this process idle while a worker works through a queue; a worker waits for its
    next item only for the hand-over (about a millisecond, against the tens of milliseconds
    and more of a sweep's data point).

    The workers (:func:`_executor`) are in an executor of the caller's own: closing the
    generator (the sweep and the claim studies do when they end) stops them, killing them
    mid-task when the run did not complete, instead of leaving them to wait minutes for more
    work as joblib's shared executor does; a worker also ends within a second of its parent's
    death (:func:`_exit_with_parent`). Their BLAS and OpenMP pools get ``cores // n_jobs``
    threads (joblib's default).
    """
    n_jobs = n_jobs or -1
    if n_jobs < 0:
        n_jobs = max((os.cpu_count() or 1) + 1 + n_jobs, 1)
    if n_jobs == 1 or len(items) < 2:
        yield from (func(item) for item in items)
        return
    workers = min(n_jobs, len(items)) - 1
    executor = _executor(workers, max((os.cpu_count() or 1) // n_jobs, 1))
    feeder = _Feeder(executor, func, items, workers)
    completed = False
    try:
        while True:
            future = feeder.finished()  # a worker's result first: it is ready
            if future is None:
                item = feeder.take()
                if item is not _NONE:
                    yield func(item)
                    continue
                future = feeder.finished(wait=True)  # nothing left to take: wait for them
                if future is None:
                    break
            yield future.result()
        completed = True
    finally:
        feeder.stop()
        if completed:
            executor.shutdown(wait=True)
        else:
            _kill_workers(executor)
        feeder.join()


#: Local workers are forked from this process (Linux, Python >= 3.11), not started afresh:
#: a fresh interpreter importing numpy, scipy and this package cost 1.2 s of CPU per worker
#: here, as much as the 24 cells of issue 44's grid. Python forks all of an executor's workers
#: at its first submission, before the executor starts its own thread, and
#: :class:`_Feeder` makes that submission before starting its thread, so no thread of ours
#: runs at the fork. OpenBLAS re-creates its threads in a forked child; the results log's
#: locked descriptor is closed there (:mod:`margin_solver.bench.resultlog`). Elsewhere
#: (macOS, where forking after Apple's frameworks loaded is unsafe; Python 3.10, which forks
#: later workers from its own thread) the workers are joblib's loky processes.
_FORK_WORKERS = sys.platform == "linux" and sys.version_info >= (3, 11)


def _executor(workers: int, threads: int) -> Any:
    """A process pool of ``workers`` workers with ``threads`` BLAS / OpenMP threads each, which
    end within a second of this process's death (see :data:`_FORK_WORKERS`)."""
    if _FORK_WORKERS:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_forked_worker,
            initargs=(os.getpid(), threads),
        )
    from joblib.externals.loky import ProcessPoolExecutor as LokyExecutor

    return LokyExecutor(
        max_workers=workers,
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
        env=dict.fromkeys(_THREAD_VARIABLES, str(threads)),
    )


def _forked_worker(parent: int, threads: int) -> None:
    """Initializer of a forked worker: its BLAS / OpenMP threads; Ctrl-C ignored (it reaches
    the whole terminal's process group, and the sweep, which handles it, kills its workers);
    the default SIGTERM; and an end within a second of ``parent``'s."""
    from threadpoolctl import threadpool_limits

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threadpool_limits(limits=threads)
    _exit_with_parent(parent)


#: What :meth:`_Feeder.take` returns when no item is left.
_NONE = object()


def _ready(module: str) -> None:
    """A worker's first call: import the module of the function it will run (its start-up)."""
    importlib.import_module(module)


class _Feeder:
    """The items of :func:`local_map` shared between this process and the workers: a thread
    submits them to the workers as these become free and queues the finished futures."""

    def __init__(self, executor: Any, func: Callable[[Any], Any], items: Sequence[Any], n: int):
        self._executor, self._func = executor, func
        self._items = iter(items)
        self._lock = threading.Lock()
        self._done: queue.Queue[Any] = queue.Queue()
        self._stopped = threading.Event()
        self._ended = False
        # The first submissions, from the calling thread before ours starts (forked workers
        # start at the first one, :data:`_FORK_WORKERS`).
        starting = {executor.submit(_ready, func.__module__): False for _ in range(n)}
        self._thread = threading.Thread(
            target=self._run, args=(starting,), name="margin-solver-feeder", daemon=True
        )
        self._thread.start()

    def take(self) -> Any:
        """The next item not yet taken (:data:`_NONE` when there is none)."""
        with self._lock:
            return next(self._items, _NONE)

    def finished(self, wait: bool = False) -> Any:
        """A finished future of a worker, or None: none yet (``wait`` False), or none will
        come (``wait`` True: every submitted item has finished and none is left to submit)."""
        if self._ended:
            return None
        try:
            future = self._done.get(block=wait)
        except queue.Empty:
            return None
        if future is _NONE:  # the thread's last word
            self._ended = True
            return None
        return future

    def stop(self) -> None:
        """Submit nothing more."""
        self._stopped.set()

    def join(self) -> None:
        """Wait for the thread (it ends within its poll interval once stopped)."""
        self._thread.join()

    def _run(self, running: dict[Any, bool]) -> None:
        """Submit items as workers become free; ``running`` maps each submitted future to
        whether it is an item (not a start-up call)."""
        from concurrent.futures import FIRST_COMPLETED, Future, wait

        try:
            while running and not self._stopped.is_set():
                done, _ = wait(running, timeout=PARENT_POLL_SECONDS, return_when=FIRST_COMPLETED)
                for future in done:
                    # a started worker, or one that finished an item, gets the next item
                    is_item = running.pop(future)
                    if is_item or future.exception() is not None:
                        self._done.put(future)  # a start-up call that raised too: it re-raises
                    if is_item or future.exception() is None:
                        item = self.take()
                        if item is not _NONE and not self._stopped.is_set():
                            running[self._executor.submit(self._func, item)] = True
        except Exception as exc:  # a broken executor: the waiting loop re-raises it
            failed: Future[Any] = Future()
            failed.set_exception(exc)
            self._done.put(failed)
        finally:
            self._done.put(_NONE)


def _kill_workers(executor: Any) -> None:
    """Shut an interrupted run's executor down, killing its workers.

    Forked workers (:data:`_FORK_WORKERS`) are killed first, then the executor shut down: its
    own shutdown waits for running items. Loky's manager thread, which does the killing of
    its workers, can die in that shutdown on a race of its own (InvalidStateError or KeyError
    on a queued item; seen 4 times in 50 SIGTERM'd sweeps under load), print a traceback, and
    leave live workers that the interpreter's exit then joins forever (a hung sweep). So its
    exceptions are logged at debug level here, and any worker still alive after the shutdown
    is killed from this thread.
    """
    processes = list((getattr(executor, "_processes", None) or {}).values())
    if _FORK_WORKERS:  # concurrent.futures' executor (see _executor)
        for process in processes:
            process.kill()
        executor.shutdown(wait=True, cancel_futures=True)
        for process in processes:
            process.join(timeout=5)
        return
    hook = threading.excepthook

    def quiet(args: Any) -> None:
        if args.thread is not None and args.thread.name == "ExecutorManagerThread":
            logger.debug("loky's manager thread ended with %r during a kill", args.exc_value)
        else:
            hook(args)

    threading.excepthook = quiet
    try:
        executor.shutdown(wait=True, kill_workers=True)
    finally:
        threading.excepthook = hook
    for process in list(getattr(executor, "_processes", {}).values()):
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


#: Environment variables sizing the thread pools of BLAS and OpenMP libraries in a worker.
_THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


#: Seconds between a worker's checks that the process that started it is alive.
PARENT_POLL_SECONDS = 0.5


def _exit_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when ``parent`` (the sweep) is gone.

    A sweep killed with SIGKILL runs no cleanup; its workers would otherwise finish their
    cell and then wait for work for minutes. An orphan is adopted by another process, so a
    changed parent pid means the sweep is gone.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="margin-solver-parent-watch", daemon=True).start()


def _dask_rows(points: list[PointJob], address: str) -> Iterator[list[dict[str, Any]]]:
    """Each point's rows, as the Dask workers finish it (see :func:`dask_map`)."""
    return dask_map(run_point, points, address)


def dask_map(func: Callable[[Any], Any], items: Sequence[Any], address: str) -> Iterator[Any]:
    """``func(item)`` for every item on the Dask scheduler at ``address``, in the order they
    finish. Connects first (so a bad address or a missing dask fails before any work), then
    streams; closing the generator cancels what is left and closes the client."""
    client = connect(address, timeout=DASK_CONNECT_TIMEOUT)
    from distributed import as_completed

    def stream() -> Iterator[Any]:
        futures = client.map(func, items, pure=False)
        try:
            for future in as_completed(futures, loop=client.loop):
                yield future.result()
        finally:
            client.cancel(futures)
            client.close()

    return stream()


# -- reading results ------------------------------------------------------------------------------
def load_results(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read a results CSV into rows with numbers as floats (NaN where empty) and text as str.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "s.csv"
    >>> _ = run_sweep(SweepGrid(n=[8], d=[40], kappa=[4.0], methods=["uniform-svm"]), out,
    ...               SweepConfig(n_test=50), jobs=1)
    >>> load_results(out)[0]["method"], load_results(out)[0]["n"]
    ('uniform-svm', 8.0)
    """
    rows = read_rows(path, FIELDS)
    return [
        {
            k: (v if k in TEXT_FIELDS else (float(v) if v != "" else float("nan")))
            for k, v in row.items()
        }
        for row in rows
    ]
