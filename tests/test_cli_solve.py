"""``margin-solver solve``: output, JSON, and one-line errors with exit status 2."""

import json
import math

import numpy as np
import pytest

from margin_solver.cli import EXIT_NO_ANSWER, main
from margin_solver.core.data import Dataset, PaperDistribution


@pytest.fixture
def data_file(tmp_path):
    ds = PaperDistribution(d=100, T=2, snr=math.sqrt(4 / 10), eta=0.15).sample(10, seed=0)
    return ds.save(tmp_path / "train.npz")


def test_solve_prints_and_writes_json(data_file, tmp_path, capsys):
    out = tmp_path / "res.json"
    status = main(["solve", str(data_file), "--R", "3", "--certify", "--json", str(out)])
    printed = capsys.readouterr().out
    assert status == 0
    assert "lower bound" in printed and "gap" in printed
    assert "attention on signal: clean" in printed
    result = json.loads(out.read_text())
    assert result["status"] == "optimal" and result["success"] is True
    assert len(result["v"]) == len(result["p"]) == 100
    assert result["norm"] >= result["lower_bound"] * (1 - 1e-9)
    assert f"||v||       {result['norm']:.6g}" in printed
    # the lower-bound line names the bound's stages (the result's bound.method)
    bound_line = next(line for line in printed.splitlines() if line.startswith("  lower bound"))
    assert f", {result['bound']['method']}, " in bound_line


@pytest.mark.parametrize(
    ("R", "match"),
    [("-1", "R must be a positive"), ("nan", "R must be a positive"), ("0", "R must")],
)
def test_bad_R_is_one_line(data_file, capsys, R, match):
    assert main(["solve", str(data_file), "--R", R]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert match in err


@pytest.mark.parametrize("gap_tol", ["1", "2", "0", "-1e-3"])
def test_a_gap_tolerance_outside_zero_one_is_one_line(data_file, capsys, gap_tol):
    """A relative gap is at most 1: gap_tol >= 1 would call any feasible point optimal."""
    assert main(["solve", str(data_file), "--R", "1", "--certify", f"--gap-tol={gap_tol}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gap_tol must be" in err


def test_missing_and_bad_files(tmp_path, capsys):
    assert main(["solve", str(tmp_path / "nope.npz"), "--R", "1"]) == 2
    assert "No dataset file" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    assert main(["solve", str(bad), "--R", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.npz is not an .npz archive" in err


def test_infeasible_data_is_one_line_and_exit_no_answer(tmp_path, capsys):
    """A proof of infeasibility is an answer to a well-formed question: exit 3, not 2."""
    X = np.array([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]]])
    path = Dataset(X, [1, -1]).save(tmp_path / "clash.npz")
    out = tmp_path / "clash.json"
    assert main(["solve", str(path), "--R", "1", "--json", str(out)]) == EXIT_NO_ANSWER
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "infeasible" in err
    assert json.loads(out.read_text())["status"] == "infeasible"


def test_progress_bars_only_on_a_terminal(data_file, capsys, monkeypatch):
    assert main(["solve", str(data_file), "--R", "3", "--certify"]) == 0
    assert "P_R" not in capsys.readouterr().err  # pytest's stderr is not a terminal
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert main(["solve", str(data_file), "--R", "3", "--certify"]) == 0
    err = capsys.readouterr().err
    # the root heuristic certifies LB's selection here: no first start runs
    assert "P_R root heuristic" in err and "lower bound" in err and "gap=" in err
    assert main(["solve", str(data_file), "--R", "3"]) == 0
    assert "P_R starts" in capsys.readouterr().err
    assert main(["solve", str(data_file), "--R", "3", "--no-progress"]) == 0
    assert "P_R" not in capsys.readouterr().err
