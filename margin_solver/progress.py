"""Progress bars (tqdm, on stderr) for long solves; a disabled bar costs nothing."""

from __future__ import annotations

import time
from typing import Any


class ProgressBar:
    """A tqdm bar that is a no-op when ``enabled`` is False, usable as a context manager.

    ``throttle(seconds)`` tells callers in tight loops whether it is time to refresh, so that
    a bar updated from a loop of millisecond solves does not slow the loop down.
    """

    def __init__(self, enabled: bool, **tqdm_kwargs: Any) -> None:
        self.enabled = bool(enabled)
        self._last = 0.0
        self.bar = None
        if self.enabled:
            from tqdm.auto import tqdm  # imported only when a bar is shown

            self.bar = tqdm(**tqdm_kwargs)

    def throttle(self, seconds: float = 0.2) -> bool:
        """True at most once per ``seconds`` (always False for a disabled bar)."""
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

    def set_to(self, value: float, **postfix: Any) -> None:
        """Move the bar to ``value`` (e.g. elapsed seconds against a time limit)."""
        if self.bar is not None:
            self.update(value - self.bar.n, **postfix)

    def close(self) -> None:
        """Close the bar (and leave the terminal line clean)."""
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
