"""Shared fixtures: samples of the paper's distribution and their .npz files; clocks that
make a time limit act at a known place on any machine."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from margin_solver.core.data import Dataset, PaperDistribution

# Property tests run a fixed sequence of examples (derandomize: the same examples on every run
# and machine, as many as each test asks for), so a tolerance met by chance cannot make a run
# flaky. ``pytest --hypothesis-profile=explore`` draws fresh examples to look for new failures.
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("deterministic")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding end-to-end (``slow``) tests run first. xdist's ``loadfile`` hands out
    whole files in collection order, so a long file collected last (the alphabet put
    ``test_work_budgets.py`` there) kept one worker busy minutes after the other had
    finished."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: files stay whole


@pytest.fixture(scope="session")
def paper_split() -> Callable[..., tuple[Dataset, Dataset]]:
    """``paper_split(n, n_test, seed, kappa=None, **dist)``: train and test sets of the paper's
    distribution; ``kappa`` sets SNR = sqrt(kappa / n), other keywords go to
    :class:`PaperDistribution` (``d``, ``T``, ``snr``, ``eta``, ...)."""

    def make(n: int, n_test: int, seed: int, kappa: float | None = None, **dist):
        if kappa is not None:
            dist["snr"] = math.sqrt(kappa / n)
        return PaperDistribution(**dist).sample_train_test(n, n_test, seed=seed)

    return make


@pytest.fixture(scope="session")
def saved_split() -> Callable[[Path, Dataset, Dataset], tuple[Path, Path]]:
    """``saved_split(root, train, test)``: write ``train.npz`` and ``test.npz`` under ``root``."""

    def save(root: Path, train: Dataset, test: Dataset) -> tuple[Path, Path]:
        return train.save(root / "train.npz"), test.save(root / "test.npz")

    return save


class _FastClock:
    """A ``time`` stand-in a billion times faster than the real clock: a finite time limit
    checked against it acts at its first check, on any machine."""

    @staticmethod
    def perf_counter() -> float:
        return time.perf_counter() * 1e9


@pytest.fixture
def fast_clock(monkeypatch) -> Callable[[object], None]:
    """``fast_clock(module)``: the clock of ``module`` (its ``time``) runs a billion times
    faster for the test."""

    def patch(module: object) -> None:
        monkeypatch.setattr(module, "time", _FastClock)

    return patch


class _CountedClock:
    """A ``time`` stand-in whose ``perf_counter`` moves only when a descent ends, by ``step``
    seconds: the time limit binds after a known number of starts on any machine and load."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def slow_descents(monkeypatch) -> Callable[[float], None]:
    """``slow_descents(step)``: every start of solve_min_norm takes ``step`` seconds of a
    counted clock (the clock of minnorm and of the descent's deadline test; nothing sleeps)."""
    from margin_solver.descent import alternating
    from margin_solver.minnorm import solve as minnorm

    def patch(step: float) -> None:
        clock = _CountedClock(step)
        real = minnorm.descend

        def slow(*args, **kwargs):
            run = real(*args, **kwargs)
            clock.now += clock.step
            return run

        monkeypatch.setattr(minnorm, "time", clock)
        monkeypatch.setattr(alternating, "time", clock)
        monkeypatch.setattr(minnorm, "descend", slow)

    return patch


@pytest.fixture
def counted_bound(monkeypatch) -> None:
    """The finite-R bound's box searches stop after 100 SVMs without progress and at most
    1,000 SVMs (defaults 2,000 and 20,000-30,000): a short bound whose answer is a count of
    work, the same on any machine and load, for tests of something else than the bound's
    budgets (they ran to a time limit of a few real seconds before, issue 43). The public entry
    points (``solve_min_norm``, ``global_lower_bound``, the CLI) start from the strategy table's
    default when ``options`` is not given, so that default is the one replaced."""
    from margin_solver.core import strategy

    counted = {"bound_stall_nodes": 100, "p_box_nodes": 1000, "score_box_nodes": 1000}
    monkeypatch.setattr(
        strategy, "DEFAULT_STRATEGY", dataclasses.replace(strategy.DEFAULT_STRATEGY, **counted)
    )
