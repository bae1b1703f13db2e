"""Atomic file writes: a reader never sees a half-written results file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from margin_solver.results import to_jsonable


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and :func:`os.replace`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` (result objects, numpy values, dicts) as indented JSON, atomically."""
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    return atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2) + "\n")
