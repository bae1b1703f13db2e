"""The Figure 1 study: the boundary fit finds a known kappa on a tiny grid, its interval spans
the seeds' own fits, and the study runs through `bench` (issue 42)."""

from __future__ import annotations

import numpy as np
import pytest

from margin_solver.bench.figure1 import boundary_table, fit_boundary, reduced_ns
from margin_solver.bench.studies import run_study

NS = range(2, 13)
SNRS = np.linspace(0.0, 1.0, 21)


def _cells(kappa: float, high: float = 0.9, low: float = 0.5):
    return [(n, s, high if n * s * s > kappa else low) for n in NS for s in SNRS]


def _bracket(kappa: float) -> tuple[float, float]:
    """The grid's nearest cell kappas below and above ``kappa``."""
    levels = sorted({n * s * s for n in NS for s in SNRS})
    return max(k for k in levels if k < kappa), min(k for k in levels if k > kappa)


@pytest.mark.parametrize("kappa", [0.7, 2.5, 6.0])
def test_fit_recovers_a_known_boundary(kappa):
    fitted, wrong = fit_boundary(_cells(kappa), midpoint=0.7)
    lo, hi = _bracket(kappa)
    assert lo < fitted < hi and wrong == 0
    # an error column: high SNR is low error
    err = [(n, s, 0.0 if v > 0.7 else 0.5) for n, s, v in _cells(kappa)]
    assert fit_boundary(err, midpoint=0.25, above_is_high=False)[0] == fitted


def test_one_wrong_cell_moves_nothing_and_is_counted():
    cells = _cells(2.5)
    k = next(i for i, (n, s, v) in enumerate(cells) if v == 0.5 and n * s * s > 0.5)
    cells[k] = (*cells[k][:2], 0.9)  # a lone high cell deep in the harmful side
    fitted, wrong = fit_boundary(cells, midpoint=0.7)
    lo, hi = _bracket(2.5)
    assert lo < fitted < hi and wrong == 1


def test_no_candidate_gives_nan():
    kappa, _ = fit_boundary([(4, 0.5, 0.9), (4, 0.5, 0.5)], midpoint=0.7)
    assert np.isnan(kappa)


def test_boundary_table_interval_spans_the_seeds():
    rows = []
    for seed, kappa in ((0, 1.5), (1, 4.0)):
        for n, s, acc in _cells(kappa):
            for method in ("gd-long", "gd-two-step", "min-norm"):
                rows.append(
                    {
                        "method": method,
                        "seed": seed,
                        "n": n,
                        "snr": s,
                        "kappa": n * s * s,
                        "test_error_noisy": 1 - acc,
                        "test_error_clean": 0.0 if acc > 0.7 else 0.5,
                    }
                )
    (line, *_) = boundary_table(rows, "n2")
    lo, hi = line["kappa_acc_seeds"]
    assert _bracket(1.5)[0] < lo < _bracket(1.5)[1] and _bracket(4.0)[0] < hi < _bracket(4.0)[1]
    assert lo <= line["kappa_acc"] <= hi
    assert line["kappa_clean_seeds"] == [lo, hi]


def test_boundary_table_does_not_depend_on_the_order_of_the_rows():
    # Three seeds' clean errors whose float mean is 0.25 (on the midpoint: a high cell) when
    # added in seed order and 0.25000000000000006 (a low cell) in another order: the rows of
    # a parallel sweep come in the order its workers finish.
    errors = {0: 0.006, 1: 0.058, 2: 0.686}
    assert (errors[2] + errors[1] + errors[0]) / 3 > 0.25 == (errors[0] + errors[1] + errors[2]) / 3
    rows = []
    rng = np.random.default_rng(0)
    for n, s, acc in _cells(1.0):
        for seed in (0, 1, 2):
            clean = 0.0 if acc > 0.7 else 0.5
            noisy = 1 - acc + rng.integers(-20, 20) / 500  # errors on 500 test samples
            if (n, s) == (6, SNRS[9]):  # kappa 1.22 > 1: a high cell, at the midpoint
                clean = errors[seed]
            rows.append(
                {
                    "method": "min-norm",
                    "seed": seed,
                    "n": n,
                    "snr": s,
                    "kappa": n * s * s,
                    "test_error_noisy": noisy,
                    "test_error_clean": clean,
                }
            )
    rows += [{**r, "method": m} for r in rows for m in ("gd-long", "gd-two-step")]
    in_seed_order = boundary_table(rows, "n2")
    assert in_seed_order[2]["wrong_clean"] == f"0/{len(NS) * len(SNRS)}"
    for order in (rows[::-1], rng.permutation(rows).tolist()):
        assert boundary_table(order, "n2") == in_seed_order


def test_reduced_grid_keeps_the_largest_and_smallest_n():
    assert reduced_ns(4) == [2, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40]
    assert reduced_ns(1) == list(range(2, 41))


@pytest.mark.slow
def test_tiny_study_runs_through_bench(tmp_path):
    res = run_study("figure1", tmp_path, "tiny", jobs=1, progress=False)
    text = res.table.read_text()
    assert "fitted kappa" in text and text.count("| 2 n_max^2 |") == 3
    for name in ("figure1.png", "figure1.pdf", "figure1_all.png", "figure1_2n.csv"):
        assert (tmp_path / name).exists()
    again = run_study("figure1", tmp_path, "tiny", jobs=1, progress=False).message
    assert again.count("0 cells run") == 2
