"""Shared fixtures: samples of the paper's distribution and their .npz files."""

from __future__ import annotations

import math
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
