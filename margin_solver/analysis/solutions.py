"""Accept a fitted model (v, p) from any solver: a result object, a mapping or a JSON file.

A *solution* is anything exposing dense ``v`` and ``p`` of shape (d,): the min-norm and GD
results (duck typing), a dict with keys ``"v"`` and ``"p"``, or a JSON file holding such an
object (what :func:`margin_solver.core.fileio.write_json` writes for those results).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.core.validation import InvalidInputError, check_vector, parse_json

__all__ = ["read_solution", "solution_vectors"]


def solution_vectors(
    solution: Any, d: int, name: str = "solution"
) -> tuple[np.ndarray, np.ndarray]:
    """Return validated ``(v, p)`` from a result object, a mapping or a JSON path.

    Parameters
    ----------
    solution : object with attributes ``v`` and ``p``, mapping with keys "v" and "p", or path
    d : int
        Token dimension the vectors must have.
    name : str, default="solution"
        Used in error messages.

    Returns
    -------
    v, p : ndarray of shape (d,)

    Raises
    ------
    InvalidInputError
        Missing ``v`` or ``p``, wrong length, non-numeric or non-finite entries, or an
        unreadable file.

    Examples
    --------
    >>> v, p = solution_vectors({"v": [1.0, 0.0], "p": [0.0, 0.0]}, d=2)
    >>> v.tolist()
    [1.0, 0.0]
    """
    if isinstance(solution, (str, os.PathLike)):
        return read_solution(solution, d)
    if isinstance(solution, Mapping):
        missing = [k for k in ("v", "p") if k not in solution]
        if missing:
            raise InvalidInputError(
                f"{name} lacks key(s) {missing}; expected an object with 'v' and 'p' "
                f"(lists of {d} floats), got keys {sorted(map(str, solution))[:8]}."
            )
        v, p = solution["v"], solution["p"]
    elif hasattr(solution, "v") and hasattr(solution, "p"):
        v, p = solution.v, solution.p
    else:
        raise InvalidInputError(
            f"{name} must expose dense 'v' and 'p' (attributes or keys), got "
            f"{type(solution).__name__}."
        )
    return _vector(v, d, f"{name} v"), _vector(p, d, f"{name} p")


def read_solution(path: str | os.PathLike, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Read ``(v, p)`` from a JSON file with keys "v" and "p" (see :func:`solution_vectors`)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"No solution file at {str(path)!r}.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path.name} is not valid JSON: {exc}") from None
    data = parse_json(text, path.name)
    if not isinstance(data, dict):
        raise InvalidInputError(
            f"{path.name} must hold a JSON object with keys 'v' and 'p', "
            f"got a {type(data).__name__}."
        )
    return solution_vectors(data, d, name=path.name)


def _vector(value: Any, d: int, name: str) -> np.ndarray:
    if value is None:
        raise InvalidInputError(
            f"{name} is missing (None); the check needs dense vectors of length {d}."
        )
    if isinstance(value, (list, tuple)) and any(
        isinstance(x, (list, tuple, dict, str)) for x in value
    ):
        raise InvalidInputError(f"{name} must be a flat list of {d} numbers.")
    return check_vector(value, d, name)
