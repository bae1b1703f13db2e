"""Run the claim studies' tasks in parallel into a resumable CSV (joblib or Dask).

The claim studies (:mod:`margin_solver.bench.claim_studies`) measure quantities the sweep
engine's fixed columns (:data:`margin_solver.bench.sweeps.METHOD_FIELDS`) do not hold (cosines
with P_R along a weight-decay path, the top noise token's attention share, trajectories), so
each has its own columns. Everything else is the sweep engine's: a task names a grid cell
(:class:`margin_solver.bench.sweeps.Cell`), whose data come from the same seed streams
(:func:`~margin_solver.bench.sweeps.cell_seeds`) and data sources, so a claim's cell sees the
samples a sweep's cell of the same key sees; rows go to a
:class:`~margin_solver.bench.resultlog.ResultLog` in the parent process; workers only compute.

A task returns all its rows at once and they are appended together, so a task counts as done
when the file has a row whose task columns equal its own; a re-run skips it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin_solver.bench.resultlog import ResultLog, canonical, progress_message
from margin_solver.bench.sweeps import (
    DATA_SOURCES,
    Cell,
    cell_seeds,
    check_scheduler_address,
    dask_map,
    local_map,
)
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import Dataset, ProjectedSamples
from margin_solver.core.progress import ProgressBar
from margin_solver.core.results import ConvergenceWarning


@dataclass(frozen=True)
class ClaimTask:
    """One unit of work: a cell's data and a function of it.

    Attributes
    ----------
    key : dict
        The task's columns (written into each of its rows; identify it on resume).
    cell : Cell
        The grid cell whose training / test data the task uses.
    n_test : int
    sweep_seed : int
    work : callable
        ``work(train, test, init_seed, **options) -> list of row dicts`` (module-level, so
        it pickles for joblib and Dask).
    options : dict
    """

    key: dict[str, Any]
    cell: Cell
    n_test: int
    sweep_seed: int
    work: Callable[..., list[dict[str, Any]]]
    options: dict[str, Any]


def data_of(task: ClaimTask) -> tuple[Dataset, Dataset, Any]:
    """Training set, test set and initialisation seed of a task's cell (sweep streams)."""
    seeds = cell_seeds(task.cell, task.sweep_seed)
    train, test = DATA_SOURCES[task.cell.data](task.cell, seeds, task.n_test, {})
    if isinstance(test, ProjectedSamples):  # the claims follow GD's test error step by step
        test = test.sample()
    return train, test, seeds.init


def run_task(task: ClaimTask) -> list[dict[str, Any]]:
    """The task's rows, each with the task's key columns (single-threaded BLAS, as a sweep)."""
    with single_threaded_blas(), warnings.catch_warnings():
        # every claim's rows carry their methods' statuses (as a sweep's rows do); a
        # ConvergenceWarning per task on stderr would only repeat them
        warnings.simplefilter("ignore", ConvergenceWarning)
        train, test, init = data_of(task)
        rows = task.work(train, test, init, **task.options)
    return [{**task.key, **row} for row in rows]


def run_claim_tasks(
    tasks: Sequence[ClaimTask],
    out: str | os.PathLike,
    fields: Sequence[str],
    key_fields: Sequence[str],
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> str:
    """Run the tasks not yet in ``out``; append their rows; return a one-line summary.

    Parameters
    ----------
    tasks : sequence of ClaimTask
    out : path-like
        The CSV (a :class:`~margin_solver.bench.resultlog.ResultLog` with ``fields``).
    fields, key_fields : sequence of str
        Columns and row-key columns; each task's ``key`` columns come first in ``key_fields``.
    jobs : int, optional
        Local processes: this one and ``jobs - 1`` workers
        (:func:`~margin_solver.bench.sweeps.local_map`; default: all cores; 1 runs in this
        process alone).
    scheduler : str, optional
        A Dask scheduler address; tasks run there instead.
    progress : bool, default=False

    Returns
    -------
    str
    """
    if scheduler is not None:
        check_scheduler_address(scheduler, reachable=True)
    with ResultLog(out, fields, key_fields) as log:
        done = {key[: len(tasks[0].key)] for key in log.done} if tasks else set()
        todo = [t for t in tasks if tuple(canonical(v) for v in t.key.values()) not in done]
        # the sweep's own executor locally: its workers end with the study (joblib's shared
        # one kept them running after a killed `margin-solver bench`)
        rows = dask_map(run_task, todo, scheduler) if scheduler else local_map(run_task, todo, jobs)
        n_rows = 0
        # closing the generator stops the workers at once when the loop ends early
        with (
            closing(rows),
            ProgressBar(progress, total=len(todo), desc=Path(out).name, unit="task") as bar,
        ):
            for batch in rows:
                for row in batch:
                    log.append(row)
                n_rows += len(batch)
                bar.update(1)
    return progress_message("task", "run", len(todo), len(tasks) - len(todo)) + f" ({n_rows} rows)"


def pick(size: str, tiny: Any, quick: Any, full: Any) -> Any:
    """The value of a study parameter at ``size`` ("tiny", "quick" or "full")."""
    return {"tiny": tiny, "quick": quick, "full": full}[size]


def read_claim_rows(
    csv: str | os.PathLike, fields: Sequence[str], text: Sequence[str]
) -> list[dict[str, Any]]:
    """Rows of a claim CSV: the ``text`` columns as str, the others as float (NaN if empty)."""
    from margin_solver.bench.resultlog import read_rows

    return [
        {k: (v if k in text else float(v) if v != "" else float("nan")) for k, v in r.items()}
        for r in read_rows(csv, fields)
    ]


def run_and_plot(
    tasks: Sequence[ClaimTask],
    csv: Path,
    png: Path,
    columns: tuple[Sequence[str], Sequence[str], Sequence[str]],
    plot: Callable[[Path, Path], Path],
    **backend: Any,
) -> tuple[str, list[dict[str, Any]]]:
    """Run (or resume) a claim study's tasks, draw its figure from the CSV, return the run's
    summary and the CSV's rows. ``columns`` is (fields, key fields, text fields); ``backend``
    passes ``jobs``, ``scheduler`` and ``progress`` to :func:`run_claim_tasks`."""
    fields, key_fields, text = columns
    message = run_claim_tasks(tasks, csv, fields, key_fields, **backend)
    plot(csv, png)
    return message, read_claim_rows(csv, fields, text)
