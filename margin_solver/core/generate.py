"""Datasets written straight to disk in blocks: the paper's model, or an existing Dataset.

:func:`write_paper_dataset` draws the same samples as
:meth:`margin_solver.core.data.PaperDistribution.sample` with the same seed, bit for bit: labels,
flips and signal positions come from their own streams, and the noise is drawn from its stream
in consecutive blocks of samples, which numpy's ``Generator.standard_normal`` splits without
changing a value. Memory stays at one block of samples whatever ``n`` and ``d`` are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from margin_solver.core.data import Dataset, PaperDistribution, SeedLike, _json_default
from margin_solver.core.ondisk import TokenDirWriter
from margin_solver.core.ooc import DEFAULT_BLOCK_BYTES
from margin_solver.core.progress import verbose_switch
from margin_solver.core.validation import InvalidInputError, check_int

__all__ = ["save_on_disk", "write_paper_dataset"]


@verbose_switch
def write_paper_dataset(
    path: str | os.PathLike,
    dist: PaperDistribution,
    n: int,
    seed: SeedLike = None,
    *,
    block: int | None = None,
) -> Path:
    """Draw ``n`` samples of ``dist`` into a new dataset directory, a block of samples at a time.

    Parameters
    ----------
    path : path-like
        Directory to create (:mod:`margin_solver.core.ondisk` format); must not exist.
    dist : PaperDistribution
    n : int
        Number of samples.
    seed : int or numpy.random.SeedSequence, optional
        As for :meth:`PaperDistribution.sample`, which gives the same tokens and labels.
    block : int, optional
        Samples per block; default: as many as fit in
        :data:`margin_solver.core.ooc.DEFAULT_BLOCK_BYTES`.

    Returns
    -------
    Path
        The directory written; ``Dataset.load(path)`` reads it back with ``X`` memory-mapped.

    Raises
    ------
    InvalidInputError
        ``path`` exists, or bad ``n`` / ``block`` / ``seed``.

    Examples
    --------
    >>> import tempfile
    >>> dist = PaperDistribution(d=500, T=2, snr=0.5, eta=0.1)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_paper_dataset(f"{tmp}/train", dist, 30, seed=7, block=4)
    ...     on_disk = Dataset.load(path)
    ...     bool(np.array_equal(on_disk.X, dist.sample(30, seed=7).X))
    True
    """
    if not isinstance(dist, PaperDistribution):
        raise InvalidInputError(f"dist must be a PaperDistribution, got {type(dist).__name__}.")
    check_int(n, "n", 1)
    row_bytes = dist.T * dist.d * np.dtype(np.float64).itemsize
    block = (
        max(1, DEFAULT_BLOCK_BYTES // row_bytes) if block is None else check_int(block, "block", 1)
    )
    draw = dist.draw_labels(n, seed)
    with TokenDirWriter(path, (n, dist.T, dist.d)) as writer:
        for lo in range(0, n, block):
            rows = slice(lo, min(lo + block, n))
            writer.write_rows(
                dist.tokens(draw.noise_rng, draw.clean_y[rows], draw.signal_index[rows])
            )
        return writer.finish(_labels(draw.y, draw.clean_y, draw.signal_index, draw.params))


@verbose_switch
def save_on_disk(data: Dataset, path: str | os.PathLike, *, block: int | None = None) -> Path:
    """Write ``data`` as a dataset directory (tokens in ``X.npy``), ``block`` samples at a time.

    Raises
    ------
    InvalidInputError
        ``path`` exists, or ``data`` is not a Dataset.
    """
    if not isinstance(data, Dataset):
        raise InvalidInputError(f"data must be a Dataset, got {type(data).__name__}.")
    row_bytes = data.T * data.d * np.dtype(np.float64).itemsize
    block = (
        max(1, DEFAULT_BLOCK_BYTES // row_bytes) if block is None else check_int(block, "block", 1)
    )
    with TokenDirWriter(path, data.X.shape) as writer:
        for lo in range(0, data.n, block):
            writer.write_rows(data.X[lo : lo + block])
        clean = None if data.clean_y is None else data.decode(data.clean_y)
        labels = _labels(data.labels, clean, data.signal_index, data.params)
        labels["classes"] = data.classes  # the user's labels and their sign order
        return writer.finish(labels)


def _labels(y, clean_y, signal_index, params) -> dict[str, np.ndarray]:
    labels = {"y": np.asarray(y)}
    if clean_y is not None:
        labels["clean_y"] = np.asarray(clean_y)
    if signal_index is not None:
        labels["signal_index"] = np.asarray(signal_index)
    try:
        labels["params_json"] = np.array(json.dumps(params, default=_json_default))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"Cannot save params as JSON: {exc}") from None
    return labels
