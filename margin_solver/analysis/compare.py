"""Side-by-side comparison of two fitted models, e.g. a min-norm interpolator and a GD endpoint.

Any object with dense ``v`` and ``p`` attributes (arrays of shape (d,), or (H, d) for H
attention heads) qualifies: results of
:func:`margin_solver.gd.endpoints.gradient_descent`, of the min-norm solver, or a fitted
:class:`~margin_solver.estimator.SingleHeadAttentionClassifier` (``v_``/``p_`` are read too).
Every error and attention number comes from :func:`margin_solver.analysis.heads.head_metrics`
(:func:`margin_solver.analysis.metrics.evaluate` for one head).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from margin_solver.analysis.heads import head_metrics
from margin_solver.analysis.metrics import Metrics
from margin_solver.core.data import Dataset, check_model_classes, check_same_classes
from margin_solver.core.results import classes_note, format_cell, sign_classes, to_jsonable
from margin_solver.core.validation import InvalidInputError, check_vector

__all__ = ["Comparison", "ModelSummary", "compare"]


@dataclass(frozen=True)
class ModelSummary:
    """What one model is and does on the training (and test) set.

    ``normalized_margin = min_i y_i f_i / ||v||`` on the training set (f is 1-homogeneous in
    ``v``); for a min-norm solution with unit margin it equals ``1 / ||v*||``.
    """

    norm_v: float
    norm_p: float
    min_margin: float
    normalized_margin: float | None
    interpolates: bool
    train_error: float
    train_error_clean: float | None
    attn_signal_clean: float | None
    attn_signal_noisy: float | None
    test_error: float | None
    test_error_clean: float | None
    test_attn_signal: float | None


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare`: one summary per model and what they share.

    Attributes
    ----------
    names : tuple of str
        Labels of the two models in the table.
    a, b : ModelSummary
    cos_v, cos_p : float or None
        Cosine of the two ``v`` (resp. ``p``) vectors; None when one of them is zero.
    same_token_train : float
        Fraction of training samples whose most-attended token is the same for both models.
    same_token_test : float or None
        The same on the test set, when given.
    classes : ndarray of shape (2,)
        The training set's two labels in sign order (``classes[0]`` is -1, ``classes[1]``
        is +1), as the solvers' results carry them.
    """

    names: tuple[str, str]
    a: ModelSummary
    b: ModelSummary
    cos_v: float | None
    cos_p: float | None
    same_token_train: float
    same_token_test: float | None
    classes: np.ndarray = field(default_factory=sign_classes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return to_jsonable(
            {
                "names": list(self.names),
                "a": asdict(self.a),
                "b": asdict(self.b),
                "cos_v": self.cos_v,
                "cos_p": self.cos_p,
                "same_token_train": self.same_token_train,
                "same_token_test": self.same_token_test,
                "classes": self.classes,
            }
        )

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as a JSON string (``kwargs`` pass to :func:`json.dumps`)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.to_dict(), **kwargs)

    def __str__(self) -> str:
        rows = [
            ("||v||", "norm_v"),
            ("||p||", "norm_p"),
            ("min margin", "min_margin"),
            ("normalised margin", "normalized_margin"),
            ("interpolates", "interpolates"),
            ("train error", "train_error"),
            ("train error (clean labels)", "train_error_clean"),
            ("attention on signal, clean", "attn_signal_clean"),
            ("attention on signal, noisy", "attn_signal_noisy"),
            ("test error", "test_error"),
            ("test error (clean labels)", "test_error_clean"),
            ("test attention on signal", "test_attn_signal"),
        ]
        width = max(len(r[0]) for r in rows) + 2
        col = max(12, *(len(n) + 2 for n in self.names))
        lines = [f"{'':<{width}}{self.names[0]:>{col}}{self.names[1]:>{col}}"]
        note = classes_note(self.classes)
        if note is not None:
            lines.insert(0, f"labels: {note}")
        for label, key in rows:
            va, vb = getattr(self.a, key), getattr(self.b, key)
            if va is None and vb is None:
                continue
            lines.append(f"{label:<{width}}{format_cell(va):>{col}}{format_cell(vb):>{col}}")
        lines.append(f"{'cos(v_a, v_b)':<{width}}{format_cell(self.cos_v):>{col}}")
        lines.append(f"{'cos(p_a, p_b)':<{width}}{format_cell(self.cos_p):>{col}}")
        lines.append(f"{'same token (train)':<{width}}{format_cell(self.same_token_train):>{col}}")
        if self.same_token_test is not None:
            lines.append(
                f"{'same token (test)':<{width}}{format_cell(self.same_token_test):>{col}}"
            )
        return "\n".join(lines)


def compare(
    a: Any,
    b: Any,
    train: Dataset,
    test: Dataset | None = None,
    names: tuple[str, str] = ("a", "b"),
) -> Comparison:
    """Compare two fitted models on a training set (and optionally a test set).

    Parameters
    ----------
    a, b : object with dense ``v`` and ``p`` (or ``v_`` and ``p_``), arrays of shape (d,)
        E.g. a min-norm result and a :class:`~margin_solver.gd.endpoints.GDResult`. Multi-head
        models have arrays of shape (H, d): norms are those of the concatenations, attention numbers
        use the heads' mean attention, and ``cos_v`` / ``cos_p`` compare the concatenations
        (None when the two models have different numbers of heads).
    train : Dataset
        The training set (margins, training errors, attention split clean / noisy).
    test : Dataset, optional
    names : tuple of two str, default=("a", "b")
        Column labels of the printed table.

    Returns
    -------
    Comparison
        Prints as a table (``str``); ``to_dict()`` for JSON.

    Raises
    ------
    InvalidInputError
        A model without dense ``v``/``p`` of the data's dimension, or a dataset that is
        not a :class:`~margin_solver.core.data.Dataset`.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> from margin_solver.gd.endpoints import gradient_descent
    >>> train = PaperDistribution(d=500, snr=0.4, eta=0.1).sample(20, seed=1)
    >>> two = gradient_descent(train)
    >>> long = gradient_descent(train, schedule="constant", steps=50)
    >>> round(compare(two, long, train).cos_v, 2) > 0
    True
    """
    for name, data in (("train", train), ("test", test)):
        if data is not None and not isinstance(data, Dataset):
            raise InvalidInputError(f"{name} must be a Dataset, got {type(data).__name__}.")
    if test is not None and test.d != train.d:
        raise InvalidInputError(f"test has d={test.d} features but train has d={train.d}.")
    if test is not None:
        check_same_classes(test, train)
    for model, name in ((a, names[0]), (b, names[1])):
        check_model_classes(model, train, str(name))
    va, pa = _params(a, train.d, names[0])
    vb, pb = _params(b, train.d, names[1])
    ma, mb = head_metrics(va, pa, train), head_metrics(vb, pb, train)
    ta = tb = None
    if test is not None:
        ta, tb = head_metrics(va, pa, test), head_metrics(vb, pb, test)
    return Comparison(
        names=(str(names[0]), str(names[1])),
        a=_summary(va, pa, ma, ta),
        b=_summary(vb, pb, mb, tb),
        cos_v=_cosine(va, vb),
        cos_p=_cosine(pa, pb),
        same_token_train=float(np.mean(ma.selected_token == mb.selected_token)),
        same_token_test=None
        if ta is None
        else float(np.mean(ta.selected_token == tb.selected_token)),
        classes=train.classes,
    )


def _params(model: Any, d: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    for vk, pk in (("v", "p"), ("v_", "p_")):
        v, p = getattr(model, vk, None), getattr(model, pk, None)
        if v is not None and p is not None:
            v, p = _heads(v, d, f"{name}.{vk}"), _heads(p, d, f"{name}.{pk}")
            if v.shape != p.shape:
                raise InvalidInputError(
                    f"Model {name!r}: {vk} has shape {v.shape} but {pk} has shape {p.shape}."
                )
            return v, p
    status = getattr(model, "status", None)
    # A solver result without a point (infeasible, nothing found) says why, not just "no v".
    why = "" if status is None else f" (status {status!r}: {getattr(model, 'message', '')})"
    raise InvalidInputError(
        f"Model {name!r} ({type(model).__name__}) has no dense v and p{why}; compare needs "
        "fitted models exposing arrays v and p (or v_ and p_) of shape (d,) or (H, d)."
    )


def _heads(x: Any, d: int, name: str) -> np.ndarray:
    """A checked vector of length d, or (H heads) a stack of H such vectors."""
    if np.ndim(x) == 2:
        return np.stack([check_vector(row, d, f"{name}[{h}]") for h, row in enumerate(x)])
    return check_vector(x, d, name)


def _summary(v: np.ndarray, p: np.ndarray, train: Metrics, test: Metrics | None) -> ModelSummary:
    norm_v = float(np.linalg.norm(v))
    return ModelSummary(
        norm_v=norm_v,
        norm_p=float(np.linalg.norm(p)),
        min_margin=train.min_margin,
        normalized_margin=train.min_margin / norm_v if norm_v > 0 else None,
        interpolates=train.min_margin > 0,
        train_error=train.error,
        train_error_clean=train.error_clean,
        attn_signal_clean=train.attn_signal_clean,
        attn_signal_noisy=train.attn_signal_noisy,
        test_error=None if test is None else test.error,
        test_error_clean=None if test is None else test.error_clean,
        test_attn_signal=None if test is None else test.attn_signal,
    )


def _cosine(x: np.ndarray, y: np.ndarray) -> float | None:
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0 or ny == 0 or x.shape != y.shape:
        return None
    return float(np.clip(x.ravel() @ y.ravel() / (nx * ny), -1.0, 1.0))
