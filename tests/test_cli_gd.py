"""The ``gd`` verb through margin_solver.cli.main, and its trajectory figure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.image import imread
from PIL import Image

from margin_solver.bench.plots import plot_gd_trajectory
from margin_solver.cli import main
from margin_solver.gd.endpoints import gradient_descent


@pytest.fixture(scope="module")
def files(tmp_path_factory, paper_split, saved_split):
    train, test = paper_split(30, 100, seed=5, kappa=4, d=3000, T=2, eta=0.15)
    return *saved_split(tmp_path_factory.mktemp("gd"), train, test), train


def test_two_step_with_json_and_plot(files, tmp_path, capsys):
    train_path, test_path, train = files
    out, png = tmp_path / "gd.json", tmp_path / "gd.png"
    code = main(
        ["gd", str(train_path), "--test", str(test_path), "--json", str(out), "--plot", str(png)]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert text.startswith("completed: ran all 2 steps")
    assert "test err (clean)" in text and "attn noisy" in text
    data = json.loads(out.read_text())
    assert data["status"] == "completed" and data["steps"] == 2
    assert data["trajectory"]["step"] == [0, 1, 2]
    np.testing.assert_allclose(data["v"], gradient_descent(train).v)
    image = imread(png)
    assert image.shape[0] > 400 and image.shape[1] > 600


def test_constant_schedule_options(files, tmp_path, capsys):
    train_path, _, _ = files
    out = tmp_path / "c.json"
    code = main(
        [
            "gd",
            str(train_path),
            "--schedule",
            "constant",
            "--steps",
            "40",
            "--record-every",
            "10",
            "--weight-decay",
            "0.01",
            "--R",
            "0.5",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["trajectory"]["step"] == [0, 10, 20, 30, 40]
    assert data["weight_decay"] == 0.01 and data["norm_p"] <= 0.5 + 1e-12
    assert "test err" not in capsys.readouterr().out  # no test set: column left out


def test_divergence_exits_nonzero(files, capsys):
    train_path, _, _ = files
    assert (
        main(["gd", str(train_path), "--beta0", "1e300", "--beta1", "1e300"]) == 3
    )  # EXIT_NO_ANSWER: diverged
    assert capsys.readouterr().out.startswith("diverged:")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--steps", "5"], "--steps does not apply"),
        (["--schedule", "constant", "--steps", "0"], "steps must be an integer >= 1"),
        (["--weight-decay", "-1"], "weight_decay must be"),
    ],
)
def test_errors_are_one_line(files, capsys, argv, match):
    train_path, _, _ = files
    assert main(["gd", str(train_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("margin-solver gd: error:") and match in err and "\n" not in err


def test_missing_file(tmp_path, capsys):
    assert main(["gd", str(tmp_path / "none.npz")]) == 2
    assert "No dataset file" in capsys.readouterr().err


def test_plot_function_without_test_columns(files, tmp_path):
    _, _, train = files
    res = gradient_descent(train, schedule="constant", steps=20, record_every=5)
    path = plot_gd_trajectory(res.trajectory, tmp_path / "sub" / "t.png", title="test figure")
    assert path.is_file() and imread(path).ndim == 3
    assert not list((tmp_path / "sub").glob("*.tmp*"))
    with Image.open(path) as img:  # print resolution, like the study figures
        assert img.info["dpi"][0] == pytest.approx(200, abs=1)
