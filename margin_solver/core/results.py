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
import functools
import json
import math
import warnings
from collections.abc import Callable
from enum import Enum
from typing import Any

import numpy as np

OPTIMAL = "optimal"
LOCAL_OPTIMAL = "local_optimal"
OPTIMAL_INACCURATE = "optimal_inaccurate"
CONVERGED = "converged"
COMPLETED = "completed"
INFEASIBLE = "infeasible"
NO_FEASIBLE_POINT_FOUND = "no_feasible_point_found"
INACCURATE = "inaccurate"
TIME_LIMIT = "time_limit"
MAX_ITER = "max_iter"
DIVERGED = "diverged"
NOT_FITTED = "not_fitted"
FAILED = "failed"

#: Every status, with (success, solution_present). ``success`` keeps scipy's meaning: the
#: method did what it set out to do. ``solution_present`` follows cvxpy's group of that
#: name: a usable point that meets its constraints to the stated tolerance is attached.
#: docs/statuses.md explains each status; a test keeps that page in step with this table.
STATUS_TABLE: dict[str, tuple[bool, bool]] = {
    OPTIMAL: (True, True),  # certified within the stated tolerance
    LOCAL_OPTIMAL: (True, True),  # a local method met its stopping test; not certified
    OPTIMAL_INACCURATE: (True, True),  # a conic v-step engine's own "inaccurate" optimum
    CONVERGED: (True, True),  # GD: its gradient tolerance was met
    COMPLETED: (True, True),  # GD: the fixed step budget ran and did what it is meant to
    INFEASIBLE: (False, False),  # proven for the whole problem
    NO_FEASIBLE_POINT_FOUND: (False, False),  # the search failed; infeasibility not proven
    INACCURATE: (False, False),  # the returned point violates its constraints beyond tol
    TIME_LIMIT: (False, True),  # stopped by the time limit, with the best point so far
    MAX_ITER: (False, True),  # stopped by the iteration cap, with the point reached
    DIVERGED: (False, False),  # non-finite values, or the loss ended above its start
    NOT_FITTED: (False, False),  # a schedule meant to interpolate left training errors
    FAILED: (False, False),  # a numerical engine broke down: nothing said about the problem
}


class ConvergenceWarning(UserWarning):
    """A method did not do what it set out to do (its status has ``success`` False).

    scikit-learn's estimator in this package re-emits scikit-learn's own ``ConvergenceWarning``.
    """


#: Statuses that come with a usable solution.
SOLUTION_PRESENT = frozenset(k for k, (_, present) in STATUS_TABLE.items() if present)


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
        return (
            f"array{value.shape} {value.dtype}"
            if value.size > 6
            else np.array2string(value, precision=6, separator=", ")
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
        """Return a JSON-ready dictionary of every field (and, for one release, the deprecated
        names of :func:`renamed`, so that readers of older JSON keep working)."""
        out = {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
        for old, alias in getattr(type(self), "_deprecated_names", {}).items():
            out.setdefault(old, to_jsonable(alias.old_value(self)))
        return out

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
        """True when the method did what it set out to do (scipy's meaning; see
        :data:`STATUS_TABLE`)."""
        return STATUS_TABLE[self.status][0]

    @property
    def solution_present(self) -> bool:
        """True when a usable point meeting the constraints to tolerance is attached."""
        return self.status in SOLUTION_PRESENT

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary of every field plus ``success``."""
        out = super().to_dict()
        out["success"] = self.success
        return out

    def __repr__(self) -> str:
        return self._repr_lines({"message": self.message, "success": self.success})


def classes_note(classes: Any) -> str | None:
    """``"-1 = 'cat', +1 = 'dog'"``: how a report names the user's two labels; None when
    they are -1 and +1 themselves (nothing to say)."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "iuf" and classes.tolist() == [-1, 1]:
        return None
    a, b = (to_jsonable(c) for c in classes.tolist())
    return f"-1 = {a!r}, +1 = {b!r}"


def sign_classes() -> np.ndarray:
    """The labels of a result built without the user's: -1 and +1 themselves."""
    return np.array([-1, 1])


@dataclasses.dataclass(frozen=True)
class Renamed:
    """One deprecated attribute name of a result class (see :func:`renamed`).

    Parameters
    ----------
    old : str
        The deprecated name.
    new : str
        The attribute that replaces it.
    value : callable, optional
        The old attribute's value computed from the result, when it is not simply ``new``'s
        (e.g. ``MinNormResult.margin``, which was ``1 / norm``). Such an old name is dropped
        from the constructor's keywords (it is derived).
    """

    old: str
    new: str
    value: Callable[[Any], Any] | None = None

    def old_value(self, result: Any) -> Any:
        """The value the deprecated name had."""
        return getattr(result, self.new) if self.value is None else self.value(result)

    def __get__(self, result: Any, owner: type | None = None) -> Any:
        if result is None:
            return self
        cls = type(result).__name__
        hint = "" if self.value is None else " (its old value is returned; the meanings differ)"
        warnings.warn(
            f"{cls}.{self.old} is deprecated and will be removed in the next release; use "
            f"{cls}.{self.new}{hint}. docs/usage.md, 'Result vocabulary', lists every rename.",
            FutureWarning,
            stacklevel=2,
        )
        return self.old_value(result)


def renamed(*aliases: Renamed) -> Callable[[type], type]:
    """Class decorator (put it above ``@dataclass``) keeping deprecated attribute names.

    Reading an old name warns with :class:`FutureWarning` (shown to users by default, as
    scikit-learn does for its deprecations) and returns the old value; the constructor still
    accepts the old keyword (without warning: results are built by this package), so code
    that builds a result keeps working while it moves to the new name.
    """

    def decorate(cls: type) -> type:
        init = cls.__init__
        table = {a.old: a for a in aliases}

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            for old, alias in table.items():
                if old in kwargs:
                    value = kwargs.pop(old)
                    if alias.value is None:
                        kwargs.setdefault(alias.new, value)
            init(self, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[misc]
        for old, alias in table.items():
            setattr(cls, old, alias)
        cls._deprecated_names = {**getattr(cls, "_deprecated_names", {}), **table}  # type: ignore[attr-defined]
        return cls

    return decorate
