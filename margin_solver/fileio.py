"""Atomic file writes: a reader never sees a half-written results file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from margin_solver.results import to_jsonable


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it over ``path``.

    The rename is atomic on POSIX, so ``path`` holds either its old content or the
    complete new one, even if the process is killed mid-write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` (result objects, numpy values, dicts) as indented JSON, atomically."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    return atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2) + "\n")
