"""Sweeps a user can steer (issue 16): failed cells retried on request, data options checked
before any cell runs, local workers that end with the sweep, a summary line; and test sets
too large to hold evaluated block by block with the same rows (issue 18)."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from margin_solver.bench import sweeps
from margin_solver.bench.methods import SWEEP_METHODS, uniform_svm
from margin_solver.bench.resultlog import ResultLog, read_rows
from margin_solver.bench.sweeps import FIELDS, KEY_FIELDS, SweepConfig, SweepGrid, run_sweep
from margin_solver.cli import main
from margin_solver.core.validation import InvalidInputError


def _flaky(flag: Path):
    def method(train, test, call):
        if flag.exists():
            raise RuntimeError("flaky failure")
        return uniform_svm(train, test, call)

    return method


@pytest.fixture
def flaky(tmp_path, monkeypatch):
    """A method ``flaky`` that fails while the returned flag file exists."""
    flag = tmp_path / "fail"
    flag.touch()
    monkeypatch.setitem(SWEEP_METHODS, "flaky", _flaky(flag))
    return flag


def test_retry_failed_reruns_only_the_failed_cells_and_keeps_the_other_lines(tmp_path, flaky):
    flag, out, config = flaky, tmp_path / "s.csv", SweepConfig(n_test=20, check=False)
    grid = SweepGrid(n=[8], d=[20], kappa=[1.0, 4.0], seeds=2, methods=["uniform-svm", "flaky"])
    first = run_sweep(grid, out, config, jobs=1)
    assert (first.n_run, first.n_failed) == (8, 4)
    os.chmod(out, 0o640)
    good = [
        line for line in out.read_bytes().splitlines(keepends=True)[1:] if b",flaky," not in line
    ]

    again = run_sweep(grid, out, config, jobs=1)  # failed rows are results: not re-run
    assert (again.n_run, again.n_skipped, again.n_retried) == (0, 8, 0)

    flag.unlink()
    retried = run_sweep(grid, out, config, jobs=1, retry_failed=True)
    assert (retried.n_run, retried.n_failed, retried.n_retried, retried.n_skipped) == (4, 0, 4, 4)
    assert "4 of them retried after failing" in retried.message
    lines = out.read_bytes().splitlines(keepends=True)
    assert lines[1:5] == good  # kept rows byte for byte, in their place
    rows = read_rows(out, FIELDS)
    assert len(rows) == 8 and {r["status"] for r in rows} == {"optimal"}
    assert len({tuple(r[k] for k in KEY_FIELDS) for r in rows}) == 8
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    runs = json.loads(sweeps.sidecar_path(out).read_text())["runs"]
    assert [r["n_retried"] for r in runs] == [0, 0, 4]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".s.csv")]  # no temp left


def test_retry_failed_leaves_failed_rows_outside_the_grid(tmp_path, flaky):
    flag, out, config = flaky, tmp_path / "s.csv", SweepConfig(n_test=20, check=False)
    run_sweep(SweepGrid(n=[8], d=[20], kappa=[1.0, 4.0], methods=["flaky"]), out, config, jobs=1)
    flag.unlink()
    result = run_sweep(
        SweepGrid(n=[8], d=[20], kappa=[4.0], methods=["flaky"]),
        out,
        config,
        jobs=1,
        retry_failed=True,
    )
    assert result.n_retried == 1
    status = {r["kappa"]: r["status"] for r in read_rows(out, FIELDS)}
    assert status == {"1.0": "failed", "4.0": "optimal"}


def test_discard_keeps_the_log_locked_and_appendable(tmp_path):
    path = tmp_path / "r.csv"
    with ResultLog(path, ["a", "b"], ["a"]) as log:
        log.extend([{"a": i, "b": i / 2} for i in range(4)])
        assert log.discard([("1",), ("3",), ("9",)]) == 2
        with pytest.raises(InvalidInputError, match="being written by another run"):
            ResultLog(path, ["a", "b"], ["a"]).open()
        log.append({"a": 1, "b": 7})
    assert path.read_text() == "a,b\n0,0.0\n2,1.0\n1,7\n"


def test_extend_writes_nothing_when_a_key_repeats(tmp_path):
    path = tmp_path / "r.csv"
    with ResultLog(path, ["a"], ["a"]) as log:
        with pytest.raises(InvalidInputError, match="already has a row"):
            log.extend([{"a": 1}, {"a": 1}])
    assert path.read_text() == "a\n"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--d", "40"], "T=4, d=20 but the cell says T=4, d=40"),
        (["--data-options", '{"bogus": 1}'], "bogus"),
        (["--data-options", '{"classes": [0, 0]}'], "two different labels"),
        (["--n", "5000"], "n=5000 must lie in"),
    ],
)
def test_digits_options_are_refused_before_any_cell_runs(tmp_path, capsys, extra, words):
    out = tmp_path / "s.csv"
    argv = [
        "sweep",
        "--data",
        "digits",
        "--n",
        "20",
        "--methods",
        "uniform-svm",
        "--no-progress",
        "--jobs",
        "1",
        "--out",
        str(out),
        *extra,
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err
    assert not out.exists()


def test_mnist_without_a_readable_copy_is_refused_before_any_cell_runs(tmp_path, capsys):
    out = tmp_path / "s.csv"
    argv = [
        "sweep",
        "--data",
        "mnist",
        "--n",
        "20",
        "--methods",
        "uniform-svm",
        "--out",
        str(out),
        "--data-options",
        json.dumps({"path": str(tmp_path / "missing.npz")}),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "No MNIST file" in err
    assert not out.exists()


def test_digits_shape_comes_from_the_options_and_the_summary_line_counts(tmp_path, capsys):
    out = tmp_path / "s.csv"
    argv = [
        "sweep",
        "--data",
        "digits",
        "--n",
        "20",
        "30",
        "--methods",
        "uniform-svm",
        "--n-test",
        "50",
        "--no-progress",
        "--jobs",
        "1",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert "2 cells run (0 failed), 0 already done" in capsys.readouterr().out
    assert {(r["T"], r["d"]) for r in read_rows(out, FIELDS)} == {("4", "20")}
    assert main([*argv[:4], "20", "40", *argv[6:]]) == 0
    assert "1 cell run (0 failed), 1 already done" in capsys.readouterr().out


# -- local workers end with the command ------------------------------------------------------
def _children(pid):
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _alive(pids):
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _start_with_workers(out):
    argv = [
        sys.executable,
        "-m",
        "margin_solver",
        "sweep",
        "--n",
        "8",
        "--kappa",
        "1",
        "4",
        "--d",
        "20",
        "--seeds",
        "3000",
        "--methods",
        "uniform-svm",
        "--n-test",
        "20",
        "--jobs",
        "2",
        "--no-progress",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 20:
            return proc, _children(proc.pid)
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the sweep wrote fewer than 20 lines in 120 s")


def _wait_gone(pids, seconds=20.0):
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_workers_end_when_the_sweep_is_killed(tmp_path):
    proc, workers = _start_with_workers(tmp_path / "s.csv")
    assert workers  # the loky workers (and joblib's resource trackers)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    proc.stderr.close()
    assert _wait_gone(workers) == set()  # loky's own idle timeout would take minutes


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_sigterm_stops_the_sweep_like_ctrl_c_with_a_summary(tmp_path):
    out = tmp_path / "s.csv"
    proc, workers = _start_with_workers(out)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert _wait_gone(workers) == set()
    n_rows = len(read_rows(out, FIELDS))
    assert f"s.csv: interrupted after {n_rows} cells run (0 failed), 0 already done" in err
    assert "Traceback" not in err
    last = json.loads(sweeps.sidecar_path(out).read_text())["runs"][-1]
    assert (last["state"], last["n_run"]) == ("interrupted", n_rows)


def test_parallel_sweeps_start_with_the_largest_points():
    grid = SweepGrid(n=[8, 32, 16], d=[20, 40], kappa=[1.0], seeds=2, methods=["uniform-svm"])
    config = SweepConfig()
    points = sweeps.point_jobs([sweeps.CellJob(c, uniform_svm, config) for c in grid.cells()])
    ordered = sweeps.largest_first(points)
    sizes = [p.jobs[0].cell.n * p.jobs[0].cell.d for p in ordered]
    assert sizes == sorted(sizes, reverse=True) and len(ordered) == len(points) == 12
    assert [p.jobs[0].cell.seed for p in ordered[:2]] == [0, 1]  # ties keep the grid order
