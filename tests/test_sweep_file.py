"""``sweep --data FILE`` and the Python sweep over a user's own dataset (issue 41)."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from margin_solver.bench.sweeps import SweepConfig, SweepGrid, file_shape, run_sweep
from margin_solver.cli import main
from margin_solver.core.data import PaperDistribution, load_dataset
from margin_solver.core.validation import InvalidInputError


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "mine.npz"
    PaperDistribution(d=30, snr=1.0, eta=0.0).sample(24, seed=3).save(path)
    return path


def _rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_cells_draw_n_samples_and_test_on_the_rest(saved, tmp_path):
    assert file_shape(saved) == (24, 2, 30)
    grid = SweepGrid(n=[6, 12], d=[30], T=[2], eta=[0.0, 0.45], seeds=2, data=str(saved),
                     methods=["uniform-svm"])  # fmt: skip
    result = run_sweep(grid, tmp_path / "s.csv", SweepConfig(n_test=10), jobs=1, progress=False)
    rows = _rows(result.path)
    assert result.success and len(rows) == 8
    for row in rows:
        n = int(row["n"])
        assert int(row["n_test"]) == min(10, 24 - n)  # the rest, at most n_test
        assert (int(row["n_noisy"]) == 0) or row["eta"] != "0.0"
    # the cell seeds hash the path (a new tmp_path each run): 36 labels at eta = 0.45 all
    # unflipped has probability 0.55^36 < 1e-9
    assert sum(int(r["n_noisy"]) for r in rows if r["eta"] == "0.45") > 0
    by_seed = {(r["n"], r["eta"], r["seed"]): r["norm"] for r in rows}
    assert by_seed[("6", "0.0", "0")] != by_seed[("6", "0.0", "1")]  # seeds draw other samples
    again = run_sweep(grid, tmp_path / "t.csv", SweepConfig(n_test=10), jobs=1, progress=False)
    assert [r["norm"] for r in _rows(again.path)] == [r["norm"] for r in rows]


def test_the_cli_reads_the_shape_from_the_file(saved, tmp_path, capsys):
    out = tmp_path / "s.csv"
    argv = ["sweep", "--data", str(saved), "--n", "8", "--methods", "uniform-svm",
            "--out", str(out), "--no-progress", "--jobs", "1"]  # fmt: skip
    assert main(argv) == 0
    (row,) = _rows(out)
    assert (row["T"], row["d"], row["data"]) == ("2", "30", str(saved))
    clean = load_dataset(saved).y
    assert set(np.unique(clean)) == {-1, 1} and int(row["n_test"]) == 16


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--n", "24"], "n=24 leaves no test samples: .* holds 24 samples; give n < 24"),
        (["--n", "8", "--d", "5"], "holds T=2, d=30; leave out --T and --d"),
        (["--n", "8", "--data-options", '{"patch": 4}'], "--data-options are for digits"),
    ],
)
def test_bad_requests_are_one_line_and_exit_2(saved, tmp_path, capsys, extra, message):
    out = tmp_path / "s.csv"
    argv = ["sweep", "--data", str(saved), *extra, "--methods", "uniform-svm", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err)
    assert not out.exists()


def test_an_unknown_source_names_the_choices():
    grid = SweepGrid(n=[4], d=[3], T=[2], data="no/such/file.npz", methods=["uniform-svm"])
    with pytest.raises(InvalidInputError, match=r"neither one of .*paper.* nor a dataset file"):
        run_sweep(grid, "unused.csv", SweepConfig(), jobs=1, progress=False)
