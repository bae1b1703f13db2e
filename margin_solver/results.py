"""Common base for every result object the package returns.

Solver results follow the habits of :class:`scipy.optimize.OptimizeResult` and cvxpy: a
``status`` string from a small shared vocabulary, a human ``message``, a
``success`` flag derived from the status, ``to_dict()`` / ``to_json()`` for
machines and a ``repr`` that reads well in a terminal (:class:`ResultMixin`). Reports that
are not the outcome of a solve (the theorem checker's) are plain records
(:class:`RecordMixin`): the same serialisation, no status.
"""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from typing import Any

import numpy as np

OPTIMAL = "optimal"
OPTIMAL_INACCURATE = "optimal_inaccurate"
INFEASIBLE = "infeasible"
TIME_LIMIT = "time_limit"
MAX_ITER = "max_iter"
DIVERGED = "diverged"
FAILED = "failed"

#: Statuses that come with a usable solution.
SOLUTION_PRESENT = frozenset({OPTIMAL, OPTIMAL_INACCURATE, TIME_LIMIT, MAX_ITER})


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses and containers to JSON-ready values.

    Non-finite floats become ``None`` so that the output is strict JSON.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):  # e.g. Regime: its value is what JSON carries
        return to_jsonable(value.value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def format_cell(value: Any) -> str:
    """A value as a terminal-table cell: ``-`` for None, yes/no for booleans, whole
    numbers as they are, other numbers to 4 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{value:.4g}"


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array{value.shape} {value.dtype}" if value.size > 6 else np.array2string(
            value, precision=6, separator=", "
        )
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return f"{type(value).__name__} of length {len(value)}"
    if isinstance(value, dict) and len(value) > 6:
        return f"dict with keys {list(value)[:6]}..."
    return repr(value)


class RecordMixin:
    """Mixin for plain record dataclasses (reports): ``to_dict``, ``to_json`` and a ``repr``
    that reads well in a terminal. Solver results add a status (:class:`ResultMixin`)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary of every field."""
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self, **kwargs: Any) -> str:
        """Serialise :meth:`to_dict` with :func:`json.dumps` (``kwargs`` pass through)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.to_dict(), **kwargs)

    def _repr_lines(self, head: dict[str, Any]) -> str:
        """``head`` first, then every other field, one per line."""
        names = [f.name for f in dataclasses.fields(self)]  # type: ignore[arg-type]
        width = max(len(n) for n in names + list(head))
        lines = [f"{type(self).__name__}("]
        lines += [f"  {name.rjust(width)}: {value}" for name, value in head.items()]
        for name in names:
            if name not in head:
                lines.append(f"  {name.rjust(width)}: {_short(getattr(self, name))}")
        lines.append(")")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self._repr_lines({})


class ResultMixin(RecordMixin):
    """Mixin for solver results: dataclasses that carry ``status`` and ``message`` fields."""

    status: str
    message: str

    @property
    def success(self) -> bool:
        """True when the status says a usable solution is present."""
        return self.status in SOLUTION_PRESENT

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary of every field plus ``success``."""
        out = super().to_dict()
        out["success"] = self.success
        return out

    def __repr__(self) -> str:
        return self._repr_lines({"message": self.message, "success": self.success})
