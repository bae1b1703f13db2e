"""Append-only CSV results log that survives crashes and resumes.

One process (the sweep's parent) owns the file: :meth:`ResultLog.open` takes an exclusive
``flock`` on it and holds it until :meth:`ResultLog.close`, so a second run given the same file
is refused at once with one line (no duplicate row, no lost row) instead of interleaving its
rows. Before anything is written, an existing file is checked to be a regular file (never a
symbolic link, device or FIFO) whose first line is this log's header; anything else is refused
and left untouched. Each finished row is appended with a single ``os.write`` of one complete
line, then flushed to disk with ``fsync``: a crash can leave at most one torn last line (bytes
without the final newline), which :meth:`ResultLog.open` detects and drops before anything else
is appended. Rows are identified by a key (the columns named in ``key_fields``), so a re-run can
skip what is done. A new file gets the permissions the umask says.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import logging
import math
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from margin_solver.core.fileio import check_output_path
from margin_solver.core.validation import InvalidInputError

logger = logging.getLogger("margin_solver")

Key = tuple[str, ...]

#: Opens of a results log before giving up when other writers keep replacing it (each
#: ``--retry-failed`` run replaces it once): a bound, so that the open cannot loop for ever.
_OPEN_ATTEMPTS = 100

#: Descriptors of the logs this process holds open and locked. A process forked from it (the
#: sweep's local workers, :func:`margin_solver.bench.sweeps.local_map`) closes its copies at
#: once: a copy shares the lock, which would then outlive this process's release of it (or
#: its death) for as long as the child lives, and a child never writes the log.
_HELD: set[int] = set()


def _close_held_in_child() -> None:
    for fd in _HELD:
        with contextlib.suppress(OSError):  # closed already: nothing to release
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_held_in_child)


def canonical(value: Any) -> str:
    """The text a value has in the CSV and in row keys.

    Floats use ``repr`` (shortest round-trip form), so a value read back from the file gives
    the same key as the value that was written; integral floats stay floats (``2.0``) so
    that a column keeps one spelling. ``None`` and NaN become the empty string.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        value = float(value)
        return "" if math.isnan(value) else repr(value)
    if type(value).__name__.startswith(("int", "uint")):
        return str(int(value))
    return str(value).replace("\r", " ").replace("\n", " ")


class ResultLog:
    """An append-only CSV file with a fixed header and one row per key.

    Parameters
    ----------
    path : path-like
        The CSV file; created (with its header) if missing.
    fields : sequence of str
        Column names, in order.
    key_fields : sequence of str
        Columns that identify a row (a subset of ``fields``).

    Use :meth:`open` to repair a torn last line and learn which keys are done, then
    :meth:`append` for each new row, then :meth:`close` (or use it as a context manager).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "r.csv"
    >>> with ResultLog(path, ["a", "b"], ["a"]) as log:
    ...     log.append({"a": 1, "b": 0.5})
    >>> path.read_text()
    'a,b\\n1,0.5\\n'
    """

    def __init__(self, path: str | os.PathLike, fields: Sequence[str], key_fields: Sequence[str]):
        self.path = Path(path)
        self.fields = list(fields)
        self.key_fields = list(key_fields)
        missing = set(self.key_fields) - set(self.fields)
        if missing:
            raise InvalidInputError(f"key fields {sorted(missing)} are not among the columns.")
        self._fd: int | None = None
        self.done: set[Key] = set()
        self.repaired_bytes = 0

    # -- opening and repair -------------------------------------------------------------
    def open(self) -> ResultLog:
        """Lock the file, check it is this log, drop a torn last line, read the done keys.

        Nothing is written to an existing file before it has been shown to be a regular file
        whose first line is this log's header (or a torn prefix of it, left by a run killed
        while creating the file).

        Raises
        ------
        InvalidInputError
            The path is a symbolic link, device, FIFO or directory; the existing file is not
            this log (another header, another kind of file); or another process holds the
            file's lock (a run writing to it now).
        """
        check_output_path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW and O_NONBLOCK: a link or FIFO put there after the check above fails or
        # returns at once instead of being followed or waited on; fstat then refuses it.
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
        for _ in range(_OPEN_ATTEMPTS):
            fd = self._open_locked(flags)
            if fd is not None:
                break
        else:
            raise InvalidInputError(
                f"{self.path} was replaced {_OPEN_ATTEMPTS} times while being opened; another "
                "run keeps rewriting it. Wait for it to finish, or use another output."
            )
        try:
            header = _csv_line(self.fields)
            self._check_is_this_log(fd, header)
            self.repaired_bytes = _drop_torn_tail(fd)
            if self.repaired_bytes:
                logger.warning(
                    "%s: dropped a torn last line (%d bytes) left by an interrupted run",
                    self.path,
                    self.repaired_bytes,
                )
            if os.fstat(fd).st_size == 0:
                _write_all(fd, header)
                os.fsync(fd)
            rows = _parse_rows(_read_all(fd), self.path.name, self.fields)
        except BaseException:
            os.close(fd)  # releases the lock
            raise
        self._fd = fd
        _HELD.add(fd)
        self.done = {self.key_of(row) for row in rows}
        return self

    def _open_locked(self, flags: int) -> int | None:
        """Open the path, check it is a regular file and lock it; None when the path was
        replaced meanwhile (the caller opens it again).

        A writer that discards rows (:meth:`discard`) renames a new file over the path and
        then releases the lock of the old one: a lock taken on a descriptor opened before the
        rename would be a lock on a file no longer in the directory, and rows appended to it
        would be lost. So the lock counts only if the path still names the locked file.
        """
        try:
            fd = os.open(self.path, flags, 0o666)  # the umask applies
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                check_output_path(self.path)  # names the link
            raise
        try:
            locked = os.fstat(fd)
            if not stat.S_ISREG(locked.st_mode):
                raise InvalidInputError(
                    f"{self.path} is not a regular file; results logs are written to regular "
                    "files only (give a new file name)."
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InvalidInputError(
                    f"{self.path} is being written by another run (it holds the file's lock); "
                    "wait for that run to finish, then re-run to resume, or use another output."
                ) from None
            try:
                named = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                named = None
        except BaseException:
            os.close(fd)
            raise
        if named is None or (named.st_dev, named.st_ino) != (locked.st_dev, locked.st_ino):
            os.close(fd)
            return None
        return fd

    def _check_is_this_log(self, fd: int, header: bytes) -> None:
        """Refuse an existing file whose start is neither the header nor a torn prefix of it."""
        size = os.fstat(fd).st_size
        head = os.pread(fd, max(len(header), 1 << 16), 0)
        if size == 0 or head.startswith(header) or (size < len(header) and header.startswith(head)):
            return
        first, newline, _ = head.partition(b"\n")
        try:
            columns = next(csv.reader([first.decode("utf-8")]))
        except (UnicodeDecodeError, StopIteration, csv.Error):
            columns = None
        if newline and columns is not None and len(columns) > 1:
            what = f"has columns {columns}, expected {self.fields}"
        else:
            what = f"does not start with the header line {header.decode().strip()!r}"
        raise InvalidInputError(
            f"{self.path} exists and is not this results log: it {what}; nothing was written "
            "to it. Use a new output file."
        )

    def key_of(self, row: Mapping[str, Any]) -> Key:
        """The key of a row (values in their canonical text form)."""
        return tuple(canonical(row.get(name)) for name in self.key_fields)

    # -- appending ----------------------------------------------------------------------
    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row atomically: one ``write`` of the whole line, flush, ``fsync``.

        Raises
        ------
        InvalidInputError
            The row has columns outside the header, or its key is already in the file.
        """
        self.extend([row])

    def extend(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows with one ``write`` of their lines and one ``fsync``.

        A crash can tear only the last line written (dropped at the next :meth:`open`); the
        rows before it are complete. One ``fsync`` for rows that finish together (the methods
        of one sweep data point) instead of one each: on a busy disk an ``fsync`` costs
        milliseconds.

        Raises
        ------
        InvalidInputError
            A row has columns outside the header, or a key already in the file or given twice
            (nothing is written then).
        """
        if self._fd is None:
            self.open()
        keys = []
        for row in rows:
            unknown = set(row) - set(self.fields)
            if unknown:
                raise InvalidInputError(
                    f"row has unknown columns {sorted(unknown)}; expected {self.fields}."
                )
            key = self.key_of(row)
            if key in self.done or key in keys:
                raise InvalidInputError(f"{self.path.name} already has a row with key {key}.")
            keys.append(key)
        if not keys:
            return
        data = b"".join(
            _csv_line([canonical(row.get(name)) for name in self.fields]) for row in rows
        )
        assert self._fd is not None
        _write_all(self._fd, data)  # under the lock taken by open()
        os.fsync(self._fd)
        self.done.update(keys)

    def rows(self) -> list[dict[str, str]]:
        """The complete rows now in the file, as dictionaries of strings."""
        if self._fd is None:
            self.open()
        assert self._fd is not None
        return _parse_rows(_read_all(self._fd), self.path.name, self.fields)

    def discard(self, keys: Iterable[Key]) -> int:
        """Remove the rows with these keys; return how many were removed.

        The file is rewritten without them into a new file beside it, which is locked,
        written, flushed and then renamed over the log, so that the path always holds either
        the old rows or the new ones, and no second run can take the lock between the two.
        Every kept line stays byte for byte; the file keeps its permissions.

        Raises
        ------
        InvalidInputError
            A row spans several lines (a quoted newline, never written by this class), so
            lines cannot be dropped one by one.
        """
        if self._fd is None:
            self.open()
        assert self._fd is not None
        drop = set(keys) & self.done
        if not drop:
            return 0
        data = _read_all(self._fd)
        header, _, body = data.partition(b"\n")
        kept = [header + b"\n"]
        index = [self.fields.index(name) for name in self.key_fields]
        for line in body.splitlines(keepends=True):
            values = next(csv.reader([line.decode("utf-8")]), [])
            if len(values) != len(self.fields):
                raise InvalidInputError(
                    f"{self.path.name} has a row spanning several lines; cannot drop rows from it."
                )
            if tuple(values[i] for i in index) not in drop:
                kept.append(line)
        fd, tmp = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
            os.fchmod(fd, stat.S_IMODE(os.fstat(self._fd).st_mode))
            _write_all(fd, b"".join(kept))
            os.fsync(fd)
            check_output_path(self.path)  # a link or device put there meanwhile stays
            os.replace(tmp, self.path)
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        except BaseException:
            os.close(fd)
            Path(tmp).unlink(missing_ok=True)
            raise
        _HELD.discard(self._fd)
        os.close(self._fd)
        self._fd = fd
        _HELD.add(fd)
        self.done -= drop
        return len(drop)

    def close(self) -> None:
        """Close the file descriptor (which releases the lock)."""
        if self._fd is not None:
            _HELD.discard(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ResultLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_message(noun: str, verb: str, new: int, done: int, failed: int | None = None) -> str:
    """One-line summary of a resumable run, e.g. ``"8 cells run (0 failed), 4 already done"``.

    Parameters
    ----------
    noun : str
        Singular name of a unit of work ("cell", "row", "speed script"); an "s" is added
        unless ``new == 1``.
    verb : str
        Past participle for the units done in this call ("run", "computed").
    new, done : int
        Units done in this call, units found already done in the log.
    failed : int, optional
        Of the ``new`` ones, how many failed (left out when None).

    Examples
    --------
    >>> progress_message("speed script", "run", 1, 0)
    '1 speed script run, 0 already done'
    """
    failures = "" if failed is None else f" ({failed} failed)"
    return f"{new} {noun}{'' if new == 1 else 's'} {verb}{failures}, {done} already done"


def read_rows(path: str | os.PathLike, fields: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Read the complete rows of a results CSV as dictionaries of strings.

    A torn last line (no trailing newline) is ignored, so a file being written by a running
    sweep can be read safely.

    Raises
    ------
    InvalidInputError
        The file is missing, or its header differs from ``fields`` when given.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"No results file at {str(path)!r}.")
    return _parse_rows(path.read_bytes(), path.name, fields)


def _parse_rows(data: bytes, name: str, fields: Sequence[str] | None) -> list[dict[str, str]]:
    """The complete rows of a results CSV's bytes (a torn last line is ignored)."""
    data = data[: data.rfind(b"\n") + 1]
    if not data:
        return []
    try:
        reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
        header = next(reader)
        body = list(reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"{name} is not a readable results CSV: {exc}") from None
    if fields is not None and header != list(fields):
        raise InvalidInputError(
            f"{name} has columns {header}, expected {list(fields)}; it was written by another "
            "version or another kind of run. Use a new output file."
        )
    rows = []
    for lineno, values in enumerate(body, start=2):
        if len(values) != len(header):
            raise InvalidInputError(
                f"{name} line {lineno} has {len(values)} fields, expected {len(header)}."
            )
        rows.append(dict(zip(header, values)))
    return rows


def _read_all(fd: int) -> bytes:
    """The whole content of an open file (read by offset: the append position is untouched)."""
    size = os.fstat(fd).st_size
    chunks, pos = [], 0
    while pos < size:
        chunk = os.pread(fd, min(1 << 24, size - pos), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def _csv_line(values: Iterable[str]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue().encode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    # A regular file takes the whole buffer in one write; the loop only guards the
    # theoretical short write, still under the caller's lock.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _drop_torn_tail(fd: int) -> int:
    """Truncate the file after its last newline; return the number of bytes dropped."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    chunk = 1 << 16
    pos = size
    while pos > 0:
        start = max(0, pos - chunk)
        block = os.pread(fd, pos - start, start)
        idx = block.rfind(b"\n")
        if idx >= 0:
            keep = start + idx + 1
            break
        pos = start
    else:
        keep = 0
    if keep < size:
        os.ftruncate(fd, keep)
        os.fsync(fd)
    return size - keep
