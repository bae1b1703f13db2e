"""Methods a sweep can run: a registry name -> function(train, test, call) -> row fields.

A method fits a model (v, p) on ``train`` and returns a dict of result columns
(:data:`margin_solver.bench.sweeps.METHOD_FIELDS`). Shared meanings:

- ``train_error`` / ``train_error_clean``: training error against observed / clean labels;
- ``test_error_clean``: test error against clean labels (Bayes optimum 0);
  ``test_error_noisy``: against the test set's flipped labels (Bayes optimum eta);
- ``attn_signal_clean`` / ``attn_signal_noisy``: mean attention on the signal token over
  the *training* samples whose label was kept / flipped (the two-mode behaviour of the
  authors' reply, Q5.1 and W2); ``attn_signal_test``: over all test samples;
- ``min_margin``: ``min_i y_i f(X_i)`` on the training set;
- ``norm``: ``||v|| / min_margin``, the norm of the value vector that interpolates with margin
  1 at the method's attention p (comparable between the min-norm solver and GD endpoints);
  empty when the method does not interpolate;
- ``R``: the attention radius: the constraint ``||p|| <= R`` of a min-norm solve, or ``||p||``
  for methods without one; ``p_norm``: ``||p||``;
- ``lower_bound`` / ``gap``: a certified lower bound on the min-norm value and
  ``norm - lower_bound`` when the method provides one.

The cell's ``heads`` (:class:`margin_solver.bench.sweeps.Cell`) is the number of attention
heads of the fitted model (``min-norm``:
:func:`margin_solver.minnorm.multihead.solve_min_norm_heads`, certified only for one head; GD
methods: ``gradient_descent(heads=...)``, from a random initialisation unless ``init`` is given,
since heads started at zero stay identical); ``uniform-svm`` has no attention and refuses
``heads > 1``.

Register a new method with :func:`register_method`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.analysis.heads import head_metrics
from margin_solver.analysis.metrics import evaluate, evaluate_projected
from margin_solver.core.data import Dataset, ProjectedSamples
from margin_solver.gd.endpoints import gradient_descent, token_scale
from margin_solver.minnorm.multihead import solve_min_norm_heads
from margin_solver.minnorm.solve import solve_min_norm

# Imported with this module, so that a cell's timing excludes imports.
from margin_solver.svm.vstep import solve_vstep

#: Registry of sweep methods.
SWEEP_METHODS: dict[str, Callable[..., dict[str, Any]]] = {}


@dataclass(frozen=True)
class MethodCall:
    """What a method gets besides the data.

    Attributes
    ----------
    cell : margin_solver.bench.sweeps.Cell
        The grid point (n, d, T, snr, kappa, eta, seed, method).
    options : dict
        The method's options from the sweep config.
    init_seed : numpy.random.SeedSequence
        The cell's initialisation stream (independent of the data streams).
    """

    cell: Any
    options: dict[str, Any] = field(default_factory=dict)
    init_seed: np.random.SeedSequence = field(default_factory=np.random.SeedSequence)


def _heads(call: MethodCall) -> int:
    """The cell's number of heads (1 for a call without a grid cell)."""
    return getattr(call.cell, "heads", 1)


def register_method(
    name: str,
) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Decorator adding a function ``(train, test, call) -> dict`` to :data:`SWEEP_METHODS`.

    ``train`` is a :class:`margin_solver.core.data.Dataset`; ``test`` is one too for data
    files and real data, and for the paper's model a
    :class:`margin_solver.core.data.ProjectedSamples`, which holds no tokens: evaluate a
    fitted (v, p) on either with :func:`model_fields`.
    """

    def decorate(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        SWEEP_METHODS[name] = fn
        return fn

    return decorate


def model_fields(
    v: np.ndarray, p: np.ndarray, train: Dataset, test: Dataset | ProjectedSamples
) -> dict[str, Any]:
    """Result columns of a fitted (v, p) from :func:`margin_solver.analysis.metrics.evaluate`.

    Parameters
    ----------
    v, p : ndarray of shape (n_features,), or (H, n_features) for H heads
        (:func:`margin_solver.analysis.heads.head_metrics`; attention columns use the heads' mean)
    train : Dataset
    test : Dataset or ProjectedSamples
        The paper model's test samples come drawn in the model's directions
        (:func:`margin_solver.analysis.metrics.evaluate_projected`).

    Returns
    -------
    dict
        ``train_error, train_error_clean, test_error_clean, test_error_noisy,
        attn_signal_clean, attn_signal_noisy, attn_signal_test, min_margin, norm, p_norm``.
    """
    metrics = evaluate if np.ndim(v) == 1 else head_metrics
    fit = metrics(v, p, train)
    held = (
        evaluate_projected(v, p, test)
        if isinstance(test, ProjectedSamples)
        else metrics(v, p, test)
    )
    v_norm = float(np.linalg.norm(v))
    return {
        "train_error": fit.error,
        "train_error_clean": fit.error_clean,
        "test_error_clean": held.error_clean,
        "test_error_noisy": held.error,
        "attn_signal_clean": fit.attn_signal_clean,
        "attn_signal_noisy": fit.attn_signal_noisy,
        "attn_signal_test": held.attn_signal,
        "min_margin": fit.min_margin,
        "norm": v_norm / fit.min_margin if fit.min_margin > 0 else None,
        "p_norm": float(np.linalg.norm(p)),
    }


@register_method("uniform-svm")
def uniform_svm(
    train: Dataset, test: Dataset | ProjectedSamples, call: MethodCall
) -> dict[str, Any]:
    """The v-step at ``p = 0``: a hard-margin SVM on the token means (uniform attention).

    The baseline that ignores attention: ``f = v^T mean_t x_t``. Options: ``solver``
    (a :func:`margin_solver.svm.vstep.solve_vstep` engine; its default when omitted).
    """
    if _heads(call) != 1:
        raise ValueError("uniform-svm has no attention heads; run it with heads=1.")
    Z = train.X.mean(axis=1)
    engine = {"solver": call.options["solver"]} if "solver" in call.options else {}
    res = solve_vstep(Z, train.y.astype(float), **engine)
    out: dict[str, Any] = {"status": res.status, "message": res.message, "R": 0.0}
    if res.v is None:
        return out
    out.update(model_fields(res.v, np.zeros(train.d), train, test))
    out["gap"] = res.gap
    return out


#: Default attention radius in units of the token scale: ``R = R_SCALE / nu`` with ``nu^2`` the
#: mean squared training-token norm, so that scores ``<p, x>`` can reach about ``R_SCALE``.
R_SCALE = 100.0

#: The min-norm method certifies (lower bound LB, gap) up to this many training samples.
CERTIFY_MAX_N = 16


def min_norm_solution(
    train: Dataset, options: dict[str, Any], init_seed: np.random.SeedSequence, heads: int = 1
) -> tuple[Any, float]:
    """Solve P_R on ``train`` with the ``min-norm`` method's options; return (result, R).

    Options: ``R`` (radius; default ``R_scale / nu``, ``nu^2`` the mean squared token norm),
    ``R_scale`` (default :data:`R_SCALE`), ``certify_max_n`` (default :data:`CERTIFY_MAX_N`:
    certify, i.e. compute the lower bound LB and the gap, when ``n`` is at most this); other
    options pass to :func:`margin_solver.minnorm.solve.solve_min_norm`. Its random starts use
    ``init_seed``. ``heads > 1`` solves P_R^H (never certified; the single-head solve it
    starts from is not certified either, to save the bound's time).
    """
    opts = dict(options)
    R = opts.pop("R", None)
    R_scale = opts.pop("R_scale", R_SCALE)
    certify = train.n <= opts.pop("certify_max_n", CERTIFY_MAX_N)
    if R is None:
        R = R_scale / np.sqrt(token_scale(train.X))
    seed = int(init_seed.generate_state(1)[0])
    if heads != 1:
        return solve_min_norm_heads(train, R=R, heads=heads, seed=seed, **opts), float(R)
    return solve_min_norm(train, R=R, certify=certify, seed=seed, **opts), float(R)


@register_method("min-norm")
def min_norm(train: Dataset, test: Dataset | ProjectedSamples, call: MethodCall) -> dict[str, Any]:
    """The min-norm interpolator P_R (:func:`margin_solver.minnorm.solve.solve_min_norm`), certified
    (``lower_bound``, relative ``gap``) for small n; options as in :func:`min_norm_solution`."""
    res, R = min_norm_solution(train, call.options, call.init_seed, _heads(call))
    out: dict[str, Any] = {
        "status": res.status,
        "message": res.message,
        "R": R,
        "iterations": res.nit,
        "lower_bound": res.lower_bound,
        "gap": res.gap,
    }
    if res.v is not None:
        out.update(model_fields(res.v, res.p, train, test))
    return out


def theory_setting(method: str, fields: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """Keywords of :func:`margin_solver.theory.check_conditions` for the prediction that belongs
    to a sweep method's row: two-step GD at its step sizes, min-norm at its R; other methods
    get the checker's default (the min-norm interpolator at large R)."""
    if method == "gd-two-step":
        steps = (options["beta0"], options["beta1"]) if {"beta0", "beta1"} <= set(options) else None
        return {"method": "two-step-gd", "steps": steps}
    if method == "min-norm" and fields.get("R"):
        return {"method": "min-norm", "R": fields["R"]}
    return {}


#: Steps of the ``gd-long`` method (and of any non-two-step schedule) unless options say otherwise.
GD_LONG_STEPS = 1000


def _gd(
    train: Dataset, test: Dataset | ProjectedSamples, call: MethodCall, **defaults: Any
) -> dict[str, Any]:
    opts = {**defaults, **call.options}
    if _heads(call) != 1:
        opts["heads"] = _heads(call)
        opts.setdefault("init", "random")
    if opts.get("init") == "random":
        opts.setdefault("seed", call.init_seed)
    # Only the endpoint is evaluated: recording every step would cost a pass over the data each.
    last = 2 if opts["schedule"] == "two-step" else int(opts.setdefault("steps", GD_LONG_STEPS))
    res = gradient_descent(train, record_steps=[last], **opts)
    out: dict[str, Any] = {"status": res.status, "message": res.message, "iterations": res.nit}
    out.update(model_fields(res.v, res.p, train, test))
    out["R"] = out["p_norm"]
    return out


@register_method("gd-two-step")
def gd_two_step(
    train: Dataset, test: Dataset | ProjectedSamples, call: MethodCall
) -> dict[str, Any]:
    """Two GD steps from zero with the package's default step sizes (Theorem 3.3's setting).

    Options pass to :func:`margin_solver.gd.endpoints.gradient_descent` (``beta0``, ``beta1``, ...).
    """
    return _gd(train, test, call, schedule="two-step")


@register_method("gd-long")
def gd_long(train: Dataset, test: Dataset | ProjectedSamples, call: MethodCall) -> dict[str, Any]:
    """Long GD from zero with a constant step (default: the two-step schedule's first step).

    Options pass to :func:`margin_solver.gd.endpoints.gradient_descent` (``steps``, default
    :data:`GD_LONG_STEPS`; ``step_size``; ``weight_decay``; ``init``).
    """
    return _gd(train, test, call, schedule="constant")


@register_method("gd-normalized")
def gd_normalized(
    train: Dataset, test: Dataset | ProjectedSamples, call: MethodCall
) -> dict[str, Any]:
    """Long GD with steps of fixed length along the normalised gradient (default length
    ``1 / nu``), which cannot blow up as a constant step too large for the data does.

    Options as ``gd-long`` (``steps``, default :data:`GD_LONG_STEPS`; ``step_size``; ``init``).
    """
    return _gd(train, test, call, schedule="normalized")
