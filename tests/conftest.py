"""Shared fixtures: samples of the paper's distribution and their .npz files."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from margin_solver.data import Dataset, PaperDistribution


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
