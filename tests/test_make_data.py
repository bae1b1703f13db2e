"""``margin-solver make-data``: the files it writes are the library's samples, and bad
options or existing outputs end in one line and exit 2 with nothing written."""

from __future__ import annotations

import math

import numpy as np
import pytest

from margin_solver.bench.realdata import digits_train_test
from margin_solver.cli import main
from margin_solver.core.data import PaperDistribution, load_dataset


def test_paper_files_are_sample_train_test_of_the_same_seed(tmp_path, capsys):
    argv = [
        "make-data",
        "paper",
        "--n",
        "30",
        "--d",
        "120",
        "--T",
        "3",
        "--kappa",
        "4",
        "--eta",
        "0.2",
        "--sigma",
        "2",
        "--signal",
        "random",
        "--signal-position",
        "random",
        "--noise",
        "isotropic",
        "--signal-seed",
        "7",
        "--seed",
        "11",
        "--train",
        str(tmp_path / "tr.npz"),
        "--test",
        str(tmp_path / "te.npz"),
        "--n-test",
        "50",
    ]
    assert main(argv) == 0
    dist = PaperDistribution(
        d=120,
        T=3,
        snr=math.sqrt(4 / 30),
        eta=0.2,
        sigma=2.0,
        signal="random",
        signal_position="random",
        noise="isotropic",
        signal_seed=7,
    )
    train, test = dist.sample_train_test(30, 50, seed=11)
    for path, ref in (("tr.npz", train), ("te.npz", test)):
        got = load_dataset(tmp_path / path)
        np.testing.assert_array_equal(got.X, ref.X)
        np.testing.assert_array_equal(got.y, ref.y)
        np.testing.assert_array_equal(got.signal_index, ref.signal_index)
    assert got.params["signal"] == "random"
    out = capsys.readouterr().out
    assert out.count("wrote ") == 2 and "kappa=4" in out


def test_a_name_without_npz_is_a_dataset_directory(tmp_path):
    assert (
        main(
            [
                "make-data",
                "paper",
                "--n",
                "6",
                "--d",
                "30",
                "--snr",
                "0.5",
                "--train",
                str(tmp_path / "big"),
            ]
        )
        == 0
    )
    on_disk = load_dataset(tmp_path / "big")
    assert type(on_disk.X).__name__ == "memmap"
    ref = PaperDistribution(d=30, snr=0.5).sample(6, np.random.SeedSequence(0).spawn(2)[0])
    np.testing.assert_array_equal(on_disk.X, ref.X)


def test_digits_files_are_the_benchmarks_digits(tmp_path):
    argv = [
        "make-data",
        "digits",
        "--n",
        "60",
        "--classes",
        "1",
        "7",
        "--patch",
        "2",
        "--no-position",
        "--eta",
        "0",
        "--seed",
        "3",
        "--train",
        str(tmp_path / "a.npz"),
        "--test",
        str(tmp_path / "b.npz"),
    ]
    assert main(argv) == 0
    s_train, s_test = np.random.SeedSequence(3).spawn(2)
    train, test = digits_train_test(
        60, 0.0, s_train, s_test, classes=(1, 7), patch=2, position=False
    )
    got = load_dataset(tmp_path / "a.npz")
    assert got.X.shape == (60, 16, 4)
    np.testing.assert_array_equal(got.X, train.X)
    np.testing.assert_array_equal(load_dataset(tmp_path / "b.npz").y, test.y)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["paper", "--n", "5", "--snr", "1"], "source 'paper' needs --d"),
        (
            ["paper", "--n", "5", "--d", "9", "--snr", "1", "--kappa", "2"],
            "exactly one of --snr, --kappa, --rho",
        ),
        (["digits", "--n", "5", "--d", "9"], "--d does not apply to source 'digits'"),
        (["paper", "--n", "5", "--d", "9", "--snr", "1", "--patch", "2"], "--patch does not apply"),
        (["mnist", "--n", "5", "--mnist", "no-such-dir"], "No train-images-idx3-ubyte[.gz]"),
        (["paper", "--n", "5", "--d", "9", "--snr", "1", "--eta", "0.6"], "eta must lie in"),
        (["paper", "--n", "0", "--d", "9", "--snr", "1"], "--n must be an integer >= 1"),
        (["paper", "--n", "5", "--d", "9", "--snr", "1", "--n-test", "4"], "--n-test needs --test"),
        (["digits", "--n", "5000"], "must lie in [2, "),
        (["paper", "--n", "5", "--d", "9", "--snr", "1", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_options_one_line_exit_2_nothing_written(tmp_path, capsys, extra, message):
    out = tmp_path / "x.npz"
    with pytest.raises(SystemExit) if "--bogus" in extra else _no_raise() as exc:
        status = main(["make-data", *extra, "--train", str(out)])
    status = exc.value.code if "--bogus" in extra else status
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1
    assert not out.exists()


def test_existing_outputs_are_never_overwritten(tmp_path, capsys):
    keep = tmp_path / "test.npz"
    keep.write_bytes(b"my data")
    argv = [
        "make-data",
        "paper",
        "--n",
        "5",
        "--d",
        "9",
        "--snr",
        "1",
        "--train",
        str(tmp_path / "train.npz"),
        "--test",
        str(keep),
    ]
    assert main(argv) == 2
    assert "test.npz exists; make-data never overwrites" in capsys.readouterr().err
    assert keep.read_bytes() == b"my data" and not (tmp_path / "train.npz").exists()
    same = [
        "make-data",
        "paper",
        "--n",
        "5",
        "--d",
        "9",
        "--snr",
        "1",
        "--train",
        str(tmp_path / "s.npz"),
        "--test",
        str(tmp_path / "s.npz"),
    ]
    assert main(same) == 2 and "same path" in capsys.readouterr().err


class _no_raise:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
