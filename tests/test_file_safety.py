"""Issue 11, "nothing lost, nothing overwritten": the results log and every output file.

Each test is a reproducer from the issue: the sidecar written over the log, a foreign file
truncated before its header was read, two writers doubling the rows, a device or a symbolic
link replaced by a file, files readable by their owner only; and a closed pipe (``| head``).
"""

import json
import os
import re
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest
from badfiles import device_node

from margin_solver.bench.resultlog import ResultLog, read_rows
from margin_solver.bench.sweeps import FIELDS, KEY_FIELDS, SweepConfig, SweepGrid, run_sweep
from margin_solver.cli import EXIT_BROKEN_PIPE, EXIT_INPUT_ERROR, main
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import atomic_write_text, file_mode, write_json
from margin_solver.core.validation import InvalidInputError

SWEEP = [
    "sweep",
    "--n",
    "8",
    "--d",
    "20",
    "--kappa",
    "1",
    "--methods",
    "uniform-svm",
    "--n-test",
    "10",
    "--jobs",
    "1",
    "--no-progress",
]
GRID = SweepGrid(n=[8], d=[20], kappa=[1.0, 2.0], seeds=2, methods=["uniform-svm"])
CONFIG = SweepConfig(n_test=10)


@pytest.fixture()
def data_file(tmp_path):
    return PaperDistribution(d=6, T=2, snr=0.8, eta=0.1).sample(6, seed=0).save(tmp_path / "d.npz")


def _one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("margin-solver") and "Traceback" not in err[0]
    return err[0]


# --- the sidecar can never be the log ------------------------------------------------------
def test_sweep_out_json_is_refused_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main([*SWEEP, "--out", str(out)]) == EXIT_INPUT_ERROR
    assert "both the results log and its JSON sidecar" in _one_error_line(capsys)
    assert not out.exists()


def test_sweep_refuses_a_foreign_json_where_its_sidecar_goes(tmp_path, capsys):
    side = tmp_path / "r.json"
    side.write_text('["my own data"]\n')
    assert main([*SWEEP, "--out", str(tmp_path / "r.csv")]) == EXIT_INPUT_ERROR
    assert "is not a sweep's JSON sidecar" in _one_error_line(capsys)
    assert side.read_text() == '["my own data"]\n'
    assert not (tmp_path / "r.csv").exists()


# --- an existing file is validated before anything is written to it -----------------------
FOREIGN = {
    "npz": ("r.npz", None),
    "text without newline": ("r.csv", b"some notes, no final newline"),
    "text with lines": ("r.csv", b"line one\nline two"),
    "csv of another kind": ("r.csv", b"a,b\n1,2\n3,"),
}


@pytest.mark.parametrize("case", FOREIGN)
def test_a_foreign_file_is_refused_and_left_byte_for_byte(case, tmp_path, capsys):
    name, content = FOREIGN[case]
    out = tmp_path / name
    if content is None:
        np.savez(out, a=np.arange(5))
        content = out.read_bytes()
    else:
        out.write_bytes(content)
    assert main([*SWEEP, "--out", str(out)]) == EXIT_INPUT_ERROR
    assert "is not this results log" in _one_error_line(capsys)
    assert out.read_bytes() == content
    assert not out.with_suffix(".json").exists()


def test_a_symlink_as_log_is_refused_and_its_target_untouched(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    link = tmp_path / "r.csv"
    link.symlink_to(target)
    assert main([*SWEEP, "--out", str(link)]) == EXIT_INPUT_ERROR
    assert "is a symbolic link" in _one_error_line(capsys)
    assert link.is_symlink() and target.read_text() == "keep me"


def test_a_torn_header_is_still_repaired(tmp_path):
    """A run killed while creating the file left a prefix of the header: that is ours."""
    out = tmp_path / "r.csv"
    out.write_text(",".join(FIELDS)[:7])
    assert run_sweep(GRID, out, CONFIG, jobs=1).n_run == 4
    assert len(read_rows(out, FIELDS)) == 4


# --- concurrent writers ----------------------------------------------------------------------
def test_a_second_writer_is_refused_while_the_first_holds_the_log(tmp_path):
    path = tmp_path / "r.csv"
    with ResultLog(path, ["k"], ["k"]) as first:
        first.append({"k": 1})
        with pytest.raises(InvalidInputError, match="being written by another run"):
            ResultLog(path, ["k"], ["k"]).open()
        first.append({"k": 2})
    with ResultLog(path, ["k"], ["k"]) as again:  # the lock goes with the first writer
        assert again.done == {("1",), ("2",)}


def test_two_sweeps_at_once_give_each_cell_once(tmp_path):
    """The issue's reproducer: two sweeps with the same --out at once (144 rows for 72 cells
    on main). One runs, the other is refused or finds the cells done; never a duplicate."""
    out = tmp_path / "r.csv"
    grid = SweepGrid(
        n=[8], d=[20], kappa=[0.5, 1.0, 2.0], eta=[0.0, 0.1], seeds=6, methods=["uniform-svm"]
    )
    n_cells = len(grid.cells())
    outcomes = []

    def run():
        try:
            outcomes.append(run_sweep(grid, out, CONFIG, jobs=1).n_run)
        except InvalidInputError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = read_rows(out, FIELDS)
    keys = [tuple(r[k] for k in KEY_FIELDS) for r in rows]
    assert len(keys) == len(set(keys)) == n_cells
    runs = [o for o in outcomes if isinstance(o, int)]
    refused = [o for o in outcomes if isinstance(o, str)]
    assert sum(runs) == n_cells
    assert all("being written by another run" in r for r in refused)


def test_two_sweep_processes_at_once_give_each_cell_once(tmp_path):
    """The same with two real processes, as a user would start them."""
    out = tmp_path / "r.csv"
    argv = [
        sys.executable,
        "-m",
        "margin_solver",
        *SWEEP,
        "--kappa",
        "0.5",
        "2",
        "4",
        "--seeds",
        "4",
        "--out",
        str(out),
    ]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    keys = [tuple(r[k] for k in KEY_FIELDS) for r in read_rows(out, FIELDS)]
    assert len(keys) == len(set(keys)) == 12  # the last --kappa wins: 3 kappas x 4 seeds
    for status, err in results:
        assert status == 0 or (status == EXIT_INPUT_ERROR and "being written by another run" in err)


# --- outputs go to regular files only --------------------------------------------------------
@pytest.mark.parametrize(
    ("verb", "option"), [("check", "--json"), ("gd", "--json"), ("gd", "--plot")]
)
def test_outputs_to_a_device_are_refused_and_the_device_stays(
    verb, option, data_file, tmp_path, capsys
):
    device = device_node(tmp_path / "device")
    before = os.lstat(device)
    assert main([verb, str(data_file), option, str(device)]) == EXIT_INPUT_ERROR
    assert re.search(
        r"device is a (character device|FIFO), not a regular file", _one_error_line(capsys)
    )
    after = os.lstat(device)
    assert not stat.S_ISREG(after.st_mode) and after.st_ino == before.st_ino


@pytest.mark.parametrize(
    ("verb", "option", "name"),
    [
        ("check", "--json", "c.json"),
        ("solve", "--json", "s.json"),
        ("gd", "--json", "g.json"),
        ("gd", "--plot", "g.png"),
    ],
)
def test_outputs_through_a_symlink_are_refused_before_any_work(
    verb, option, name, data_file, tmp_path, capsys
):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / name
    link.symlink_to(target)
    argv = [verb, str(data_file), option, str(link)] + (["--R", "1"] if verb == "solve" else [])
    assert main(argv) == EXIT_INPUT_ERROR
    assert "is a symbolic link, not a regular file" in _one_error_line(capsys)
    assert link.is_symlink() and target.read_text() == "keep me"
    assert capsys.readouterr().out == ""  # refused before the verb printed any result


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "r.csv"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError, match="FIFO"):
        ResultLog(fifo, ["k"], ["k"]).open()
    with pytest.raises(InvalidInputError, match="FIFO"):
        write_json(fifo, {"a": 1})
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --- permissions follow the umask --------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_output_files_get_the_permissions_the_umask_says(umask, tmp_path):
    old = os.umask(umask)
    try:
        assert file_mode() == 0o666 & ~umask
        atomic_write_text(tmp_path / "a.txt", "x")
        with ResultLog(tmp_path / "r.csv", ["k"], ["k"]) as log:
            log.append({"k": 1})
        write_json(tmp_path / "a.json", {"a": 1})
        atomic_write_text(tmp_path / "a.txt", "replaced")  # a rewrite, too
    finally:
        os.umask(old)
    for name in ("a.txt", "r.csv", "a.json"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o666 & ~umask, name


def test_sweep_outputs_are_group_readable_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        run_sweep(GRID, tmp_path / "r.csv", CONFIG, jobs=1)
    finally:
        os.umask(old)
    for name in ("r.csv", "r.json"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o644
    assert json.loads((tmp_path / "r.json").read_text())["package"] == "margin-solver"


# --- a closed pipe ends the command quietly -------------------------------------------------------
def _with_closed_stdout(argv):
    """Run the CLI with standard output a pipe whose reader is already gone (``| head``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "margin_solver", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


def test_a_closed_stdout_exits_quietly_with_141(data_file):
    proc = _with_closed_stdout(["check", str(data_file)])
    assert proc.returncode == EXIT_BROKEN_PIPE, proc.stderr
    assert proc.stderr == ""


@pytest.mark.parametrize("args", [["--help"], ["sweep", "--help"]])
def test_help_into_a_closed_pipe_is_quiet(args):
    """argparse drops help text it cannot write (and exits 0); nothing may reach stderr."""
    proc = _with_closed_stdout(args)
    assert proc.returncode in (0, EXIT_BROKEN_PIPE) and proc.stderr == ""


# -- replacing a file only against the proof that this package wrote it -----------------------
@pytest.mark.parametrize(
    ("verb", "option", "name", "content"),
    [
        # a figure of the user's own that mentions the package (a substring used to suffice)
        ("gd", "--plot", "mine.svg", b"<svg><!-- made with margin-solver --></svg>\n"),
        ("gd", "--plot", "mine.png", b"\x89PNG margin-solver 0.1.0 (Matplotlib)"),
        ("gd", "--plot", "mine.pdf", b"%PDF-1.4 /Creator (margin-solver 0.1.0)"),
        # a JSON with a copied provenance field
        ("solve", "--json", "mine.json", b'{"written_by": "margin-solver 0.1.0", "v": [1]}\n'),
    ],
)
def test_a_file_mentioning_the_package_is_not_replaced(
    data_file, tmp_path, capsys, verb, option, name, content
):
    target = tmp_path / name
    target.write_bytes(content)
    extra = ["--R", "1", "--no-progress"] if verb == "solve" else []
    assert main([verb, str(data_file), option, str(target), *extra]) == EXIT_INPUT_ERROR
    assert "was not written by margin-solver" in capsys.readouterr().err
    assert target.read_bytes() == content


def test_an_output_changed_since_it_was_written_is_not_replaced(data_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    solve = ["solve", str(data_file), "--R", "1", "--no-progress", "--json", str(out)]
    assert main(solve) != EXIT_INPUT_ERROR
    assert main(solve) != EXIT_INPUT_ERROR  # its own output: replaced
    edited = out.read_text().replace("margin-solver", "margin-solver (my notes)")
    out.write_text(edited)
    capsys.readouterr()
    assert main(solve) == EXIT_INPUT_ERROR
    assert "or was changed since" in capsys.readouterr().err
    assert out.read_text() == edited


def test_a_sweep_sidecar_is_not_replaced_by_a_result_and_the_sweep_resumes(
    data_file, tmp_path, capsys
):
    out = tmp_path / "s.csv"
    assert main([*SWEEP, "--out", str(out)]) == 0
    sidecar = out.with_suffix(".json")
    before = sidecar.read_bytes()
    solve = ["solve", str(data_file), "--R", "1", "--no-progress", "--json", str(sidecar)]
    capsys.readouterr()
    assert main(solve) == EXIT_INPUT_ERROR
    assert "was not written by margin-solver as a result" in capsys.readouterr().err
    assert sidecar.read_bytes() == before
    assert main([*SWEEP, "--out", str(out)]) == 0  # resumes: nothing left to run
    assert "0 cells run" in capsys.readouterr().out
