"""Safe output files: atomic writes, regular files only, permissions from the umask.

Every file the package writes goes through :func:`atomic_write` (or, for the append-only
results log, through :func:`check_output_path` and :func:`file_mode`), so three rules hold
everywhere:

* a reader never sees a half-written file (temporary file beside the target, then
  ``os.replace``);
* an existing path that is not a regular file (a symbolic link, a device, a FIFO, a
  directory, a socket) is refused with one line and left as it is: writing through a link
  or over a device would change something we did not create;
* a new file gets the permissions the umask says (``0o666 & ~umask``, as ``open`` would
  give), not ``mkstemp``'s private ``0o600``, so collaborators can read results.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from margin_solver._version import __version__
from margin_solver.core.results import to_jsonable
from margin_solver.core.validation import InvalidInputError

#: What ``lstat`` calls each kind of non-regular file, for the refusal message.
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def check_output_path(path: str | os.PathLike) -> Path:
    """Return ``path`` when it is missing or a regular file; refuse anything else.

    The path itself is examined with ``lstat``: a symbolic link is refused even when it
    points to a regular file (its target is not ours to replace). A link in a parent
    directory is followed as usual.

    Raises
    ------
    InvalidInputError
        ``path`` exists and is a symbolic link, directory, device, FIFO or socket.

    Examples
    --------
    >>> check_output_path("/dev/null")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    margin_solver.core.validation.InvalidInputError: /dev/null is a character device, not a
    regular file; outputs are written to regular files only (give a new file name).
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if stat.S_ISREG(mode):
        return path
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise InvalidInputError(
        f"{path} is {kind}, not a regular file; outputs are written to regular files only "
        "(give a new file name)."
    )


#: The package's name in its outputs' provenance (JSON key ``written_by``, figures' creator).
WRITTEN_BY = "margin-solver"

#: :data:`WRITTEN_BY` with the version, the value the outputs carry.
WRITER = f"{WRITTEN_BY} {__version__}"

#: Suffix of the mark beside an output (``.NAME.margin-solver``): what this package wrote
#: there (its kind) and the SHA-256 of the bytes it wrote. A later run replaces a file only
#: against this proof, never because its content mentions the package.
MARK_SUFFIX = ".margin-solver"


def mark_path(path: str | os.PathLike) -> Path:
    """The hidden mark beside ``path`` (``dir/out.json`` -> ``dir/.out.json.margin-solver``)."""
    path = Path(path)
    return path.with_name(f".{path.name}{MARK_SUFFIX}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def written_by_us(path: str | os.PathLike, kind: str) -> bool:
    """Whether the regular file ``path`` is, byte for byte, an output of ``kind`` that this
    package wrote: its mark (:func:`mark_path`) names ``kind`` and the file's SHA-256.

    A file edited since, a file whose mark is missing or of another kind (a sweep's sidecar
    given as a result file) and a file that merely mentions the package are not."""
    path = Path(path)
    try:
        mark = json.loads(mark_path(path).read_text(encoding="utf-8"))
        return (
            isinstance(mark, dict)
            and mark.get("kind") == kind
            and mark.get("sha256") == _sha256(path)
        )
    except (OSError, ValueError):
        return False


def check_replaceable(path: str | os.PathLike, kind: str) -> Path:
    """Return ``path`` when it is missing or an output of ``kind`` this package wrote
    (:func:`written_by_us`); refuse a file someone else made or changed (and anything
    :func:`check_output_path` refuses).

    Raises
    ------
    InvalidInputError
        ``path`` exists and was not written by this package as it is now, or is not a
        regular file.
    """
    path = check_output_path(path)
    if path.exists() and not written_by_us(path, kind):
        raise InvalidInputError(
            f"{path} exists and was not written by {WRITTEN_BY} as a {kind} (or was changed "
            "since); it is left as it is (give a new file name or remove it)."
        )
    return path


def current_umask() -> int:
    """The process's umask, read without changing it where the system allows.

    Linux reports it in ``/proc/self/status``; elsewhere it is read by setting and restoring
    it (``os.umask`` has no read-only form).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """Permissions of a new output file: ``0o666 & ~umask`` (what ``open(path, "w")`` gives)."""
    return 0o666 & ~current_umask()


def atomic_write(
    path: str | os.PathLike, write: Callable[[IO[bytes]], Any], kind: str | None = None
) -> Path:
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it over ``path``.

    The rename is atomic on POSIX, so ``path`` holds either its old content or the
    complete new one, even if the process is killed mid-write. The file gets
    :func:`file_mode` permissions. With ``kind`` (an output a later run may replace, e.g.
    ``"result"``, ``"figure"``), its mark (:func:`mark_path`) is written after the rename;
    a crash between the two leaves an output without a mark, which is never replaced.

    Raises
    ------
    InvalidInputError
        ``path`` exists and is not a regular file (see :func:`check_output_path`).
    """
    path = check_output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        # Checked again just before the rename: a link or device put there meanwhile stays.
        check_output_path(path)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if kind is not None:
        mark = {"written_by": WRITER, "kind": kind, "sha256": _sha256(path)}
        atomic_write_text(mark_path(path), json.dumps(mark) + "\n")
    return path


def atomic_write_text(path: str | os.PathLike, text: str, kind: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (with a mark of ``kind`` when given)."""
    return atomic_write(path, lambda fh: fh.write(text.encode("utf-8")), kind)


def write_json(path: str | os.PathLike, obj: Any, kind: str = "result") -> Path:
    """Write ``obj`` (result objects, numpy values, dicts) as indented JSON, atomically, with
    a mark of ``kind`` (:func:`check_replaceable`); an object gets the key ``written_by``
    (this package and its version: provenance, not the proof of ownership)."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    obj = to_jsonable(obj)
    if isinstance(obj, dict):
        obj = {**obj, "written_by": WRITER}
    return atomic_write_text(path, json.dumps(obj, indent=2) + "\n", kind)
