"""The append-only results log: one write per row, torn-line repair, keys, header checks."""

import multiprocessing
import os
import time

import pytest

from margin_solver.bench import resultlog
from margin_solver.bench.resultlog import ResultLog, canonical, read_rows
from margin_solver.core.validation import InvalidInputError

FIELDS = ["k", "x", "note"]


def test_each_row_is_one_write_followed_by_fsync(tmp_path, monkeypatch):
    calls = []
    real_write, real_fsync = os.write, os.fsync
    monkeypatch.setattr(
        resultlog.os, "write", lambda fd, b: calls.append(("write", bytes(b))) or real_write(fd, b)
    )
    monkeypatch.setattr(
        resultlog.os, "fsync", lambda fd: calls.append(("fsync",)) or real_fsync(fd)
    )
    with ResultLog(tmp_path / "r.csv", FIELDS, ["k"]) as log:
        calls.clear()
        log.append({"k": 1, "x": 0.25, "note": "a, b"})
        log.append({"k": 2, "x": float("nan")})
    assert [c[0] for c in calls] == ["write", "fsync", "write", "fsync"]
    assert calls[0][1] == b'1,0.25,"a, b"\n'
    assert calls[2][1] == b"2,,\n"
    assert read_rows(tmp_path / "r.csv", FIELDS) == [
        {"k": "1", "x": "0.25", "note": "a, b"},
        {"k": "2", "x": "", "note": ""},
    ]


def test_torn_last_line_is_dropped_on_open_and_ignored_by_readers(tmp_path):
    path = tmp_path / "r.csv"
    with ResultLog(path, FIELDS, ["k"]) as log:
        log.append({"k": 1, "x": 1.5})
    with open(path, "ab") as fh:
        fh.write(b"2,3.")  # a crash in the middle of a row
    assert [r["k"] for r in read_rows(path, FIELDS)] == ["1"]
    log = ResultLog(path, FIELDS, ["k"]).open()
    assert log.repaired_bytes == 4
    assert log.done == {("1",)}
    log.append({"k": 2, "x": 3.25})
    log.close()
    assert path.read_text() == "k,x,note\n1,1.5,\n2,3.25,\n"


def test_torn_header_is_rewritten(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"k,x,no")
    with ResultLog(path, FIELDS, ["k"]) as log:
        assert log.repaired_bytes == 6
        log.append({"k": 1})
    assert path.read_text() == "k,x,note\n1,,\n"


def test_duplicate_key_unknown_column_and_other_header_are_refused(tmp_path):
    path = tmp_path / "r.csv"
    with ResultLog(path, FIELDS, ["k"]) as log:
        log.append({"k": 1})
        with pytest.raises(InvalidInputError, match="already has a row"):
            log.append({"k": 1, "x": 2})
        with pytest.raises(InvalidInputError, match="unknown columns"):
            log.append({"k": 3, "y": 2})
    with pytest.raises(InvalidInputError, match="has columns"):
        ResultLog(path, ["k", "other"], ["k"]).open()


def test_canonical_text_round_trips_floats():
    import numpy as np

    for value in [0.1, 1 / 3, 2.0, 1e-300, np.float64(0.7), np.sqrt(4.0 / 7)]:
        assert float(canonical(value)) == value
        assert canonical(canonical(value)) == canonical(value)
    assert canonical(np.int64(5)) == "5"
    assert canonical(None) == canonical(float("nan")) == ""


# -- two writers: one discards rows (replacing the file) while the other opens it -----------
def _interleave_at(monkeypatch, name, act):
    """Run ``act()`` once, right after the next call of ``os.<name>`` in the results log."""
    real = getattr(os, name)
    pending = [act]

    def patched(*args, **kwargs):
        out = real(*args, **kwargs)
        if pending:
            pending.pop()()  # popped first: ``act`` itself calls os.open and os.fstat
        return out

    monkeypatch.setattr(resultlog.os, name, patched)


@pytest.mark.parametrize("step", ["open", "fstat"])
def test_a_writer_opening_while_another_replaces_the_log_loses_no_row(tmp_path, monkeypatch, step):
    """Writer A retries a failed row (``discard`` renames a new file over the path, then
    releases the old file's lock) while writer B is between its open and its lock: B must lock
    the file the path names now, or its row goes to a file no longer in the directory."""
    path = tmp_path / "r.csv"
    first = ResultLog(path, FIELDS, ["k"]).open()
    first.extend([{"k": 1, "note": "kept"}, {"k": 2, "note": "failed"}])

    def retry_and_finish():
        first.discard([("2",)])
        first.append({"k": 2, "note": "retried"})
        first.close()

    _interleave_at(monkeypatch, step, retry_and_finish)
    with ResultLog(path, FIELDS, ["k"]) as second:
        assert second.done == {("1",), ("2",)}
        second.append({"k": 3, "note": "second writer"})
    monkeypatch.undo()
    notes = [row["note"] for row in read_rows(path, FIELDS)]
    assert notes == ["kept", "retried", "second writer"]


def test_a_writer_opening_while_another_holds_the_lock_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "r.csv"
    with ResultLog(path, FIELDS, ["k"]) as first:
        first.append({"k": 1})
        _interleave_at(monkeypatch, "open", lambda: first.discard([("1",)]))
        with pytest.raises(InvalidInputError, match="being written by another run"):
            ResultLog(path, FIELDS, ["k"]).open()
    monkeypatch.undo()
    assert read_rows(path, FIELDS) == []


def test_a_log_replaced_on_every_open_is_refused_not_looped_on(tmp_path, monkeypatch):
    path = tmp_path / "r.csv"
    ResultLog(path, FIELDS, ["k"]).open().close()
    real_open = os.open

    def replacing_open(file, *args, **kwargs):
        fd = real_open(file, *args, **kwargs)
        if str(file) == str(path):
            os.replace(path, tmp_path / "old.csv")
            path.write_text("k,x,note\n")
        return fd

    monkeypatch.setattr(resultlog.os, "open", replacing_open)
    with pytest.raises(InvalidInputError, match="was replaced 100 times while being opened"):
        ResultLog(path, FIELDS, ["k"]).open()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_forked_child_does_not_keep_the_lock(tmp_path):
    # Sweep workers are forked while the sweep holds its log's lock; a copy of the locked
    # descriptor in a child would keep the lock after the sweep released it.
    path = tmp_path / "r.csv"
    log = ResultLog(path, ["a", "b"], ["a"]).open()
    context = multiprocessing.get_context("fork")
    running = context.Event()

    def wait_in_child():
        running.set()
        time.sleep(30)

    child = context.Process(target=wait_in_child)
    child.start()
    assert running.wait(30)  # the child runs: what it does at the fork is done
    try:
        log.close()
        with ResultLog(path, ["a", "b"], ["a"]) as again:  # the lock is free
            again.append({"a": 1, "b": 2})
    finally:
        child.kill()
        child.join()
    assert path.read_text() == "a,b\n1,2\n"
