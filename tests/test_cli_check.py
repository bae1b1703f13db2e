"""``margin-solver check``: table on stdout, JSON on request, one-line errors with exit 2."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from margin_solver.cli import main

D = 1600


@pytest.fixture(scope="module")
def files(tmp_path_factory, paper_split, saved_split):
    root = tmp_path_factory.mktemp("check")
    # d = n^2: inside the checker's calibrated range (d / n^2 = 1-100)
    saved_split(root, *paper_split(40, 200, seed=3, d=D, snr=0.45, eta=0.1))
    v = np.zeros(D)
    v[0], v[1] = 1.0, -1.0
    (root / "sol.json").write_text(json.dumps({"v": v.tolist(), "p": [0.0] * D}))
    (root / "short.json").write_text(json.dumps({"v": [0.0] * 30, "p": [0.0] * D}))
    (root / "broken.json").write_text('{"v": [1, 2')
    (root / "list.json").write_text("[1, 2, 3]")
    (root / "junk.npz").write_bytes(b"not an npz archive")
    np.savez(root / "nox.npz", y=np.ones(3))
    return root


def test_check_prints_table_and_writes_json(files, capsys):
    out_json = files / "report.json"
    status = main(
        [
            "check",
            str(files / "train.npz"),
            "--test",
            str(files / "test.npz"),
            "--solution",
            str(files / "sol.json"),
            "--json",
            str(out_json),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert (
        "snr_benign" in out
        and "predicted regime for the min-norm interpolator at large R" in out
        and "verdict:" in out
    )
    report = json.loads(out_json.read_text())
    assert report["predicted_regime"] == "benign"
    assert (
        report["observed"]["interpolates"] is False
    )  # v = e1 - e2 reads the signal only: noisy samples stay misfit
    assert report["observed"]["train"]["error_clean"] == 0.0


def test_check_exit_zero_whatever_the_verdict(files, capsys):
    status = main(["check", str(files / "train.npz"), "--constant", "kappa_benign=100"])
    assert status == 0
    assert "(hard token selection): outside the theory" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["missing.npz"], "No dataset file"),
        (["junk.npz"], "junk.npz is not an .npz archive"),
        (["nox.npz"], "lacks the array"),
        (["train.npz", "--solution", "short.json"], r"v of shape \(1600,\)"),
        (["train.npz", "--solution", "broken.json"], "not valid JSON"),
        (["train.npz", "--solution", "list.json"], "must hold a JSON object"),
        (["train.npz", "--solution", "nothere.json"], "No solution file"),
        (["train.npz", "--test", "missing.npz"], "No dataset file"),
        (["train.npz", "--constant", "bogus=1"], "--constant expects NAME=VALUE"),
        (["train.npz", "--constant", "T_max=many"], "needs an integer"),
    ],
)
def test_check_bad_input_is_one_line_and_exit_2(files, capsys, args, pattern):
    resolved = [str(files / a) if a.endswith((".npz", ".json")) else a for a in args]
    status = main(["check", *resolved])
    captured = capsys.readouterr()
    assert status == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("margin-solver check: error:")
    assert re.search(pattern, lines[0])
    assert captured.out == ""
