"""The paper's data model, the :class:`Dataset` container and its ``.npz`` file format.

Data model (docs/theory.md, "Data distribution"; Magen et al., arXiv:2410.07746, as
described in the authors' reply to reviewers): a clean label ``y~`` uniform on {-1, +1}; one signal
token ``mu_{y~}`` (two orthogonal vectors of norm ``rho``); ``T - 1`` noise tokens drawn
i.i.d. from ``N(0, sigma^2 (I - P))`` with ``P`` the projection on the signal span; the
observed label flipped with probability ``eta``. ``SNR = rho / (sigma sqrt(d))`` and
``kappa = n SNR^2``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from margin_solver.core.fileio import atomic_write
from margin_solver.core.ooc import check_disk_tokens, is_on_disk
from margin_solver.core.validation import (
    MAX_MAGNITUDE,
    InvalidInputError,
    check_int,
    check_memory,
    check_min_samples,
    check_positive,
    check_seed,
    check_tokens,
    encode_labels,
    parse_json_object,
)

SeedLike = int | np.random.SeedSequence | None

SIGNAL_KINDS = ("orthogonal", "antipodal", "random")
SIGNAL_POSITIONS = ("first", "random")
NOISE_KINDS = ("projected", "isotropic")


@dataclass(frozen=True)
class PaperDistribution:
    """The signal-plus-noise token distribution of the paper.

    Parameters
    ----------
    d : int
        Token dimension.
    T : int, default=2
        Tokens per sample: one signal token and ``T - 1`` noise tokens.
    rho : float, optional
        Signal norm ``||mu_+|| = ||mu_-||``. Give exactly one of ``rho`` and ``snr``.
    snr : float, optional
        Signal-to-noise ratio ``rho / (sigma sqrt(d))``; sets ``rho``.
    eta : float, default=0.1
        Label-flip probability, in [0, 1/2).
    sigma : float, default=1.0
        Noise scale per coordinate.
    signal : {"orthogonal", "antipodal", "random"}, default="orthogonal"
        ``"orthogonal"``: ``mu_+ = rho e_1``, ``mu_- = rho e_2``; ``"antipodal"``:
        ``mu_- = -mu_+ = -rho e_1``; ``"random"``: a random orthonormal pair (times
        ``rho``) drawn from ``signal_seed``.
    signal_position : {"first", "random"}, default="first"
        Where the signal token stands; metrics always use the stored signal index.
    noise : {"projected", "isotropic"}, default="projected"
        ``"projected"`` removes the signal span from the noise (the paper's model).
    signal_seed : int, default=0
        Seed of the random signal pair (only for ``signal="random"``); train and
        test sets drawn from one distribution share it.

    Examples
    --------
    >>> dist = PaperDistribution(d=200, T=2, snr=0.3, eta=0.1)
    >>> train, test = dist.sample_train_test(20, 100, seed=0)
    >>> train.X.shape, round(dist.kappa(20), 3)
    ((20, 2, 200), 1.8)
    """

    d: int
    T: int = 2
    rho: float | None = None
    snr: float | None = None
    eta: float = 0.1
    sigma: float = 1.0
    signal: Literal["orthogonal", "antipodal", "random"] = "orthogonal"
    signal_position: Literal["first", "random"] = "first"
    noise: Literal["projected", "isotropic"] = "projected"
    signal_seed: int = 0

    def __post_init__(self) -> None:
        check_int(self.d, "d", 1)
        check_int(self.T, "T", 1)
        check_positive(self.sigma, "sigma")
        if (self.rho is None) == (self.snr is None):
            raise InvalidInputError("Give exactly one of rho and snr.")
        for name in ("rho", "snr"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= _real(value, name) < math.inf:
                raise InvalidInputError(f"{name} must be a finite number >= 0, got {value!r}.")
        if not 0.0 <= _real(self.eta, "eta") < 0.5:
            raise InvalidInputError(f"eta must lie in [0, 0.5), got {self.eta!r}.")
        _check_choice(self.signal, "signal", SIGNAL_KINDS)
        _check_choice(self.signal_position, "signal_position", SIGNAL_POSITIONS)
        _check_choice(self.noise, "noise", NOISE_KINDS)
        if self.signal in ("orthogonal", "random") and self.d < 2:
            # Both draw two orthonormal directions, which need two dimensions.
            raise InvalidInputError(
                f"signal={self.signal!r} needs d >= 2; use signal='antipodal' when d = 1."
            )
        if not self.signal_norm <= MAX_MAGNITUDE:
            raise InvalidInputError(
                f"The signal norm rho = {self.signal_norm:.3g} exceeds {MAX_MAGNITUDE:g}, beyond "
                "which the solvers' float64 products overflow; lower rho, snr or sigma."
            )

    @property
    def signal_norm(self) -> float:
        """``rho``, derived from ``snr`` when that was given."""
        if self.rho is not None:
            return float(self.rho)
        # Python float products overflow to inf (no exception), which __post_init__ refuses.
        return float(self.snr) * float(self.sigma) * math.sqrt(self.d)

    @property
    def signal_to_noise(self) -> float:
        """``SNR = rho / (sigma sqrt(d))``."""
        if self.snr is not None:
            return float(self.snr)
        # Python floats: an extreme ratio is inf, not a numpy overflow warning.
        return float(self.rho) / (float(self.sigma) * math.sqrt(self.d))

    def kappa(self, n: int) -> float:
        """``kappa = n SNR^2``, the phase-diagram axis (benign/harmful threshold of order 1)."""
        return n * _square(self.signal_to_noise)

    def signal_vectors(self) -> np.ndarray:
        """The signal pair as rows ``[mu_+, mu_-]``, shape (2, d)."""
        rho = self.signal_norm
        mu = np.zeros((2, self.d))
        if self.signal == "orthogonal":
            mu[0, 0] = mu[1, 1] = rho
        elif self.signal == "antipodal":
            mu[0, 0], mu[1, 0] = rho, -rho
        else:
            g = np.random.default_rng(self.signal_seed).standard_normal((self.d, 2))
            q, _ = np.linalg.qr(g)
            mu = rho * q.T
        return mu

    def _signal_basis(self) -> np.ndarray:
        """Orthonormal basis (k, d) of span(mu_+, mu_-) used to project the noise."""
        if self.signal == "random":
            g = np.random.default_rng(self.signal_seed).standard_normal((self.d, 2))
            return np.linalg.qr(g)[0].T
        k = 2 if self.signal == "orthogonal" else 1
        return np.eye(k, self.d)

    def sample(self, n: int, seed: SeedLike = None) -> Dataset:
        """Draw ``n`` samples; O(n T d) time and memory.

        Parameters
        ----------
        n : int
            Number of samples (>= 1).
        seed : int or numpy.random.SeedSequence, optional
            Seeds independent child streams for labels, flips, signal positions and noise.

        Raises
        ------
        InvalidInputError
            The tokens (plus the finiteness check's mask) do not fit in the available
            memory; :func:`margin_solver.core.generate.write_paper_dataset` writes the same
            samples to disk in blocks.
        """
        check_int(n, "n", 1)
        check_memory(
            9 * n * self.T * self.d,  # float64 tokens and Dataset's boolean finiteness mask
            f"the tokens of {n} samples (n x T x d = {n} x {self.T} x {self.d} float64)",
            "write them to disk in blocks with margin_solver.core.generate.write_paper_dataset("
            "path, dist, n, seed), the same samples, and load that directory",
        )
        draw = self.draw_labels(n, seed)
        X = self.tokens(draw.noise_rng, draw.clean_y, draw.signal_index)
        return Dataset(
            X=X, y=draw.y, clean_y=draw.clean_y, signal_index=draw.signal_index, params=draw.params
        )

    def draw_labels(self, n: int, seed: SeedLike = None) -> LabelDraw:
        """Labels, flips and signal positions of ``n`` samples, and the stream of their noise.

        :meth:`sample` is ``draw_labels`` followed by :meth:`tokens` on all samples; drawing
        the tokens in consecutive blocks of samples from the same stream gives the same
        tokens bit for bit (:func:`margin_solver.core.generate.write_paper_dataset`).
        """
        check_int(n, "n", 1)
        ss = _seed_sequence(seed)
        r_label, r_flip, r_pos, r_noise = (np.random.default_rng(s) for s in ss.spawn(4))
        clean = r_label.choice(np.array([-1, 1]), size=n)
        flipped = r_flip.random(n) < self.eta
        y = np.where(flipped, -clean, clean)
        if self.signal_position == "first":
            pos = np.zeros(n, dtype=np.int64)
        else:
            pos = r_pos.integers(0, self.T, size=n)
        params = {**asdict(self), "rho": self.signal_norm, "snr": self.signal_to_noise}
        params.update(n=n, kappa=self.kappa(n), seed=_seed_repr(ss))
        return LabelDraw(y, clean, pos, r_noise, params)

    def tokens(
        self, rng: np.random.Generator, clean_y: np.ndarray, signal_index: np.ndarray
    ) -> np.ndarray:
        """Tokens (k, T, d) of the next ``k = len(clean_y)`` samples, drawing their noise from
        ``rng``."""
        k = len(clean_y)
        X = rng.standard_normal((k, self.T, self.d))
        X *= self.sigma
        if self.noise == "projected":
            basis = self._signal_basis()
            if self.signal == "random":
                X -= (X @ basis.T) @ basis
            else:
                X[:, :, : basis.shape[0]] = 0.0
        mu = self.signal_vectors()
        X[np.arange(k), signal_index] = mu[(clean_y < 0).astype(int)]
        return X

    def sample_train_test(
        self, n_train: int, n_test: int, seed: SeedLike = None
    ) -> tuple[Dataset, Dataset]:
        """Draw a training and a test set from separate random streams of one seed."""
        s_train, s_test = _seed_sequence(seed).spawn(2)
        return self.sample(n_train, s_train), self.sample(n_test, s_test)


class ProjectedSamples:
    """``n`` samples of a :class:`PaperDistribution` drawn in the directions a model reads.

    A model ``f(X; v, p)`` (any number of heads) sees a sample only through its tokens'
    projections ``X W^T`` on the rows of ``W = [v_1, p_1, v_2, p_2, ...]``. A signal token's
    projections are fixed (``mu W^T``); a noise token's are Gaussian with covariance
    ``sigma^2 W (I - P) W^T`` (``P`` the projection on the signal span for the paper's
    projected noise, 0 for isotropic noise). :meth:`project` draws them directly, so for every
    fixed ``W`` the projections, hence the outputs, errors and attention, have the same joint
    law as those of ``dist.sample(n, seed)``, at O(n T k) cost instead of O(n T d): a sweep's
    test set at d = 10^5 costs what it costs at d = 10.

    Labels, flips and signal positions are those of ``dist.sample(n, seed)``; the noise
    stream is restarted on each call, so a model evaluated twice gets the same numbers and
    two models are evaluated on the same standard normals.

    Parameters
    ----------
    dist : PaperDistribution
    n : int
        Samples (>= 2).
    seed : int or numpy.random.SeedSequence, optional

    Examples
    --------
    >>> dist = PaperDistribution(d=10_000, T=3, snr=0.05, eta=0.1)
    >>> test = ProjectedSamples(dist, 1000, seed=0)
    >>> W = np.zeros((2, 10_000)); W[0, 0] = W[1, 2] = 1.0
    >>> test.project(W).shape
    (1000, 3, 2)
    """

    def __init__(self, dist: PaperDistribution, n: int, seed: SeedLike):
        check_min_samples(check_int(n, "n", 1))
        self.dist = dist
        # spawning children changes a SeedSequence: sample() draws again from this copy
        self._seed = copy.deepcopy(_seed_sequence(seed))
        draw = dist.draw_labels(n, copy.deepcopy(self._seed))
        self.y, self.clean_y, self.signal_index = draw.y, draw.clean_y, draw.signal_index
        self._rng = draw.noise_rng

    @property
    def n(self) -> int:
        """Number of samples."""
        return len(self.y)

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.dist.d

    def sample(self) -> Dataset:
        """The same samples with their tokens, ``dist.sample(n, seed)``: for what needs more
        than a fixed model's outputs (a GD run's test error along its iterates); O(n T d)."""
        return self.dist.sample(self.n, copy.deepcopy(self._seed))

    def project(self, W: np.ndarray) -> np.ndarray:
        """The samples' tokens projected on the rows of ``W``: shape (n, T, k) for W (k, d).

        ``W`` is a finite float64 array (k, d) (**not validated**: the evaluation that
        builds it from checked v and p, :func:`margin_solver.analysis.metrics.evaluate`).
        """
        dist = self.dist
        # each direction scaled to largest entry 1 for the covariance, whose squares would
        # overflow or underflow for a huge or tiny v or p; scaled back after the draw
        scale = np.max(np.abs(W), axis=1)
        scale[scale == 0.0] = 1.0
        noise_dirs = W / scale[:, None]
        if dist.noise == "projected":
            basis = dist._signal_basis()
            noise_dirs -= (noise_dirs @ basis.T) @ basis
        root = _psd_cholesky(noise_dirs @ noise_dirs.T)
        rng = copy.deepcopy(self._rng)
        out = rng.standard_normal((self.n, dist.T, W.shape[0])) @ (dist.sigma * root.T)
        out *= scale
        mu = dist.signal_vectors() @ W.T
        out[np.arange(self.n), self.signal_index] = mu[(self.clean_y < 0).astype(int)]
        return out


def _psd_cholesky(C: np.ndarray) -> np.ndarray:
    """Lower-triangular ``L`` with ``L L^T = C`` for a positive semi-definite ``C`` (k, k).

    A direction that depends on the ones before it (``p = 0``, or ``p`` parallel to ``v``)
    leaves its column zero, where :func:`numpy.linalg.cholesky` would refuse the matrix. The
    factor is unique where ``C`` is definite, so the draw it maps does not depend on a
    LAPACK's choice of signs, as an eigendecomposition's would.
    """
    k = len(C)
    L = np.zeros_like(C)
    for j in range(k):
        rest = C[j, j] - L[j, :j] @ L[j, :j]
        # a dependent direction's remainder is rounding, a few ulps of its variance
        if rest <= 4 * k * np.finfo(float).eps * C[j, j]:
            continue
        L[j, j] = math.sqrt(rest)
        L[j + 1 :, j] = (C[j + 1 :, j] - L[j + 1 :, :j] @ L[j, :j]) / L[j, j]
    return L


@dataclass(frozen=True)
class LabelDraw:
    """What :meth:`PaperDistribution.draw_labels` draws: everything but the tokens."""

    y: np.ndarray
    clean_y: np.ndarray
    signal_index: np.ndarray
    noise_rng: np.random.Generator
    params: dict[str, Any]


class Dataset:
    """Samples of T tokens with labels of any two values and, when known, how they were made.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features)
        A :class:`numpy.memmap` (tokens on disk, :mod:`margin_solver.core.ondisk`) is kept as it
        is: its shape and dtype are checked here, its values by the blocked passes of
        :mod:`margin_solver.core.ooc` as they read them.
    y : array-like of shape (n_samples,)
        Observed labels: any two values (numbers, booleans or strings). They are held as
        signs in ``y`` (``classes[0]`` -> -1, ``classes[1]`` -> +1; ``labels`` gives the
        user's labels back).
    clean_y : array-like of shape (n_samples,), optional
        Labels before label noise, among the same two; ``flipped = y != clean_y``.
    signal_index : array-like of int, shape (n_samples,), optional
        Position of the signal token of each sample.
    params : dict, optional
        Generating parameters (JSON-serialisable), e.g. ``d, T, rho, snr, eta, kappa``.
    classes : array-like of shape (2,), optional
        The two labels in sign order (:func:`margin_solver.core.validation.encode_labels`;
        default: -1 and +1, 0 and 1, False and True, else the two labels sorted).

    Attributes
    ----------
    y, clean_y : ndarray of int64 in {-1, +1}
        The labels as signs (what the solvers use).
    classes : ndarray of shape (2,)
        The user's labels of -1 and +1.

    Raises
    ------
    InvalidInputError
        Wrong shapes or lengths, NaN/inf, more than two labels, n < 2, a signal
        index outside [0, T), params not a dict.
    """

    def __init__(
        self,
        X: Any,
        y: Any,
        clean_y: Any = None,
        signal_index: Any = None,
        params: dict[str, Any] | None = None,
        classes: Any = None,
    ):
        self.X = check_disk_tokens(X) if is_on_disk(X) else check_tokens(X)
        n, T, _ = self.X.shape
        check_min_samples(n)
        signs, self.classes = encode_labels(y, n, classes=classes)
        self.y = signs.astype(np.int64)
        self.clean_y = None
        if clean_y is not None:
            clean, _ = encode_labels(clean_y, n, "clean_y", classes=self.classes)
            self.clean_y = clean.astype(np.int64)
        self.signal_index = None if signal_index is None else _check_index(signal_index, n, T)
        if params is not None and not isinstance(params, Mapping):
            raise InvalidInputError(f"params must be a dict, got {type(params).__name__}.")
        self.params = dict(params) if params else {}

    @property
    def n(self) -> int:
        """Number of samples."""
        return self.X.shape[0]

    @property
    def T(self) -> int:
        """Tokens per sample."""
        return self.X.shape[1]

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.X.shape[2]

    def decode(self, signs: Any) -> np.ndarray:
        """The user's labels of ``signs`` (>= 0 is ``classes[1]``, as predictions are read)."""
        return self.classes[(np.asarray(signs) >= 0).astype(int)]

    @property
    def labels(self) -> np.ndarray:
        """The observed labels as the user gave them."""
        return self.decode(self.y)

    @property
    def flipped(self) -> np.ndarray | None:
        """Boolean mask of samples whose label was flipped, or None when unknown."""
        return None if self.clean_y is None else self.y != self.clean_y

    @property
    def snr(self) -> float | None:
        """Generating SNR when known (a real number in ``params["snr"]``; None otherwise)."""
        return _param_number(self.params.get("snr"))

    @property
    def kappa(self) -> float | None:
        """``n SNR^2`` for this sample size, when the SNR is known."""
        snr = self.snr
        return None if snr is None else self.n * _square(snr)

    @property
    def eta(self) -> float | None:
        """Generating label-noise rate when known (a real number in ``params["eta"]``)."""
        return _param_number(self.params.get("eta"))

    def subset(self, index: Any) -> Dataset:
        """The samples at ``index`` (indices or a boolean mask), keeping the metadata."""
        idx = np.arange(self.n)[index]
        return Dataset(
            self.X[idx],
            self.decode(self.y[idx]),
            None if self.clean_y is None else self.decode(self.clean_y[idx]),
            None if self.signal_index is None else self.signal_index[idx],
            {**self.params, "n": len(idx)},
            classes=self.classes,
        )

    def save(self, path: str | os.PathLike) -> Path:
        """Write to ``path`` (``.npz``) atomically; returns the path written.

        Raises
        ------
        InvalidInputError
            When ``params`` holds a value JSON cannot encode.
        """
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz")
        # the user's labels, and their sign order (so that one label alone reads back right)
        arrays: dict[str, np.ndarray] = {"X": self.X, "y": self.labels, "classes": self.classes}
        if self.clean_y is not None:
            arrays["clean_y"] = self.decode(self.clean_y)
        if self.signal_index is not None:
            arrays["signal_index"] = self.signal_index
        try:
            params_json = json.dumps(self.params, default=_json_default)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"Cannot save params as JSON: {exc}") from None
        arrays["params_json"] = np.array(params_json)
        atomic_write(path, lambda fh: np.savez(fh, **arrays))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Dataset:
        """Read a dataset written by :meth:`save` or any ``.npz`` with arrays ``X`` and ``y``,
        or a dataset directory with the tokens on disk (:mod:`margin_solver.core.ondisk`).

        Optional arrays ``clean_y``, ``signal_index`` and a JSON string ``params_json``
        are read when present. Pickled content is never loaded.

        Raises
        ------
        InvalidInputError
            The file is missing, not an ``.npz`` archive, lacks ``X`` or ``y``, holds
            object arrays, or its arrays fail validation.
        """
        path = Path(path)
        if path.is_dir():
            return cls._load_dir(path)
        if not path.is_file():
            raise InvalidInputError(f"No dataset file at {str(path)!r}.")
        if not (zipfile.is_zipfile(path) or _starts_with(path, NPY_MAGIC)):
            # np.load would fall back to unpickling and answer with advice to allow it
            what = (
                "a damaged or truncated .npz archive"
                if _starts_with(path, ZIP_MAGIC)
                else "not an .npz archive"
            )
            raise InvalidInputError(
                f"{path.name} is {what}; a dataset file is a zip of .npy arrays "
                "'X' and 'y', as written by numpy.savez or Dataset.save."
            )
        try:
            npz = np.load(path, allow_pickle=False)
            if not isinstance(npz, np.lib.npyio.NpzFile):  # a bare .npy file
                raise InvalidInputError(
                    f"{path.name} is a single .npy array, not an .npz archive with 'X' and 'y'."
                )
            with npz:
                arrays = _read_members(npz, path.name)
        except InvalidInputError:
            raise
        # NotImplementedError: zipfile on a damaged header naming an unknown zip version;
        # zlib.error: a damaged compressed member; RuntimeError: a member flagged encrypted.
        except (
            ValueError,
            OSError,
            zipfile.BadZipFile,
            EOFError,
            KeyError,
            NotImplementedError,
            zlib.error,
            RuntimeError,
        ) as exc:
            raise InvalidInputError(f"Cannot read {path.name} as a dataset (.npz): {exc}") from None
        except MemoryError:  # a header declaring a shape far beyond the file's content
            raise InvalidInputError(
                f"Cannot read {path.name}: an array's header declares more data than fits in "
                "memory."
            ) from None
        params = _parse_params(arrays.pop("params_json", None), path.name)
        try:
            return cls(params=params, **arrays)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path.name}: {exc}") from None

    @classmethod
    def _load_dir(cls, path: Path) -> Dataset:
        from margin_solver.core.ondisk import read_on_disk

        arrays = read_on_disk(path)
        params = _parse_params(arrays.pop("params_json", None), path.name)
        try:
            return cls(params=params, **arrays)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path.name}/: {exc}") from None

    def __repr__(self) -> str:
        extra = ""
        if self.snr is not None:
            extra = f", snr={self.snr:.4g}, kappa={self.kappa:.4g}"
        if self.flipped is not None:
            extra += f", noisy={int(self.flipped.sum())}"
        return f"Dataset(n={self.n}, T={self.T}, d={self.d}{extra})"


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"


def _starts_with(path: Path, prefix: bytes) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(prefix)) == prefix


def as_dataset(X: Any, y: Any = None, name: str = "X") -> Dataset:
    """Accept either a :class:`Dataset` (then ``y`` must be None) or arrays ``(X, y)``.

    Raises
    ------
    InvalidInputError
        A Dataset together with ``y``, arrays without ``y``, or arrays failing validation.
    """
    if isinstance(X, Dataset):
        if y is not None:
            raise InvalidInputError(
                f"{name} is a Dataset, which carries its labels: give either a Dataset or "
                f"({name}, y), not a Dataset and y."
            )
        return X
    if y is None:
        raise InvalidInputError(f"y is required when {name} is an array (or pass a Dataset).")
    return Dataset(X, y)


def check_same_classes(other: Dataset, train: Dataset, name: str = "test") -> None:
    """Refuse a second dataset whose signs mean other labels than the training set's.

    Raises
    ------
    InvalidInputError
        ``other.classes`` differs from ``train.classes`` (as values, in sign order).
    """
    if not np.array_equal(other.classes, train.classes):
        raise InvalidInputError(
            f"{name} has the labels {other.classes.tolist()} for (-1, +1) but the training "
            f"set has {train.classes.tolist()}; build it with Dataset(..., classes=train.classes)."
        )


def check_model_classes(model: Any, train: Dataset, name: str = "solution") -> None:
    """Refuse a fitted model whose labels (``classes``, ``classes_`` or a mapping's
    ``"classes"``) differ from the training set's: its signs would mean other labels. A model
    that does not say is taken as it is.

    Raises
    ------
    InvalidInputError
        The model's labels differ from ``train.classes``.
    """
    if isinstance(model, Mapping):
        classes = model.get("classes")
    else:
        classes = getattr(model, "classes", getattr(model, "classes_", None))
    if classes is not None and not np.array_equal(np.asarray(classes), train.classes):
        raise InvalidInputError(
            f"{name} was fitted with the labels {np.asarray(classes).tolist()} for (-1, +1) "
            f"but the training set has {train.classes.tolist()}."
        )


def load_dataset(path: str | os.PathLike) -> Dataset:
    """Load a dataset from ``.npz`` or a dataset directory (see :meth:`Dataset.load`)."""
    return Dataset.load(path)


_MEMBERS = ("X", "y", "clean_y", "signal_index", "params_json", "classes")


def _read_members(npz: Any, name: str) -> dict[str, np.ndarray]:
    """The dataset arrays of an open ``.npz``; raises when X or y is missing or not an array."""
    keys = set(npz.files)
    missing = {"X", "y"} - keys
    if missing:
        raise InvalidInputError(
            f"{name} lacks the array(s) {sorted(missing)}; a dataset file needs "
            f"'X' (n, T, d) and 'y' (n,), it has {sorted(keys)[:10]}."
        )
    arrays = {key: npz[key] for key in _MEMBERS if key in keys}
    for key, value in arrays.items():
        if not isinstance(value, np.ndarray):  # numpy hands back raw bytes for non-.npy members
            raise InvalidInputError(f"{name}: member {key!r} is not a .npy array.")
    return arrays


def _parse_params(raw: np.ndarray | None, name: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if raw.dtype.kind not in "US" or raw.ndim != 0:
        raise InvalidInputError(f"{name}: params_json must be a single JSON string.")
    return parse_json_object(str(raw[()]), f"{name}: params_json")


def _square(x: float) -> float:
    """``x**2`` (the same float as before), but inf where Python's ``**`` raises OverflowError."""
    try:
        return x**2
    except OverflowError:
        return math.inf


def _param_number(value: Any) -> float | None:
    """A generating parameter as a float, or None when absent or not a real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range
        return None


def _check_index(signal_index: Any, n: int, T: int) -> np.ndarray:
    arr = np.asarray(signal_index)
    if arr.dtype == object or arr.dtype.kind not in "iuf":
        raise InvalidInputError("signal_index must be an integer array.")
    if arr.shape != (n,):
        raise InvalidInputError(f"Expected signal_index of shape ({n},), got {arr.shape}.")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise InvalidInputError("signal_index must hold whole numbers.")
    # Range first, in the given dtype: a cast of 1e300 to int64 would wrap around.
    if arr.size and (arr.min() < 0 or arr.max() >= T):
        raise InvalidInputError(
            f"signal_index must lie in [0, T) = [0, {T}), got range [{arr.min()}, {arr.max()}]."
        )
    return arr.astype(np.int64)


def _real(value: Any, name: str) -> float:
    """``float(value)`` for a real number (NaN compares false downstream); else raise."""
    if isinstance(value, (bool, str, bytes)):
        raise InvalidInputError(f"{name} must be a number, got {value!r}.")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number, got {value!r}.") from None


def _check_choice(value: str, name: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidInputError(f"{name} must be one of {choices}, got {value!r}.")


def _seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    seed = check_seed(seed)
    return seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)


def _seed_repr(ss: np.random.SeedSequence) -> Any:
    return {"entropy": str(ss.entropy), "spawn_key": list(ss.spawn_key)}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"params value of type {type(obj).__name__} is not JSON-serialisable")
