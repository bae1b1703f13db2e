"""A sweep killed for real (SIGKILL, twice) and re-run: no corrupt file, no lost or repeated row.

``tests/test_sweeps.py`` simulates an interruption in-process (a KeyboardInterrupt and a
hand-cut line); here a ``margin-solver sweep`` subprocess is killed with SIGKILL while it
appends rows, so nothing of the process (no ``finally``, no flush) runs after the signal.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from margin_solver.bench.resultlog import read_rows
from margin_solver.bench.sweeps import (
    FIELDS,
    KEY_FIELDS,
    SweepConfig,
    SweepGrid,
    run_sweep,
    sidecar_path,
)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

# x 2 kappas = 600 cells: seconds with one worker; both kills fall within the first kappa's
# seeds (about 100 and 200 rows), as the check of the rows against a fresh run assumes
N_SEEDS = 300
KAPPAS = (1.0, 4.0)
ARGS = [
    "--n",
    "8",
    "--kappa",
    *map(str, KAPPAS),
    "--d",
    "20",
    "--methods",
    "uniform-svm",
    "--n-test",
    "20",
    "--sweep-seed",
    "3",
    "--jobs",
    "1",
    "--no-progress",
]


def _start(out):
    argv = [
        sys.executable,
        "-m",
        "margin_solver",
        "sweep",
        *ARGS,
        "--seeds",
        str(N_SEEDS),
        "--out",
        str(out),
    ]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_after(proc, out, n_lines, timeout=60.0):
    """SIGKILL ``proc`` once ``out`` holds at least ``n_lines`` lines; return the file's bytes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= n_lines:
            break
        if proc.poll() is not None:
            pytest.fail(f"sweep ended before the kill: {proc.stderr.read().decode()}")
        time.sleep(0.02)
    else:
        pytest.fail(f"fewer than {n_lines} lines after {timeout} s")
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    proc.stderr.close()
    return out.read_bytes()


def _complete_lines(data):
    """The lines ending in a newline (a torn tail, if any, excluded)."""
    return data[: data.rfind(b"\n") + 1].splitlines(keepends=True)


def _key(row):
    return tuple(row[k] for k in KEY_FIELDS)


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_keeps_every_row_once(tmp_path):
    out = tmp_path / "sweep.csv"
    first = _kill_after(_start(out), out, 100)
    rows = read_rows(out, FIELDS)  # every complete line parses, header included
    assert len(rows) >= 99 and all(r["status"] == "optimal" for r in rows)
    before_1 = _complete_lines(first)

    second = _kill_after(_start(out), out, len(before_1) + 100)
    before_2 = _complete_lines(second)
    assert before_2[: len(before_1)] == before_1  # the resume appended, never rewrote

    torn = len(second) - len(b"".join(before_2))
    if torn == 0:  # the kill fell between two rows: cut the last as a kill inside its write would
        last = before_2.pop()
        torn = len(last) // 2
        out.write_bytes(b"".join(before_2) + last[:torn])
    assert len(read_rows(out, FIELDS)) == len(before_2) - 1  # readers skip the torn tail

    final = _start(out)
    assert final.wait(timeout=120) == 0, final.stderr.read().decode()
    final.stderr.close()
    data = out.read_bytes()
    assert data.endswith(b"\n")
    assert _complete_lines(data)[: len(before_2)] == before_2  # earlier rows byte-identical

    rows = read_rows(out, FIELDS)
    keys = [_key(r) for r in rows]
    grid = SweepGrid(n=[8], d=[20], kappa=list(KAPPAS), seeds=N_SEEDS, methods=["uniform-svm"])
    expected = {c.key() for c in grid.cells()}
    assert len(keys) == len(set(keys)) == len(expected) == 2 * N_SEEDS
    assert set(keys) == expected

    runs = json.loads(sidecar_path(out).read_text())["runs"]
    # SIGKILL leaves no chance to mark a run interrupted: it stays "running" in the history.
    assert [r["state"] for r in runs] == ["running", "running", "complete"]
    assert runs[1]["n_skipped"] == len(before_1) - 1
    assert runs[2]["n_skipped"] == len(before_2) - 1
    assert runs[2]["repaired_torn_bytes"] == torn
    assert runs[2]["n_run"] == 2 * N_SEEDS - (len(before_2) - 1)

    # Rows computed before, between and after the kills equal an uninterrupted run's. Row r
    # (after the header) is seed r - 1 of the first kappa; the second kappa runs last.
    last_1, last_2 = len(before_1) - 2, len(before_2) - 2  # the last seeds before each kill
    assert last_2 + 1 < N_SEEDS  # the second kill fell within the first kappa's seeds
    sample = sorted({0, last_1, last_1 + 1, last_2, last_2 + 1, N_SEEDS - 1})
    ref = tmp_path / "ref.csv"
    sub = SweepGrid(n=[8], d=[20], kappa=list(KAPPAS), seeds=sample, methods=["uniform-svm"])
    run_sweep(sub, ref, SweepConfig(sweep_seed=3, n_test=20), jobs=1)
    by_key = {_key(r): r for r in rows}
    for row in read_rows(ref, FIELDS):
        got = dict(by_key[_key(row)])
        got.pop("seconds"), row.pop("seconds")
        assert got == row
