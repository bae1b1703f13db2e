"""Real images as tokens: patching, the digits split with label noise, the MNIST reader."""

import gzip

import numpy as np
import pytest

from margin_solver.bench.realdata import (
    binary_train_test,
    digits_shape,
    digits_train_test,
    load_mnist,
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


def test_mnist_study_runs_on_a_local_file_and_needs_its_path(tmp_path):
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
    with pytest.raises(InvalidInputError, match="--mnist PATH"):
        run_study("mnist", tmp_path / "out2", "tiny", jobs=1)
