"""Progress bars (tqdm, on stderr) for long solves; a disabled bar costs nothing. And the
``verbose`` keyword every long-running public function takes (:func:`verbose_switch`)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from margin_solver.core.guard import PROGRESS_SECONDS

_LOGGER = logging.getLogger("margin_solver")


class ProgressBar:
    """A tqdm bar that is a no-op when ``enabled`` is False, usable as a context manager.

    ``throttle(seconds)`` tells callers in tight loops whether it is time to refresh, so that
    a bar updated from a loop of millisecond solves does not slow the loop down.

    A disabled bar with a ``desc`` logs its progress instead when the ``margin_solver``
    logger shows INFO (``verbose=True`` without a terminal): one line at most every
    :data:`margin_solver.core.guard.PROGRESS_SECONDS`, naming the stage (``desc``), the
    count done (of ``total``, with the time left at the speed so far) and the postfix.
    """

    def __init__(self, enabled: bool, **tqdm_kwargs: Any) -> None:
        self.enabled = bool(enabled)
        self._last = 0.0
        self.bar = None
        self._log: dict[str, Any] | None = None
        if self.enabled:
            from tqdm.auto import tqdm  # imported only when a bar is shown

            self.bar = tqdm(**tqdm_kwargs)
        elif tqdm_kwargs.get("desc") and _LOGGER.isEnabledFor(logging.INFO):
            now = time.perf_counter()
            self._log = {"n": 0.0, "start": now, "logged": now, "postfix": {}, **tqdm_kwargs}

    def throttle(self, seconds: float = 0.2) -> bool:
        """True at most once per ``seconds`` (once per progress line for a logging bar;
        always False for a disabled bar that does not log)."""
        if self._log is not None:
            return time.perf_counter() - self._log["logged"] >= PROGRESS_SECONDS
        if not self.enabled:
            return False
        now = time.perf_counter()
        if now - self._last < seconds:
            return False
        self._last = now
        return True

    def update(self, n: float = 1, **postfix: Any) -> None:
        """Advance by ``n`` and show ``postfix`` (name=value pairs)."""
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(n)
        elif self._log is not None:
            self._log["n"] += n
            self._log["postfix"].update(postfix)
            self._line()

    def set_to(self, value: float, **postfix: Any) -> None:
        """Move the bar to ``value`` (e.g. elapsed seconds against a time limit)."""
        if self.bar is not None:
            self.update(value - self.bar.n, **postfix)
        elif self._log is not None:
            self.update(value - self._log["n"], **postfix)

    def _line(self) -> None:
        """Log the progress when the last line is at least PROGRESS_SECONDS old."""
        log = self._log
        now = time.perf_counter()
        if now - log["logged"] < PROGRESS_SECONDS:
            return
        log["logged"] = now
        done, total, unit = log["n"], log.get("total"), log.get("unit", "it")
        elapsed = now - log["start"]
        if total and done:
            count = f"{done:.0f} of {total:.0f} {unit} done, about "
            count += f"{elapsed / done * max(total - done, 0):.0f} s left"
        else:
            count = f"{done:.0f} {unit} done in {elapsed:.0f} s"
        fields = "".join(f", {key} {value}" for key, value in log["postfix"].items())
        _LOGGER.info("%s: %s%s", log["desc"], count, fields)

    def close(self) -> None:
        """Close the bar (and leave the terminal line clean)."""
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verbose_switch(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a long-running public function the package's one ``verbose`` keyword.

    ``verbose=True`` shows the function's progress bars when stderr is a terminal (functions
    with a ``progress`` parameter; an explicit ``progress=`` wins), and otherwise sends the
    ``margin_solver`` logger's INFO lines, with the call's duration at the end, to stderr for
    the length of the call (to the caller's own handlers when logging is configured).
    ``verbose=False`` (the default) changes nothing.

    The wrapper is one more frame between the caller and the function: a warning the function
    issues at its caller's line needs ``stacklevel`` one higher than without it.
    """
    signature = inspect.signature(func)
    has_bars = "progress" in signature.parameters
    params = list(signature.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    params.insert(
        at,
        inspect.Parameter(
            "verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation="bool"
        ),
    )

    @functools.wraps(func)
    def wrapper(*args: Any, verbose: bool = False, **kwargs: Any) -> Any:
        if not verbose:
            return func(*args, **kwargs)
        if has_bars and sys.stderr.isatty():
            kwargs.setdefault("progress", True)
            return func(*args, **kwargs)
        with _log_to_stderr() as log:
            start = time.perf_counter()
            out = func(*args, **kwargs)
            log.info("%s finished in %.3g s", func.__name__, time.perf_counter() - start)
            return out

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__doc__ = (func.__doc__ or "") + _VERBOSE_DOC
    return wrapper


_VERBOSE_DOC = """
    The keyword ``verbose`` (bool, default False) shows progress: bars when stderr is a
    terminal and the function has them, else log lines on stderr
    (:func:`margin_solver.core.progress.verbose_switch`).
"""


@contextlib.contextmanager
def _log_to_stderr() -> Iterator[logging.Logger]:
    """The package logger at INFO for the block, with a stderr handler unless logging is
    configured (a handler on the root logger or on the package logger)."""
    log = logging.getLogger("margin_solver")
    configured = logging.getLogger().handlers or any(
        not isinstance(h, logging.NullHandler) for h in log.handlers
    )
    handler = None if configured else logging.StreamHandler(sys.stderr)
    if handler is not None:
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)
    try:
        yield log
    finally:
        log.setLevel(level)
        if handler is not None:
            log.removeHandler(handler)
