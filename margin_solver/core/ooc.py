"""Out-of-core passes over token arrays that need not fit in memory.

In the kernel form (docs/theory.md, "Token-Gram (kernel) form") everything after the token
Gram product works in ``n T`` dimensions, so the only steps that touch all of ``X`` (n, T, d)
are three linear passes: the Gram product ``H = X X^T``, dense vectors ``X^T coef`` from token
coefficients (the final ``v`` and ``p``) and projections ``X w`` (scores and token values for
evaluation). This module runs them in blocks, over ``d`` for the first two and over samples for
the third, with memory bounded by about two blocks of ``block_bytes`` plus the (nT, nT) Gram
matrix on one machine; or on a Dask distributed cluster through :mod:`dask.array` inside
:func:`execution` with a scheduler address (the way the sweep engine connects:
``distributed.Client(address)``), with the same answers; there the Gram pass's worker memory
is not yet bounded by a few chunks (the ``out_of_core`` benchmark).

Tokens on disk are a read-only :class:`numpy.memmap` (see :mod:`margin_solver.core.ondisk`): the
passes read each block from its file with plain reads into a fresh array, so the resident
memory stays at one block, not the file's size. Values are checked as they stream past: a NaN or inf
raises :class:`~margin_solver.core.validation.InvalidInputError`, and :func:`token_gram` returns
the largest ``|entry|`` so callers apply the magnitude check without another pass.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import mmap
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from margin_solver.core.guard import Guard, Progress
from margin_solver.core.validation import InvalidInputError, check_memory

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "DiskTokens",
    "block_bytes",
    "check_disk_tokens",
    "check_scheduler_address",
    "connect",
    "execution",
    "is_on_disk",
    "materialize",
    "project",
    "sample_blocks",
    "token_gram",
]

#: Bytes of tokens held in memory at once by a local pass, and per Dask chunk.
DEFAULT_BLOCK_BYTES = 256 * 2**20
#: Seconds to wait for a Dask scheduler to answer (as the sweep engine does).
DASK_CONNECT_TIMEOUT = 10
#: Seconds a scheduler's port has to accept one connection before dask's client tries; a
#: refused connection (nothing listening) fails at once, a silent host after this long.
PROBE_SECONDS = 3

_ITEM = np.dtype(np.float64).itemsize

logger = logging.getLogger("margin_solver")


@dataclass(frozen=True)
class _Execution:
    client: Any = None
    block_bytes: int = DEFAULT_BLOCK_BYTES


_EXECUTION: contextvars.ContextVar[_Execution] = contextvars.ContextVar(
    "margin_solver_ooc_execution",
    default=_Execution(),  # noqa: B039 -- frozen dataclass, immutable
)


@contextlib.contextmanager
def execution(scheduler: Any = None, block_bytes: int | None = None) -> Iterator[None]:
    """Run the out-of-core passes of the enclosed code in blocks of ``block_bytes``, on Dask
    when ``scheduler`` is given.

    Parameters
    ----------
    scheduler : str or distributed.Client, optional
        Address of a running Dask distributed scheduler (e.g. ``"tcp://127.0.0.1:8786"``),
        connected to for the duration of the block and closed after it, or a connected
        ``distributed.Client`` (left open). The workers must be able to read the token file
        at the same path (one machine or a shared filesystem).
    block_bytes : int, optional
        Bytes of tokens per block (local) or per chunk (Dask); default
        :data:`DEFAULT_BLOCK_BYTES`.

    Raises
    ------
    InvalidInputError
        dask.distributed is not installed, the scheduler cannot be reached, or
        ``block_bytes`` is not a positive integer.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> from margin_solver.core.kernel import TokenGram
    >>> X = PaperDistribution(d=300, snr=1.0).sample(4, seed=0).X
    >>> with execution(block_bytes=8 * 8 * 50):  # blocks of 50 columns
    ...     H = token_gram(X)[0]
    >>> bool(np.allclose(H, TokenGram(X).H, rtol=1e-13))
    True
    """
    current = _EXECUTION.get()
    if block_bytes is not None and (
        isinstance(block_bytes, bool)
        or not isinstance(block_bytes, (int, np.integer))
        or block_bytes < 1
    ):
        raise InvalidInputError(f"block_bytes must be a positive integer, got {block_bytes!r}.")
    with contextlib.ExitStack() as stack:
        client = current.client
        if scheduler is not None:
            client = connect(scheduler) if isinstance(scheduler, str) else scheduler
            if isinstance(scheduler, str):
                stack.callback(client.close)
        token = _EXECUTION.set(_Execution(client, int(block_bytes or current.block_bytes)))
        stack.callback(_EXECUTION.reset, token)
        yield


def connect(address: str, timeout: float | str = DASK_CONNECT_TIMEOUT) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or a one-line
    :class:`InvalidInputError` when dask.distributed is missing, the address is malformed or
    the scheduler is unreachable.

    A ``tcp://`` address is first probed with one socket connection of at most
    :data:`PROBE_SECONDS`: where nothing listens the connection is refused at once, and the
    error comes within seconds instead of after dask's ``timeout`` of retries (20-40 s).
    """
    try:
        from distributed import Client
    except ImportError:
        raise InvalidInputError(
            "Running on a Dask scheduler needs dask.distributed: pip install 'margin-solver[dask]'."
        ) from None
    check_scheduler_address(address, reachable=True)
    try:
        return Client(address, set_as_default=False, timeout=timeout)
    except OSError as exc:
        raise InvalidInputError(f"Cannot reach the Dask scheduler at {address!r}: {exc}") from None


def _probe(address: str) -> None:
    """Refuse a ``tcp://`` address where no server accepts a connection."""
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(str(address), strict=False)
    if scheme != "tcp":
        return
    host, port = parse_host_port(location)
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise InvalidInputError(
            f"Cannot reach the Dask scheduler at {address!r}: no server accepts connections at "
            f"{host}:{port} ({why}); start one (dask scheduler) or check the address."
        ) from None


def check_scheduler_address(address: str, reachable: bool = False) -> str:
    """Return ``address`` when it parses as a Dask scheduler address; refuse it otherwise.

    Checked before connecting: dask's client raises a bare ``ValueError`` on a malformed
    address (unknown scheme, missing or non-numeric port) from inside its event loop. When
    dask is not installed the check is left to the connection, which says how to install it.
    With ``reachable``, a ``tcp://`` address must also accept one socket connection within
    :data:`PROBE_SECONDS` (callers check before they create any file).

    Raises
    ------
    InvalidInputError
        ``address`` is not ``[scheme://]host:port`` with a scheme dask knows, or (with
        ``reachable``) nothing accepts connections there.
    """
    try:
        from distributed.comm.addressing import parse_address, parse_host_port
        from distributed.comm.registry import get_backend
    except ImportError:
        return address
    try:
        scheme, location = parse_address(str(address), strict=False)
        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            _, port = parse_host_port(location)
            if not 0 < int(port) < 65536:
                raise ValueError(f"port {port} is outside 1-65535")
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"{address!r} is not a Dask scheduler address ({exc}); expected e.g. "
            "tcp://127.0.0.1:8786."
        ) from None
    if reachable:
        _probe(address)
    return address


# -- tokens on disk -----------------------------------------------------------------------------
def is_on_disk(X: Any) -> bool:
    """Whether ``X`` is a memory-mapped token array (read in blocks, never as a whole)."""
    return isinstance(X, np.memmap)


def check_disk_tokens(X: np.memmap, name: str = "X") -> np.memmap:
    """Shape and dtype checks of memory-mapped tokens; values are checked as passes read them.

    Raises
    ------
    InvalidInputError
        Not float64, not of shape (n, T, d) with every axis non-empty.
    """
    if X.dtype != np.float64:
        raise InvalidInputError(f"{name} on disk must be float64, got {X.dtype}.")
    if X.ndim != 3 or min(X.shape) < 1:
        raise InvalidInputError(
            f"Expected {name} on disk of shape (n_samples, n_tokens, n_features), got {X.shape}."
        )
    return X


@dataclass(frozen=True)
class DiskTokens:
    """Where a C-ordered float64 token array lies in a file; picklable for Dask workers.

    Attributes
    ----------
    filename : str
    offset : int
        Byte position of the first entry.
    shape : tuple of int
        ``(n, T, d)``.
    """

    filename: str
    offset: int
    shape: tuple[int, int, int]

    @classmethod
    def of(cls, X: np.memmap) -> DiskTokens | None:
        """The file region behind a C-contiguous memmap (a view included), else None."""
        raw = getattr(X, "_mmap", None)
        if X.filename is None or raw is None or not X.flags.c_contiguous:
            return None
        # numpy maps from the offset rounded down to the allocation granularity
        start = X.offset - X.offset % mmap.ALLOCATIONGRANULARITY
        base = np.frombuffer(raw, dtype=np.uint8).ctypes.data
        return cls(os.fspath(X.filename), start + X.ctypes.data - base, tuple(X.shape))

    def read(self, rows: slice, cols: slice) -> np.ndarray:
        """Copy ``X[rows, :, cols]`` into memory with plain file reads.

        Reads, not a memory map: a mapped page counts in the process's resident memory while
        the mapping lives, and the kernel may map whole large folios around each fault, so
        strided reads through a map grow far beyond the block.
        """
        n, T, d = self.shape
        r0, r1, _ = rows.indices(n)
        c0, c1, _ = cols.indices(d)
        out = np.empty((r1 - r0, T, c1 - c0))
        with open(self.filename, "rb", buffering=0) as fh:
            if c0 == 0 and c1 == d:  # whole samples: one contiguous read
                _read_into(fh, self.offset + r0 * T * d * _ITEM, out)
            else:
                for k, row in enumerate(out.reshape(-1, c1 - c0)):
                    _read_into(fh, self.offset + ((r0 * T + k) * d + c0) * _ITEM, row)
        return out


def _read_into(fh: Any, position: int, buffer: np.ndarray) -> None:
    view = memoryview(buffer).cast("B")
    fh.seek(position)
    done = 0
    while done < len(view):
        got = fh.readinto(view[done:])
        if not got:
            raise InvalidInputError(
                f"{fh.name} ends before the data its .npy header declares (truncated file)."
            )
        done += got


def _reader(X: np.ndarray) -> Any:
    source = DiskTokens.of(X) if is_on_disk(X) else None
    if source is not None:
        return source.read
    return lambda rows, cols: np.asarray(X[rows, :, cols], dtype=np.float64)


def _spans(total: int, step: int) -> list[slice]:
    return [slice(lo, min(lo + step, total)) for lo in range(0, total, step)]


def _checked_peak(block: np.ndarray, where: str) -> float:
    """Largest ``|entry|`` of a block; raises on NaN or inf."""
    if not block.size:
        return 0.0
    peak = max(float(np.max(block)), -float(np.min(block)))
    if not np.isfinite(peak):
        raise InvalidInputError(f"X contains NaN or infinite values ({where}).")
    return peak


# -- the three passes ---------------------------------------------------------------------------
def token_gram(X: np.ndarray, guard: Guard | None = None) -> tuple[np.ndarray, float]:
    """Token Gram matrix ``H = X X^T`` (nT, nT) in blocks of columns, and ``max |X|``.

    Parameters
    ----------
    X : ndarray or numpy.memmap of shape (n, T, d), float64
    guard : Guard, optional
        The caller's time limit, checked between blocks (locally); raises
        :class:`~margin_solver.core.guard.TimeLimitReached` once it has passed.

    Returns
    -------
    H : ndarray of shape (n T, n T)
        Bitwise equal to the in-memory product when one block holds all of X; else equal up
        to the rounding of a different summation order over d.
    peak : float
        The largest ``|entry|`` of X.

    Raises
    ------
    InvalidInputError
        X holds NaN or inf; H does not fit in memory.
    """
    n, T, d = X.shape
    m = n * T
    check_memory(
        2 * m * m * _ITEM,
        f"the token Gram matrix of {n} x {T} tokens",
        "no out-of-core way stores it: use fewer samples",
    )
    settings = _EXECUTION.get()
    step = max(1, settings.block_bytes // (m * _ITEM))
    with _timed("token Gram product", X, "columns", step):
        if settings.client is not None:
            return _dask_gram(X, step, settings.client)
        guard = Guard() if guard is None else guard
        read = _reader(X)
        H = np.zeros((m, m))
        peak = 0.0
        spans = _spans(d, step)
        progress = Progress("token Gram product", len(spans), "blocks of columns")
        for k, cols in enumerate(spans):
            guard.check(f"the token Gram product ({k} of {len(spans)} blocks of columns done)")
            start = guard.clock()
            block = read(slice(None), cols).reshape(m, -1)
            peak = max(peak, _checked_peak(block, f"columns {cols.start}..{cols.stop - 1}"))
            if cols.start == 0 and cols.stop == d:
                return block @ block.T, peak  # the in-memory product, bitwise
            H += block @ block.T
            guard.measured(m * m * block.shape[1], guard.clock() - start)
            progress.update(k + 1)
        return H, peak


def check_finite(X: np.ndarray) -> float:
    """Read X in blocks of samples and return ``max |X|``; refuse NaN or inf.

    For passes that do not read every token through :func:`token_gram` (the theorem
    checker's estimates): tokens on disk are checked as they are read, in blocks of
    :func:`execution`'s ``block_bytes``, never as a whole.

    Raises
    ------
    InvalidInputError
        X holds NaN or inf (naming the samples of the block).
    """
    n, T, d = X.shape
    step = max(1, _EXECUTION.get().block_bytes // (T * d * _ITEM))
    peak = 0.0
    for rows in _spans(n, step):
        block = np.asarray(X[rows], dtype=np.float64)
        peak = max(peak, _checked_peak(block, f"samples {rows.start}..{rows.stop - 1}"))
    return peak


def block_bytes() -> int:
    """Bytes of tokens per block of the enclosing :func:`execution` (or the default)."""
    return _EXECUTION.get().block_bytes


def sample_blocks(X: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
    """``(rows, X[rows])`` over blocks of whole samples of :func:`execution`'s ``block_bytes``,
    each read into a fresh array and checked for NaN and inf as it is read; an array in
    memory is one block, itself (no copy).

    Raises
    ------
    InvalidInputError
        X on disk holds NaN or inf (naming the samples of the block).
    """
    n, T, d = X.shape
    if not is_on_disk(X):
        yield slice(0, n), X
        return
    read = _reader(X)
    for rows in _spans(n, max(1, _EXECUTION.get().block_bytes // (T * d * _ITEM))):
        block = read(rows, slice(None))
        _checked_peak(block, f"samples {rows.start}..{rows.stop - 1}")
        yield rows, block


def materialize(X: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """Dense vectors ``X^T coef`` in blocks of columns: shape (d,) for ``coef`` (n, T), (k, d)
    for ``coef`` (k, n, T). Column by column the same products as in memory."""
    n, T, d = X.shape
    flat = np.asarray(coef, dtype=np.float64).reshape(-1, n, T)
    check_memory(
        flat.shape[0] * d * _ITEM,
        f"{flat.shape[0]} dense vector(s) of length {d}",
        "no out-of-core way stores them",
    )
    settings = _EXECUTION.get()
    step = max(1, settings.block_bytes // (n * T * _ITEM))
    with _timed("X^T coef", X, "columns", step):
        if settings.client is not None:
            out = _dask_materialize(X, flat, step, settings.client)
        else:
            read = _reader(X)
            out = np.empty((flat.shape[0], d))
            for cols in _spans(d, step):
                out[:, cols] = np.tensordot(flat, read(slice(None), cols), axes=2)
    return out.reshape(np.shape(coef)[:-2] + (d,))


def project(X: np.ndarray, vectors: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``X @ w`` (n, T) for each vector ``w`` (d,), in one pass over blocks of samples.

    Each sample's products are the in-memory ``X @ w`` of that sample.

    Raises
    ------
    InvalidInputError
        X holds NaN or inf.
    """
    n, T, d = X.shape
    settings = _EXECUTION.get()
    step = max(1, settings.block_bytes // (T * d * _ITEM))
    with _timed("X w", X, "samples", step):
        if settings.client is not None:
            return _dask_project(X, vectors, step, settings.client)
        read = _reader(X)
        out = [np.empty((n, T)) for _ in vectors]
        for rows in _spans(n, step):
            block = read(rows, slice(None))
            _checked_peak(block, f"samples {rows.start}..{rows.stop - 1}")
            for result, w in zip(out, vectors):
                result[rows] = block @ w
        return out


@contextlib.contextmanager
def _timed(what: str, X: np.ndarray, axis: str, step: int) -> Iterator[None]:
    """Log the pass and its wall-clock time (level INFO, logger ``margin_solver``)."""
    where = "dask" if _EXECUTION.get().client is not None else "local"
    start = time.perf_counter()
    yield
    logger.info(
        "ooc pass %s over X %s in blocks of %d %s (%s): %.3f s",
        what,
        X.shape,
        step,
        axis,
        where,
        time.perf_counter() - start,
    )


# -- the same on a Dask cluster -----------------------------------------------------------------
def _dask_tokens(X: np.ndarray, chunks: tuple[int, int, int]) -> Any:
    """X as a dask array whose chunks the workers read from the file themselves."""
    import dask
    import dask.array as da

    source = DiskTokens.of(X) if is_on_disk(X) else None
    if source is None:  # an in-memory array travels to the workers chunk by chunk
        return da.from_array(np.asarray(X), chunks=chunks)
    n, T, d = X.shape
    read = dask.delayed(source.read, pure=True)
    rows_list, cols_list = _spans(n, chunks[0]), _spans(d, chunks[2])
    return da.block(
        [
            [
                [
                    da.from_delayed(
                        read(rows, cols),
                        (rows.stop - rows.start, T, cols.stop - cols.start),
                        dtype=np.float64,
                    )
                    for cols in cols_list
                ]
            ]
            for rows in rows_list
        ]
    )


def _dask_gram(X: np.ndarray, step: int, client: Any) -> tuple[np.ndarray, float]:
    n, T, d = X.shape
    m = n * T
    tokens = _dask_tokens(X, (n, T, step))
    # One task per chunk makes its (m, m) product and extremes, so each chunk of tokens has a
    # single consumer and is freed at once (see _dask_project).
    parts = tokens.map_blocks(
        _gram_part, chunks=((m,), (m + 2,), (1,) * tokens.numblocks[2]), dtype=np.float64
    )
    H, extremes = client.compute(
        [parts[:, :m, :].sum(axis=2), parts[0, m:, :].max(axis=1)], sync=True
    )
    return H, _checked_extremes(extremes[0], extremes[1])


def _gram_part(block: np.ndarray) -> np.ndarray:
    """``B B^T`` of one chunk with ``max B`` and ``-min B`` in row 0 of two extra columns;
    shape (m, m + 2, 1)."""
    flat = block.reshape(-1, block.shape[-1])
    m = flat.shape[0]
    out = np.zeros((m, m + 2, 1))
    out[:, :m, 0] = flat @ flat.T
    out[0, m, 0], out[0, m + 1, 0] = np.max(flat), -np.min(flat)
    return out


def _checked_extremes(top: float, minus_bottom: float) -> float:
    peak = max(float(top), float(minus_bottom))
    if not np.isfinite(peak):
        raise InvalidInputError("X contains NaN or infinite values.")
    return peak


def _dask_materialize(X: np.ndarray, flat: np.ndarray, step: int, client: Any) -> np.ndarray:
    import dask.array as da

    n, T, _ = X.shape
    product = da.tensordot(flat, _dask_tokens(X, (n, T, step)), axes=2)
    return client.compute(product, sync=True)


def _dask_project(
    X: np.ndarray, vectors: Sequence[np.ndarray], step: int, client: Any
) -> list[np.ndarray]:
    import dask.array as da

    n, T, d = X.shape
    k = len(vectors)
    tokens = _dask_tokens(X, (step, T, d))
    W = da.from_array(
        np.stack([np.asarray(w, dtype=np.float64) for w in vectors], axis=1), chunks=-1
    )
    # One task per chunk makes all its products and extremes: with one graph per product
    # and for max and min, every chunk waited for four consumers and the workers held most
    # of the tokens (1 GB each for 1.6 GB of tokens in 32 MiB chunks).
    parts = da.blockwise(
        _project_part,
        "itj",
        tokens,
        "itk",
        W,
        "kj",
        dtype=np.float64,
        concatenate=True,
        adjust_chunks={"j": k + 2},
    )
    out = client.compute(parts, sync=True)
    _checked_extremes(out[:, :, k].max(), out[:, :, k + 1].max())
    return [np.ascontiguousarray(out[:, :, j]) for j in range(k)]


def _project_part(block: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``block @ w`` for each column w of W (as the local pass computes them), then each
    token's max and -min; shape (rows, T, k + 2)."""
    k = W.shape[1]
    out = np.empty(block.shape[:2] + (k + 2,))
    for j in range(k):
        out[:, :, j] = block @ np.ascontiguousarray(W[:, j])
    out[:, :, k], out[:, :, k + 1] = block.max(axis=2), -block.min(axis=2)
    return out
