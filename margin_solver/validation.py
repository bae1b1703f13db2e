"""Input validation with messages that say what was expected, what came, and how to fix it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

#: Largest and smallest accepted ``max |entry|`` of token data (see :func:`check_magnitude`).
#: Squares stay far from float64's limits (1e+-308); every solver was checked to give
#: scale-equivariant answers to 1e-12 relative across this range.
MAX_MAGNITUDE = 1e100
MIN_MAGNITUDE = 1e-100
#: Largest accepted ``max |entry|`` of a parameter vector (v, p): its squared norm stays finite.
#: Looser than for tokens, since by homogeneity data of scale c have solutions of scale 1/c.
MAX_VECTOR_MAGNITUDE = 1e150


class InvalidInputError(ValueError):
    """Raised when user input has the wrong shape, values or type.

    A subclass of :class:`ValueError`, so ``except ValueError`` also catches it.
    """


def check_tokens(X: Any, name: str = "X") -> np.ndarray:
    """Validate a token array and return it as float64 of shape (n, T, d).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features)
        Samples, each a matrix whose rows are tokens.
    name : str, default="X"
        Argument name used in error messages.

    Returns
    -------
    ndarray of shape (n_samples, n_tokens, n_features), float64

    Raises
    ------
    InvalidInputError
        On a wrong number of dimensions, an empty axis, a non-numeric dtype or NaN/inf.
    """
    arr = _as_float_array(X, name)
    if arr.ndim != 3:
        hint = ""
        if arr.ndim == 2:
            hint = (
                " A 2-D array is one sample or a plain feature matrix; use X[None] for one"
                " sample of T tokens or X[:, None, :] for n samples of one token each."
            )
        raise InvalidInputError(
            f"Expected {name} of shape (n_samples, n_tokens, n_features), "
            f"got array of shape {arr.shape}.{hint}"
        )
    n, T, d = arr.shape
    if T < 1:
        raise InvalidInputError(f"{name} must have at least one token per sample (T >= 1), got T={T}.")
    if d < 1:
        raise InvalidInputError(f"{name} must have at least one feature (d >= 1), got d={d}.")
    if n < 1:
        raise InvalidInputError(f"{name} has no samples (shape {arr.shape}).")
    _check_finite(arr, name)
    return arr


def check_matrix(Z: Any, name: str = "Z") -> np.ndarray:
    """Validate a feature matrix and return it as float64 of shape (n, d).

    Raises
    ------
    InvalidInputError
        On a wrong number of dimensions, an empty axis, a non-numeric dtype or NaN/inf.
    """
    arr = _as_float_array(Z, name)
    if arr.ndim != 2:
        raise InvalidInputError(
            f"Expected {name} of shape (n_samples, n_features), got array of shape {arr.shape}."
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InvalidInputError(f"{name} is empty (shape {arr.shape}).")
    _check_finite(arr, name)
    return arr


#: Entries per block of :func:`check_magnitude`'s reductions (2 MiB of float64).
_PEAK_BLOCK = 2**18


def check_magnitude(
    arr: np.ndarray, name: str, *, low: float = MIN_MAGNITUDE, high: float = MAX_MAGNITUDE
) -> np.ndarray:
    """Reject finite data whose scale float64 products cannot carry; return ``arr`` unchanged.

    The solvers (v-step, min-norm, lower bound, GD) form products of tokens (Gram matrices,
    scores ``X p``, ``R / ||p||``), so entries above ``MAX_MAGNITUDE`` overflow and a largest
    entry below ``MIN_MAGNITUDE`` underflows to zero; they call this on their input. A
    :class:`~margin_solver.data.Dataset` accepts any finite scale (the condition checker is
    scale-free). The problems are homogeneous (scaling X by c scales the min-norm ``||v||`` by 1/c
    at radius R/c), so rescaling X loses nothing. An all-zero array is left to the solvers.

    Parameters
    ----------
    arr : ndarray, float64, finite
    name : str
        Argument name used in error messages.
    low, high : float, default=MIN_MAGNITUDE, MAX_MAGNITUDE
        Accepted range of ``max |arr|`` (``low=0`` accepts any small scale).

    Raises
    ------
    InvalidInputError
        When ``max |arr|`` lies outside ``[low, high]`` (and is not 0).
    """
    # Two reductions without the temporary that np.abs(arr) would allocate (3x faster on
    # the 160 MB token arrays of d = 50,000, where this check sits on the solvers' path),
    # over cache-sized blocks so that the second reads the block from cache: one pass over
    # memory, which is what one short GD run costs per step.
    contiguous = arr.flags.c_contiguous
    blocks = [arr.reshape(-1)] if contiguous else [arr]  # no copy of a strided view
    if contiguous:
        blocks = [blocks[0][i : i + _PEAK_BLOCK] for i in range(0, arr.size, _PEAK_BLOCK)]
    peak = 0.0
    for block in blocks:
        if block.size:
            peak = max(peak, float(np.max(block)), -float(np.min(block)))
    if peak > high or 0.0 < peak < low:
        raise InvalidInputError(
            f"{name} has largest |entry| {peak:.3g}, outside [{low:g}, {high:g}] where float64 "
            f"products stay exact; rescale it (e.g. divide by {peak:.3g})."
        )
    return arr


def check_labels(y: Any, n_samples: int | None = None, name: str = "y") -> np.ndarray:
    """Validate labels in {-1, +1} and return them as float64 of shape (n,).

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels; must take only the values -1 and +1.
    n_samples : int, optional
        Expected length (the number of samples in X).
    name : str, default="y"
        Argument name used in error messages.

    Raises
    ------
    InvalidInputError
        On a wrong shape, a length mismatch, NaN/inf or values outside {-1, +1}.
    """
    arr = _as_float_array(y, name)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise InvalidInputError(f"Expected {name} of shape (n_samples,), got array of shape {arr.shape}.")
    if n_samples is not None and arr.shape[0] != n_samples:
        raise InvalidInputError(
            f"{name} has {arr.shape[0]} labels but X has {n_samples} samples; they must match."
        )
    _check_finite(arr, name)
    values = set(np.unique(arr).tolist())
    if not values <= {-1.0, 1.0}:
        shown = sorted(values)[:6]
        fix = " Use 2 * y - 1." if values <= {0.0, 1.0} else ""
        raise InvalidInputError(f"{name} must take values in {{-1, +1}}; got {shown}.{fix}")
    return arr


def check_min_samples(n: int, minimum: int = 2, name: str = "X") -> None:
    """Raise when fewer than ``minimum`` samples are given."""
    if n < minimum:
        raise InvalidInputError(f"{name} needs at least {minimum} samples, got n={n}.")


def check_positive(value: Any, name: str, allow_inf: bool = False) -> float:
    """Validate a strictly positive finite scalar (e.g. the radius ``R``) and return it."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a positive number, got {value!r}.") from None
    if np.isnan(out) or (np.isinf(out) and not allow_inf) or out <= 0:
        raise InvalidInputError(f"{name} must be a positive finite number, got {value!r}.")
    return out


def check_int(value: Any, name: str, minimum: int = 0) -> int:
    """Validate an integer count or index (not a bool, not a float) ``>= minimum``; return it.

    Raises
    ------
    InvalidInputError
        Naming ``name``, the bound and the value given.

    Examples
    --------
    >>> check_int(3, "n", 1)
    3
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def check_nonnegative(value: Any, name: str) -> float:
    """Validate a finite scalar ``>= 0`` (e.g. a weight decay or a tolerance); return it."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number >= 0, got {value!r}.") from None
    if not math.isfinite(out) or out < 0:
        raise InvalidInputError(f"{name} must be a finite number >= 0, got {value!r}.")
    return out


def check_vector(v: Any, d: int, name: str) -> np.ndarray:
    """Validate a parameter vector of length ``d`` and return it as float64."""
    arr = _as_float_array(v, name).reshape(-1) if np.ndim(v) <= 1 else _as_float_array(v, name)
    if arr.shape != (d,):
        raise InvalidInputError(f"Expected {name} of shape ({d},), got array of shape {np.shape(v)}.")
    _check_finite(arr, name)
    return check_magnitude(arr, name, low=0.0, high=MAX_VECTOR_MAGNITUDE)


def check_options(options: Any, defaults: Mapping[str, Any], name: str = "options") -> dict[str, Any]:
    """Merge a solver's ``options`` mapping into its ``defaults``; reject unknown keys.

    Only the names are checked here: each solver validates the values of its own options.

    Raises
    ------
    InvalidInputError
        When ``options`` is not a mapping with string keys, or names a key not in ``defaults``.

    Examples
    --------
    >>> check_options({"memory": 0}, {"memory": 30, "use_bb": True})
    {'memory': 0, 'use_bb': True}
    """
    if options is None:
        return dict(defaults)
    if not isinstance(options, Mapping):
        raise InvalidInputError(f"{name} must be a mapping (dict), got {type(options).__name__}.")
    unknown = sorted(str(k) for k in options if k not in defaults)
    if unknown:
        raise InvalidInputError(
            f"Unknown {name} key(s) {unknown}; expected some of {sorted(defaults)}."
        )
    return {**defaults, **options}


def check_seed(seed: Any, name: str = "seed") -> int | np.random.SeedSequence | None:
    """Validate a seed for :func:`numpy.random.default_rng` / ``SeedSequence``; return it.

    Raises
    ------
    InvalidInputError
        Unless ``seed`` is None, a non-negative integer or a ``numpy.random.SeedSequence``.
    """
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise InvalidInputError(
        f"{name} must be None, a non-negative integer or a numpy SeedSequence, got {seed!r}."
    )


# dtype kinds that are not real numbers: complex, strings, objects, dates, raw bytes.
_NON_REAL_KINDS = {"c": "complex", "U": "string", "S": "bytes", "O": "object", "M": "datetime",
                   "m": "timedelta", "V": "void (raw or structured)"}


def _as_float_array(value: Any, name: str) -> np.ndarray:
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # e.g. ragged nested lists
        raise InvalidInputError(f"{name} must be a numeric array: {exc}") from None
    kind = _NON_REAL_KINDS.get(raw.dtype.kind)
    if kind is not None:
        # numpy would parse "1.5" strings and drop imaginary parts; refuse both.
        raise InvalidInputError(
            f"{name} must be a numeric array of real numbers, got dtype {raw.dtype} ({kind})."
        )
    return raw.astype(np.float64, copy=False)


def _check_finite(arr: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))
        kind = "NaN" if np.isnan(arr).any() else "inf"
        raise InvalidInputError(
            f"{name} contains {kind} ({len(bad)} non-finite entries, first at index "
            f"{tuple(int(i) for i in bad[0])}); remove or impute them first."
        )
