"""Metrics of a fitted (v, p) on a dataset: errors against observed and clean labels and
attention on the signal token split by clean and noisy samples."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from margin_solver.core.data import Dataset, ProjectedSamples
from margin_solver.core.kernel import scores_and_values, softmax
from margin_solver.core.results import RecordMixin
from margin_solver.core.validation import InvalidInputError, check_vector


@dataclass(frozen=True, repr=False)
class Metrics(RecordMixin):
    """What a model (v, p) does on one dataset.

    Attributes
    ----------
    n : int
        Number of samples.
    error : float
        Fraction of samples with ``sign(f) != y`` (observed, possibly noisy labels; a
        zero output counts as an error). On a test set its Bayes optimum is ``eta``.
    error_clean : float or None
        The same against clean labels (Bayes optimum 0); None when unknown.
    min_margin : float
        ``min_i y_i f_i`` (observed labels); > 0 means every sample is interpolated.
    attn_signal : float or None
        Mean attention on the signal token over all samples; None without a signal index.
    attn_signal_clean, attn_signal_noisy : float or None
        The same over samples whose label was kept / flipped; None when unknown or empty.
    selected_token : ndarray of shape (n,)
        Argmax of each sample's attention.
    """

    n: int
    error: float
    error_clean: float | None
    min_margin: float
    attn_signal: float | None
    attn_signal_clean: float | None
    attn_signal_noisy: float | None
    selected_token: np.ndarray


def evaluate(v: np.ndarray, p: np.ndarray, data: Dataset | ProjectedSamples) -> Metrics:
    """Evaluate the model ``f(X; v, p)`` on ``data``.

    Parameters
    ----------
    v, p : ndarray of shape (n_features,)
    data : Dataset or ProjectedSamples
        Samples of the paper's model drawn in the model's directions are evaluated by
        :func:`evaluate_projected`.

    Returns
    -------
    Metrics

    Raises
    ------
    InvalidInputError
        ``data`` is neither, or ``v`` / ``p`` are not finite vectors of length d.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> ds = PaperDistribution(d=50, snr=1.0, eta=0.0).sample(10, seed=0)
    >>> v = np.zeros(50); v[0], v[1] = 1.0, -1.0
    >>> evaluate(v, np.zeros(50), ds).error
    0.0
    """
    if isinstance(data, ProjectedSamples):
        return evaluate_projected(v, p, data)
    if not isinstance(data, Dataset):
        raise InvalidInputError(f"data must be a Dataset, got {type(data).__name__}.")
    v, p = check_vector(v, data.d, "v"), check_vector(p, data.d, "p")
    return trusted_metrics(v, p, data)


def trusted_metrics(
    v: np.ndarray,
    p: np.ndarray,
    data: Dataset,
    clean_y: np.ndarray | None = None,
    signal_index: np.ndarray | None = None,
) -> Metrics:
    """:func:`evaluate` on checked inputs (the worker behind that door).

    ``v`` and ``p`` are finite float64 vectors of length ``data.d`` (**not validated**: for
    callers that produced or checked them, e.g. GD recording its own iterates). ``clean_y``
    and ``signal_index`` (shape (n,), checked by the caller) stand in for the dataset's when
    it lacks them, e.g. the checker's estimates.
    """
    a, u = scores_and_values(data.X, p, v)  # one pass (in blocks for tokens on disk)
    s = softmax(a)
    f = np.sum(s * u, axis=1)
    return output_metrics(f, s, data, clean_y, signal_index)


def output_metrics(
    f: np.ndarray,
    s: np.ndarray,
    data: Dataset,
    clean_y: np.ndarray | None = None,
    signal_index: np.ndarray | None = None,
) -> Metrics:
    """:func:`trusted_metrics` from model outputs already computed on ``data``: ``f`` of
    shape (n,) and the attention ``s`` of shape (n, T) (**not validated**; e.g. GD's own
    evaluation of an iterate, which saves a pass over the tokens)."""
    clean_y = data.clean_y if data.clean_y is not None else clean_y
    signal_index = data.signal_index if data.signal_index is not None else signal_index
    return _metrics(f, s, data.y, clean_y, signal_index)


def evaluate_projected(v: np.ndarray, p: np.ndarray, samples: ProjectedSamples) -> Metrics:
    """:func:`evaluate` on samples of the paper's model drawn in the model's own directions
    (:class:`margin_solver.core.data.ProjectedSamples`: the same law as a full test set, at
    O(n T H) cost at any d).

    ``v`` and ``p`` of shape (H, d) are H heads (outputs summed over the heads, attention
    metrics on the heads' mean attention, as :func:`margin_solver.analysis.heads.head_metrics`).

    Raises
    ------
    InvalidInputError
        ``v`` / ``p`` are not finite vectors of length ``samples.d`` (or finite arrays of
        shape (H, ``samples.d``) for H heads).
    """
    if np.ndim(v) == 2 and np.ndim(p) == 2:
        v, p = np.asarray(v, dtype=np.float64), np.asarray(p, dtype=np.float64)
        if (
            v.shape != p.shape
            or v.shape[1] != samples.d
            or not (np.isfinite(v).all() and np.isfinite(p).all())
        ):
            raise InvalidInputError(
                f"Expected finite heads v and p of one shape (H, {samples.d}), got {v.shape} "
                f"and {p.shape}."
            )
    else:
        v = check_vector(v, samples.d, "v")[None, :]
        p = check_vector(p, samples.d, "p")[None, :]
    # rows v_1, p_1, v_2, p_2, ...: one head's draw does not depend on how many follow it
    proj = samples.project(np.stack((v, p), axis=1).reshape(-1, samples.d))
    u, a = proj[..., 0::2], proj[..., 1::2]  # (n, T, H)
    s = softmax(a, axis=1)
    return _metrics(
        np.sum(s * u, axis=(1, 2)),
        s.mean(axis=2),
        samples.y,
        samples.clean_y,
        samples.signal_index,
    )


def _metrics(
    f: np.ndarray,
    s: np.ndarray,
    y: np.ndarray,
    clean_y: np.ndarray | None,
    signal_index: np.ndarray | None,
) -> Metrics:
    n = len(y)
    pred = np.sign(f)
    error_clean = None if clean_y is None else float(np.mean(pred != clean_y))
    attn_all = attn_clean = attn_noisy = None
    if signal_index is not None:
        on_signal = s[np.arange(n), signal_index]
        attn_all = float(on_signal.mean())
        if clean_y is not None:
            flipped = y != clean_y
            attn_clean = _mean_or_none(on_signal[~flipped])
            attn_noisy = _mean_or_none(on_signal[flipped])
    return Metrics(
        n=n,
        error=float(np.mean(pred != y)),
        error_clean=error_clean,
        min_margin=float(np.min(y * f)),
        attn_signal=attn_all,
        attn_signal_clean=attn_clean,
        attn_signal_noisy=attn_noisy,
        selected_token=np.argmax(s, axis=1),
    )


def signal_attention(s: np.ndarray, data: Dataset) -> np.ndarray:
    """Each sample's attention weight on its signal token, shape (n,).

    Parameters
    ----------
    s : ndarray of shape (n_samples, n_tokens)
        Attention weights on ``data``.
    data : Dataset
        Must carry ``signal_index``.
    """
    return s[np.arange(data.n), data.signal_index]


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None
