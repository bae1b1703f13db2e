"""The one ``verbose`` keyword of long-running public functions, and ``-v`` after the verb."""

from __future__ import annotations

import inspect
import logging
import subprocess
import sys

import pytest

import margin_solver
from margin_solver.core.data import PaperDistribution

LONG_RUNNING = ["solve_min_norm", "global_lower_bound", "gradient_descent", "check_conditions"]


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_verbose_is_a_keyword_with_default_false(name):
    param = inspect.signature(getattr(margin_solver, name)).parameters["verbose"]
    assert param.default is False and param.kind is param.KEYWORD_ONLY
    assert "verbose" in getattr(margin_solver, name).__doc__


def test_verbose_logs_to_the_callers_logging():
    train = PaperDistribution(d=100, snr=0.6, eta=0.1).sample(10, seed=1)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    root = logging.getLogger()
    root.addHandler(handler)  # the caller's logging: root at its default level WARNING
    try:
        margin_solver.gradient_descent(train)
        assert not [r for r in records if r.name.startswith("margin_solver")]
        margin_solver.gradient_descent(train, verbose=True)
    finally:
        root.removeHandler(handler)
    messages = [r.getMessage() for r in records if r.name.startswith("margin_solver")]
    assert any("gradient_descent finished in" in m for m in messages), messages
    assert logging.getLogger("margin_solver").level == logging.NOTSET  # restored


def test_verbose_without_logging_configured_writes_to_stderr():
    code = (
        "from margin_solver import PaperDistribution, solve_min_norm\n"
        "d = PaperDistribution(d=60, snr=0.6).sample(8, seed=0)\n"
        "solve_min_norm(d, R=1.0, search_starts=0)\n"
        "print('quiet')\n"
        "solve_min_norm(d, R=1.0, search_starts=0, verbose=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "quiet\n"
    assert out.stderr.count("margin_solver: solve_min_norm finished in") == 1
    assert "margin_solver: start zero" in out.stderr


def test_cli_accepts_v_after_the_verb(tmp_path):
    path = tmp_path / "d.npz"
    PaperDistribution(d=40, snr=0.5).sample(8, seed=0).save(path)
    for argv in (["-v", "gd", str(path)], ["gd", str(path), "-v"], ["gd", "-v", str(path)]):
        out = subprocess.run(
            [sys.executable, "-m", "margin_solver", *argv], capture_output=True, text=True
        )
        assert out.returncode == 0 and "gradient_descent: ran all 2 steps" in out.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "margin_solver", "gd", str(path)], capture_output=True, text=True
    )
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_failure_warnings_still_point_at_the_callers_line():
    import warnings

    import numpy as np

    X = np.ones((4, 2, 3))  # identical samples, opposite labels
    y = np.array([1.0, -1.0, 1.0, -1.0])
    for call in (
        lambda: margin_solver.gradient_descent(X, y, beta0=1e300, beta1=1e300),
        lambda: margin_solver.solve_min_norm(X, y, 1.0),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        mine = [w for w in caught if "status" in str(w.message)]
        assert mine and all(w.filename == __file__ for w in mine), [
            (w.filename, str(w.message)[:60]) for w in caught
        ]
