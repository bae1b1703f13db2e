"""Input validation with messages that say what was expected, what came, and how to fix it."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

logger = logging.getLogger("margin_solver")

#: Largest and smallest accepted ``max |entry|`` of token data (see :func:`check_magnitude`).
#: Squares stay far from float64's limits (1e+-308); every solver was checked to give
#: scale-equivariant answers to 1e-12 relative across this range.
MAX_MAGNITUDE = 1e100
MIN_MAGNITUDE = 1e-100
#: Largest accepted ``max |entry|`` of a parameter vector (v, p): its squared norm stays finite.
#: Looser than for tokens, since by homogeneity data of scale c have solutions of scale 1/c.
MAX_VECTOR_MAGNITUDE = 1e150


#: Accepted range of a radius ``R`` (the ball ``||p|| <= R``): ``R**2`` stays a normal float64.
MAX_RADIUS = 1e150
MIN_RADIUS = 1e-150

#: Calls announce (log at INFO level) allocations from this size on.
ANNOUNCE_BYTES = 1 << 28


class InvalidInputError(ValueError):
    """Raised when user input has the wrong shape, values or type.

    A subclass of :class:`ValueError`, so ``except ValueError`` also catches it.
    """


class InsufficientMemoryError(InvalidInputError, MemoryError):
    """Raised before an allocation that cannot fit in the memory available.

    Both an :class:`InvalidInputError` (the input is too large for this machine: the command
    line reports it in one line with exit status 2) and a :class:`MemoryError` (what the
    allocation itself would have raised, so ``except MemoryError`` still catches it).
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
        raise InvalidInputError(
            f"{name} must have at least one token per sample (T >= 1), got T={T}."
        )
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
    :class:`~margin_solver.core.data.Dataset` accepts any finite scale (the condition checker is
    scale-free). The problems are homogeneous (scaling X by c scales the min-norm ``||v||`` by 1/c
    at radius R/c), so rescaling X loses nothing. An all-zero array is left to the solvers.

    Parameters
    ----------
    arr : ndarray, float64
        Finite (NaN or inf, as tokens on disk may hold, is refused).
    name : str
        Argument name used in error messages.
    low, high : float, default=MIN_MAGNITUDE, MAX_MAGNITUDE
        Accepted range of ``max |arr|`` (``low=0`` accepts any small scale).

    Raises
    ------
    InvalidInputError
        When ``max |arr|`` lies outside ``[low, high]`` (and is not 0), or ``arr`` holds
        NaN or inf.
    """
    contiguous = arr.flags.c_contiguous
    if contiguous and arr.dtype == np.float64 and _sum_of_squares_vouches(arr, low, high):
        return arr
    # The screen accepts only arrays the exact check accepts; every other array gets the
    # exact peak, so verdicts and messages are the exact check's. Two reductions without the
    # temporary that np.abs(arr) would allocate (3x faster on the 160 MB token arrays of
    # d = 50,000), over cache-sized blocks so that the second reads the block from cache.
    blocks = [arr.reshape(-1)] if contiguous else [arr]  # no copy of a strided view
    if contiguous:
        blocks = [blocks[0][i : i + _PEAK_BLOCK] for i in range(0, arr.size, _PEAK_BLOCK)]
    peak = 0.0
    for block in blocks:
        if block.size:
            top, bottom = float(np.max(block)), float(np.min(block))
            # tokens on disk reach here unchecked (a Dataset checks those in memory), and
            # max(peak, nan) would keep peak: a NaN would pass
            if not (math.isfinite(top) and math.isfinite(bottom)):
                raise InvalidInputError(f"{name} contains NaN or infinite values.")
            peak = max(peak, top, -bottom)
    if peak > high or 0.0 < peak < low:
        raise InvalidInputError(
            f"{name} has largest |entry| {peak:.3g}, outside [{low:g}, {high:g}] where float64 "
            f"products stay exact; rescale it (e.g. divide by {peak:.3g})."
        )
    return arr


#: Sums of squares below this are screened out: far above the total that squares
#: underflowing to subnormals can lose (size * 5e-324), so ``s`` bounds the peak from below.
_SCREEN_FLOOR = 1e-290


def _sum_of_squares_vouches(arr: np.ndarray, low: float, high: float) -> bool:
    """True when ``s = sum arr^2`` proves ``low <= max |arr| <= high`` (False: cannot tell).

    ``peak^2 <= s <= size * peak^2`` (a sum of non-negative terms; the rounding of a sum of
    ``size`` terms is far inside the factor 100 of margin on either side), so
    ``100 size low^2 <= s <= high^2 / 100`` puts the peak within ``[10 low, high / 10]``.
    NaN, inf, an overflowing square and an all-zero or tiny array give False. One BLAS dot
    product costs less than half the exact check's two reductions (0.17 against 0.40 ms on
    8 MB in cache), a visible part of a short GD call (the ``gd_call`` benchmark).
    """
    flat = arr.reshape(-1)
    with np.errstate(over="ignore", under="ignore"):  # both mean "cannot tell" here
        s = float(flat @ flat)
    floor = max(_SCREEN_FLOOR, 100 * arr.size * low * low)
    return math.isfinite(s) and floor <= s <= high * high / 100


def check_labels(y: Any, n_samples: int | None = None, name: str = "y") -> np.ndarray:
    """Validate labels of any two values and return them as signs, float64 of shape (n,).

    The one place labels are read: ``encode_labels(y, n_samples, name)[0]`` (see there for
    which label becomes +1).

    Raises
    ------
    InvalidInputError
        On a wrong shape, a length mismatch, NaN/inf, or more than two distinct labels.
    """
    return encode_labels(y, n_samples, name)[0]


#: The pairs of labels whose sign is fixed even when only one of them occurs: (-1, +1),
#: (0, 1) and (False, True) map their first label to -1.
_KNOWN_PAIRS = ({-1.0, 1.0}, {0.0, 1.0})


def encode_labels(
    y: Any, n_samples: int | None = None, name: str = "y", classes: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Labels of any two values as signs: ``(signs, classes)``, ``classes[0]`` -> -1 and
    ``classes[1]`` -> +1.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Numbers, booleans or strings taking at most two distinct values.
    n_samples : int, optional
        Expected length (the number of samples in X).
    name : str, default="y"
        Argument name used in error messages.
    classes : array-like of shape (2,), optional
        The two labels in sign order (e.g. those of the observed labels, for the clean ones).
        Default: the two labels sorted (scikit-learn's order: the larger is +1); with one
        label present, -1 and +1, 0 and 1, and False and True are still read as a pair.

    Returns
    -------
    signs : ndarray of shape (n_samples,), float64 in {-1, +1}
    classes : ndarray of shape (2,)
        The user's two labels; ``classes[(signs > 0).astype(int)]`` gives ``y`` back.

    Raises
    ------
    InvalidInputError
        On a wrong shape, a length mismatch, NaN/inf, more than two labels, labels outside
        ``classes``, or one label alone that is not one of the pairs above.

    Examples
    --------
    >>> signs, classes = encode_labels(["cat", "dog", "cat"])
    >>> signs.tolist(), classes.tolist()
    ([-1.0, 1.0, -1.0], ['cat', 'dog'])
    >>> encode_labels([0, 1, 2])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    margin_solver.core.validation.InvalidInputError: y must hold two labels (any two distinct
    values), got 3: [0, 1, 2].
    """
    arr = _as_label_array(y, name)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise InvalidInputError(
            f"Expected {name} of shape (n_samples,), got array of shape {arr.shape}."
        )
    if n_samples is not None and arr.shape[0] != n_samples:
        raise InvalidInputError(
            f"{name} has {arr.shape[0]} labels but X has {n_samples} samples; they must match."
        )
    if arr.dtype.kind in "iufb":
        _check_finite(arr.astype(np.float64), name)
    values = np.unique(arr)
    if classes is None:
        classes = _sign_order(values, name)
    else:
        classes = np.asarray(classes)
        outside = np.setdiff1d(values, classes)
        if outside.size:
            raise InvalidInputError(
                f"{name} holds {_shown(outside)}, not one of the labels {_shown(classes)}."
            )
    signs = np.where(arr == classes[1], 1.0, -1.0)
    return signs, classes


def _sign_order(values: np.ndarray, name: str) -> np.ndarray:
    """The two labels in sign order (see :func:`encode_labels`)."""
    if len(values) > 2:
        raise InvalidInputError(
            f"{name} must hold two labels (any two distinct values), got {len(values)}: "
            f"{_shown(values)}."
        )
    if values.dtype.kind == "b":
        return np.array([False, True])
    if values.dtype.kind in "iuf":
        for pair in _KNOWN_PAIRS:
            if set(values.tolist()) <= pair:
                return np.array(sorted(pair), dtype=values.dtype)
    if len(values) < 2:
        raise InvalidInputError(
            f"{name} holds one label only ({_shown(values)}): give the pair as classes, or "
            "use -1 and +1."
        )
    return values


def _shown(values: np.ndarray, limit: int = 6) -> str:
    shown = values[:limit].tolist()
    return str(shown)[:-1] + ", ...]" if len(values) > limit else str(shown)


def _as_label_array(value: Any, name: str) -> np.ndarray:
    """``value`` as an array of numbers, booleans or strings (labels)."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # e.g. ragged nested lists
        raise InvalidInputError(f"{name} must be an array of labels: {exc}") from None
    if raw.dtype.kind in "iufbUS":
        return raw
    if raw.dtype.kind == "O" and all(isinstance(v, str) for v in raw.reshape(-1)):
        return raw.astype(str)
    raise InvalidInputError(
        f"{name} must hold numbers, booleans or strings, got dtype {raw.dtype}."
    )


def check_min_samples(n: int, minimum: int = 2, name: str = "X") -> None:
    """Raise when fewer than ``minimum`` samples are given."""
    if n < minimum:
        raise InvalidInputError(f"{name} needs at least {minimum} samples, got n={n}.")


def check_positive(value: Any, name: str, allow_inf: bool = False) -> float:
    """Validate a strictly positive finite scalar (e.g. the radius ``R``) and return it."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a positive number, got {shown(value)}.") from None
    except OverflowError:  # a Python int beyond float64 (10**400)
        raise InvalidInputError(
            f"{name} = {shown(value)} is too large for a float64 (at most about 1.8e308)."
        ) from None
    if np.isnan(out) or (np.isinf(out) and not allow_inf) or out <= 0:
        raise InvalidInputError(f"{name} must be a positive finite number, got {shown(value)}.")
    return out


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about values a user gave.

    A Python int beyond 4300 digits has no ``repr`` (ValueError, CPython's limit), and a long
    one would fill the one-line message: a long int shows its first digits and its length.

    Examples
    --------
    >>> shown(10**400)
    '100000000000000000000... (401 digits)'
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        size = abs(value)
        digits = math.floor((size.bit_length() - 1) * math.log10(2)) + 1  # may be one short
        digits += size >= 10**digits
        sign = "-" if value < 0 else ""
        return f"{sign}{size // 10 ** (digits - 21)}... ({digits} digits)"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_gap_tol(value: Any, name: str = "gap_tol") -> float:
    """Validate a relative optimality gap tolerance in ``(0, 1)`` and return it.

    The relative gap ``(norm - lower_bound) / norm`` of a feasible point with a non-negative
    bound is at most 1, so a tolerance of 1 or more would certify any feasible point as
    optimal: it is refused rather than letting ``"optimal"`` mean nothing.
    """
    out = check_positive(value, name)
    if out >= 1:
        raise InvalidInputError(
            f"{name} must be below 1 (a relative gap is at most 1, so {name} >= 1 would "
            f"call any feasible point optimal), got {value!r}."
        )
    return out


def check_radius(value: Any, name: str = "R") -> float:
    """Validate a ball radius in ``[MIN_RADIUS, MAX_RADIUS]`` and return it as a float.

    ``R**2`` overflows float64 from ``R = 1.35e154`` on, and below ``R = 1.5e-154`` it is
    subnormal (losing digits) until it is 0 at ``R = 1e-162``: the solvers' step sizes and
    scores lose their meaning (``solve --R 1e300`` raised OverflowError, ``--R 1e-200``
    ZeroDivisionError). The accepted range keeps a margin of four orders of magnitude. The
    problems are homogeneous: rescaling the tokens by ``c`` turns radius ``R`` into ``R / c``.

    Raises
    ------
    InvalidInputError
        Unless ``value`` is a number in the accepted range.

    Examples
    --------
    >>> check_radius(1e300)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    margin_solver.core.validation.InvalidInputError: R = 1e+300 is outside [1e-150, 1e+150],
    where R**2 stays a float64; rescale the tokens (X / c with radius R * c) to bring R into
    range.
    """
    out = check_positive(value, name)
    if not MIN_RADIUS <= out <= MAX_RADIUS:
        raise InvalidInputError(
            f"{name} = {out:g} is outside [{MIN_RADIUS:g}, {MAX_RADIUS:g}], where {name}**2 stays "
            f"a float64; rescale the tokens (X / c with radius {name} * c) to bring {name} "
            "into range."
        )
    return out


def parse_json(text: str, what: str) -> Any:
    """Parse ``text`` as JSON; any failure is one :class:`InvalidInputError` naming ``what``.

    Beyond syntax errors this covers nesting deeper than Python's recursion limit and
    integers longer than Python's digit limit (4300 digits), which :func:`json.loads`
    reports as ``RecursionError`` and ``ValueError``.

    Examples
    --------
    >>> parse_json("[" * 100000, "--options")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    margin_solver.core.validation.InvalidInputError: --options is not valid JSON: nested too
    deeply (maximum recursion depth exceeded while decoding a JSON array from a unicode string).
    """
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise InvalidInputError(f"{what} is not valid JSON: nested too deeply ({exc}).") from None
    except ValueError as exc:  # JSONDecodeError, or an integer beyond the digit limit
        raise InvalidInputError(f"{what} is not valid JSON: {exc}") from None


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """Parse ``text`` as a JSON object (see :func:`parse_json`).

    Examples
    --------
    >>> parse_json_object('{"a": 1}', "--options")
    {'a': 1}
    """
    value = parse_json(text, what)
    if not isinstance(value, dict):
        raise InvalidInputError(f"{what} must be a JSON object, got {text[:60]!r}.")
    return value


def available_memory() -> int:
    """Bytes of memory available to a new allocation without swapping.

    ``MemAvailable`` of ``/proc/meminfo`` (Linux), else free physical pages from
    ``os.sysconf``; when neither is known, an unbounded figure (no refusal).
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return 2**62


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in binary units, e.g. ``format_bytes(2e10) == '18.6 GiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def check_memory(nbytes: float, what: str, remedy: str) -> None:
    """Announce a large allocation and refuse it when it cannot fit in available memory.

    Every allocation that grows faster than the input (a Gram matrix of all tokens, a dense
    n x n array) calls this first, so a call that cannot fit fails at once with one line
    instead of swapping or dying with a bare ``MemoryError``.

    Parameters
    ----------
    nbytes : float
        Bytes the call is about to allocate (its peak, when several arrays live at once).
    what : str
        What is allocated, e.g. ``"the token Gram matrix (nT x nT = 50000 x 50000)"``.
    remedy : str
        The way around it, e.g. ``"use form='dense'"``.

    Raises
    ------
    InsufficientMemoryError
        ``nbytes`` exceeds :func:`available_memory`.
    """
    if nbytes >= ANNOUNCE_BYTES:
        logger.info("allocating %s for %s", format_bytes(nbytes), what)
    available = available_memory()
    if nbytes > available:
        raise InsufficientMemoryError(
            f"{what} needs {format_bytes(nbytes)} but only {format_bytes(available)} of memory is "
            f"available; {remedy}."
        )


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
        raise InvalidInputError(f"{name} must be an integer >= {minimum}, got {shown(value)}.")
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
        raise InvalidInputError(
            f"Expected {name} of shape ({d},), got array of shape {np.shape(v)}."
        )
    _check_finite(arr, name)
    return check_magnitude(arr, name, low=0.0, high=MAX_VECTOR_MAGNITUDE)


def check_options(
    options: Any, defaults: Mapping[str, Any], name: str = "options"
) -> dict[str, Any]:
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

    A ``numpy.random.Generator`` is accepted too and returns a SeedSequence drawn from it (so
    the Generator advances: two calls with one Generator give different streams, as in
    scikit-learn).

    Raises
    ------
    InvalidInputError
        Unless ``seed`` is None, a non-negative integer, a ``numpy.random.SeedSequence`` or a
        ``numpy.random.Generator``.
    """
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(2**63, size=4).tolist())
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise InvalidInputError(
        f"{name} must be None, a non-negative integer, a numpy SeedSequence or a numpy "
        f"Generator, got {seed!r}."
    )


# dtype kinds that are not real numbers: complex, strings, objects, dates, raw bytes.
_NON_REAL_KINDS = {
    "c": "complex",
    "U": "string",
    "S": "bytes",
    "O": "object",
    "M": "datetime",
    "m": "timedelta",
    "V": "void (raw or structured)",
}


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
