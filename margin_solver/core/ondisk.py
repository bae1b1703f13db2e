"""The on-disk dataset format: tokens in a memory-mapped ``.npy`` beside the small arrays.

A dataset directory holds two files::

    DATA_DIR/X.npy       the tokens, float64, shape (n, T, d), C order (numpy's .npy format)
    DATA_DIR/labels.npz  y (n,) and, when known, clean_y, signal_index and params_json,
                         exactly the other members of a dataset .npz (Dataset.save)

``X.npy`` is opened with ``mmap_mode="r"``: loading reads only its header, and the
out-of-core passes (:mod:`margin_solver.core.ooc`) read it block by block. The single ``.npz`` file
stays the default format; the directory is for tokens larger than memory. Datasets are read
with :meth:`margin_solver.core.data.Dataset.load` (a directory path) and written by
:func:`margin_solver.core.generate.write_paper_dataset` or
:func:`margin_solver.core.generate.save_on_disk`.
"""

from __future__ import annotations

import math
import os
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.core.ooc import check_disk_tokens
from margin_solver.core.validation import InvalidInputError

__all__ = ["LABELS_FILE", "TOKENS_FILE", "TokenDirWriter", "read_on_disk"]

TOKENS_FILE = "X.npy"
LABELS_FILE = "labels.npz"
_LABEL_MEMBERS = ("y", "clean_y", "signal_index", "params_json", "classes")


def read_on_disk(path: str | os.PathLike) -> dict[str, Any]:
    """The arrays of a dataset directory: ``X`` memory-mapped read-only, the rest in memory.

    Returns
    -------
    dict
        ``X`` (numpy.memmap), ``y`` and those of ``clean_y``, ``signal_index``,
        ``params_json`` the directory has (raw arrays, validated by the caller).

    Raises
    ------
    InvalidInputError
        A file is missing or is not the ``.npy`` / ``.npz`` it should be; X is not float64
        (n, T, d); ``labels.npz`` lacks ``y``.
    """
    path = Path(path)
    tokens, labels = path / TOKENS_FILE, path / LABELS_FILE
    for file in (tokens, labels):
        if not file.is_file():
            raise InvalidInputError(
                f"{path.name}/ is not a dataset directory: it lacks {file.name} (a dataset "
                f"directory holds {TOKENS_FILE} and {LABELS_FILE})."
            )
    try:
        _check_npy_header(tokens)
        X = np.load(tokens, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InvalidInputError(
            f"Cannot read {path.name}/{TOKENS_FILE} as a .npy array: {exc}"
        ) from None
    if not isinstance(X, np.memmap):
        raise InvalidInputError(f"{path.name}/{TOKENS_FILE} is not a plain .npy array.")
    try:
        check_disk_tokens(X, f"{path.name}/{TOKENS_FILE}")
        if not X.flags.c_contiguous:
            raise InvalidInputError(
                f"{path.name}/{TOKENS_FILE} must be in C order, not Fortran order."
            )
        archive = np.load(labels, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise InvalidInputError(
                f"{path.name}/{LABELS_FILE} is a single .npy array, not an .npz archive of y "
                "and the other labels."
            )
        with archive as npz:
            if "y" not in npz.files:
                raise InvalidInputError(f"{path.name}/{LABELS_FILE} lacks the array 'y'.")
            arrays = {key: npz[key] for key in _LABEL_MEMBERS if key in npz.files}
    except InvalidInputError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, zlib.error) as exc:
        raise InvalidInputError(
            f"Cannot read {path.name}/{LABELS_FILE} as an .npz archive: {exc}"
        ) from None
    return {"X": X, **arrays}


def _check_npy_header(tokens: Path) -> None:
    """Refuse a ``.npy`` header whose shape is not of positive sizes or whose data would
    not fit in the file, before numpy maps it (a negative size raised OverflowError).

    Raises
    ------
    ValueError
        The header is malformed, names a negative or zero size, or more bytes than the file
        holds (a truncated or doctored file).
    """
    with open(tokens, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(fh, max_header_size=10_000)
        offset = fh.tell()
    if any(not isinstance(size, int) or size < 1 for size in shape):
        raise ValueError(f"its header declares the shape {shape}; every size must be positive")
    needed = math.prod(shape) * dtype.itemsize
    have = tokens.stat().st_size - offset
    if needed > have:
        raise ValueError(
            f"its header declares {needed} bytes of data ({shape} of {dtype}) but the file "
            f"holds {have} (a truncated or damaged file)"
        )


class TokenDirWriter:
    """Write a new dataset directory: tokens streamed in blocks of samples, then the labels.

    Everything goes to a hidden temporary directory beside ``path``, renamed to ``path`` by
    :meth:`finish`; an error or interruption removes it, so ``path`` either does not exist
    or is complete. An existing ``path`` is never touched.

    Parameters
    ----------
    path : path-like
        The directory to create.
    shape : tuple of int
        ``(n, T, d)`` of the tokens.

    Raises
    ------
    InvalidInputError
        ``path`` already exists.
    """

    def __init__(self, path: str | os.PathLike, shape: tuple[int, int, int]):
        self.path = Path(path)
        if self.path.exists():
            raise InvalidInputError(f"{str(self.path)!r} already exists; choose a new directory.")
        self.shape = tuple(int(k) for k in shape)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.parent / f".{self.path.name}.{os.getpid()}.tmp"
        self._tmp.mkdir()
        self._rows = 0
        self._fh = open(self._tmp / TOKENS_FILE, "wb")  # noqa: SIM115 -- closed by __exit__
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(np.float64)),
            "fortran_order": False,
            "shape": self.shape,
        }
        np.lib.format.write_array_header_2_0(self._fh, header)

    def __enter__(self) -> TokenDirWriter:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if not self._fh.closed:
            self._fh.close()
        if self._tmp.exists():  # not finished: leave no partial dataset behind
            shutil.rmtree(self._tmp, ignore_errors=True)

    def write_rows(self, block: np.ndarray) -> None:
        """Append the tokens of the next samples, shape (k, T, d)."""
        block = np.ascontiguousarray(block, dtype=np.float64)
        if block.shape[1:] != self.shape[1:] or self._rows + block.shape[0] > self.shape[0]:
            raise InvalidInputError(
                f"Token block of shape {block.shape} does not continue an array of shape "
                f"{self.shape} after {self._rows} samples."
            )
        self._fh.write(memoryview(block).cast("B"))
        self._rows += block.shape[0]

    def finish(self, labels: dict[str, np.ndarray]) -> Path:
        """Write ``labels.npz`` (``y`` and optional members), flush, and move into place."""
        if self._rows != self.shape[0]:
            raise InvalidInputError(f"Wrote {self._rows} of {self.shape[0]} samples' tokens.")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        with open(self._tmp / LABELS_FILE, "wb") as fh:
            np.savez(fh, **labels)
            fh.flush()
            os.fsync(fh.fileno())
        if self.path.exists():
            raise InvalidInputError(f"{str(self.path)!r} appeared while writing; left untouched.")
        os.rename(self._tmp, self.path)
        return self.path
