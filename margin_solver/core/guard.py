"""The caller's time limit inside long stages: checked between blocks, with progress lines.

Every stage of a solve has a budget of work, so its answer is the same on any machine; the
caller's ``time_limit`` is only an outer guard (docs/statuses.md). A stage that cannot
return a partial answer (the token Gram product of the set-up) works in blocks of bounded
work and asks the :class:`Guard` between blocks; when the deadline has passed it raises
:class:`TimeLimitReached`, naming the stage and what was left, and the solve returns what it
has. A step that cannot be split (one LAPACK call, e.g. the eigendecomposition of an
attention SVM's Gram matrix) is not started when its count of work, at the speed this call
measured on its own blocks, would end past the deadline (:meth:`Guard.affords`): a
prediction, so the call can still overrun by one step's error, but never by a step it could
see coming. Without a limit (the default) the guard never acts and nothing is measured that
decides anything.

Long stages also log a progress line at most every :data:`PROGRESS_SECONDS` (logger
``margin_solver``, level INFO: shown by ``verbose=True``): the stage, how far it got and
what is left.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = [
    "PROGRESS_SECONDS",
    "Guard",
    "Progress",
    "TimeLimitReached",
    "active",
    "current",
    "heartbeat",
]

logger = logging.getLogger("margin_solver")

#: Seconds between two progress lines of one long stage (verbose output).
PROGRESS_SECONDS = 2.0


class TimeLimitReached(Exception):
    """The caller's time limit passed inside a stage that has no partial answer.

    Attributes
    ----------
    stage : str
        What was stopped and how far it got, e.g. ``"the token Gram product (3 of 40 blocks
        done)"``.
    """

    def __init__(self, stage: str):
        super().__init__(stage)
        self.stage = stage


@dataclass
class Guard:
    """A deadline (a :func:`time.perf_counter` reading; inf for none) and the speed measured
    on this call's own blocks of work.

    Attributes
    ----------
    deadline : float
    rate : float
        Multiply-adds per second of the blocks measured so far (0 before any).
    clock : callable
        The clock ``deadline`` is a reading of (default :func:`time.perf_counter`; the
        caller's own when it reads another).
    """

    deadline: float = math.inf
    rate: float = 0.0
    clock: Callable[[], float] = field(default=lambda: time.perf_counter(), repr=False)
    _work: float = field(default=0.0, repr=False)
    _seconds: float = field(default=0.0, repr=False)

    @property
    def limited(self) -> bool:
        """Whether the caller set a limit at all."""
        return math.isfinite(self.deadline)

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self.clock() > self.deadline

    def check(self, stage: str) -> None:
        """Raise :class:`TimeLimitReached` naming ``stage`` once the deadline has passed."""
        if self.passed():
            raise TimeLimitReached(stage)

    def measured(self, work: float, seconds: float) -> None:
        """Record a block of ``work`` multiply-adds that took ``seconds``."""
        self._work += work
        self._seconds += seconds
        if self._seconds > 0:
            self.rate = self._work / self._seconds

    def affords(self, work: float) -> bool:
        """Whether a step of ``work`` multiply-adds, at the measured speed, ends before the
        deadline (always True without a limit; without a measurement, until it passes)."""
        if not self.limited:
            return True
        left = self.deadline - self.clock()
        if self.rate <= 0:
            return left > 0
        return work / self.rate <= left


class Progress:
    """Throttled progress lines of one stage of ``total`` blocks: at most one line every
    :data:`PROGRESS_SECONDS`, each naming the stage, the blocks done and the time left at
    the speed so far."""

    def __init__(self, stage: str, total: int, unit: str = "blocks"):
        self.stage, self.total, self.unit = stage, total, unit
        self.start = self.last = time.perf_counter()

    def update(self, done: int) -> None:
        """Log the progress after ``done`` blocks when the last line is old enough."""
        now = time.perf_counter()
        if now - self.last < PROGRESS_SECONDS or done >= self.total:
            return
        self.last = now
        left = (now - self.start) / done * (self.total - done) if done else math.nan
        logger.info(
            "%s: %d of %d %s done, about %.0f s left",
            self.stage,
            done,
            self.total,
            self.unit,
            left,
        )


@contextlib.contextmanager
def heartbeat(stage: str) -> Iterator[None]:
    """Log ``stage`` and the seconds it has run every :data:`PROGRESS_SECONDS` while the
    block runs, for one call into a library that reports nothing until it returns (an SDP
    solver: it releases the GIL, so a thread can log). Only when the ``margin_solver``
    logger shows INFO (verbose output); otherwise no thread is started."""
    if not logger.isEnabledFor(logging.INFO):
        yield
        return
    start, done = time.perf_counter(), threading.Event()

    def beat() -> None:
        while not done.wait(PROGRESS_SECONDS):
            logger.info("%s: running for %.0f s", stage, time.perf_counter() - start)

    thread = threading.Thread(target=beat, name="margin_solver progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


_ACTIVE: contextvars.ContextVar[Guard | None] = contextvars.ContextVar(
    "margin_solver_guard", default=None
)


@contextlib.contextmanager
def active(guard: Guard) -> Iterator[Guard]:
    """Make ``guard`` the one :func:`current` returns inside the block (one solve call)."""
    token = _ACTIVE.set(guard)
    try:
        yield guard
    finally:
        _ACTIVE.reset(token)


def current() -> Guard:
    """The guard of the enclosing :func:`active` block, else one without a limit."""
    guard = _ACTIVE.get()
    return Guard() if guard is None else guard
