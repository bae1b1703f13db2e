"""SingleHeadAttentionClassifier on real data, beside scikit-learn's linear classifiers.

Issue 41's targets: digits 3 vs 8 (the first 200 images of the two classes in
:func:`sklearn.datasets.load_digits`, ``make_pipeline(StandardScaler(),
SingleHeadAttentionClassifier(n_tokens=8))``, ``cross_val_score(cv=3)``) at least 0.95; wine
and breast cancer (classes 0 and 1, standardised in the pipeline, each row cut into tokens)
within 0.03 of ``LogisticRegression``; MNIST 3 vs 8 (the bundled copy,
:func:`margin_solver.bench.realdata.load_mnist_bundled`, 16 patches of 7x7 pixels, trained on
``--mnist-n`` images drawn with seed 0 and tested on the other images of the two digits)
at least 0.95 at n = 500. Each row is one model on one task, with the seconds of the whole
evaluation (all folds) and what each fit was (``solution_``: the min-norm interpolator or
the weight-decayed stand-in). Seconds depend on the machine's load: compare them within one
run.

Run: ``python -m margin_solver.bench.measure.classifier_realdata --out
docs/results/classifier_realdata.json``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.fileio import write_json

#: Tokens per row of each tabular task (wine has 13 features: one token each).
TABULAR_TOKENS = {"wine": 13, "cancer": 3}


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, [3, 8])
    return X[keep][:200], y[keep][:200]


def _tabular(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loader = {"wine": datasets.load_wine, "cancer": datasets.load_breast_cancer}[name]
    X, y = loader(return_X_y=True)
    keep = y <= 1
    return X[keep], y[keep]


def _models(tokens: int, cases: Sequence[str]) -> list[tuple[str, Any]]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    from margin_solver.estimator import SingleHeadAttentionClassifier

    models = {
        "attention": SingleHeadAttentionClassifier(n_tokens=tokens, random_state=0),
        "attention, positions='none'": SingleHeadAttentionClassifier(
            n_tokens=tokens, positions="none", random_state=0
        ),
        "LogisticRegression": LogisticRegression(max_iter=5000),
        "LinearSVC": LinearSVC(),
    }
    return [(name, make_pipeline(StandardScaler(), models[name])) for name in cases]


def _fits(estimators: Sequence[Any]) -> str:
    """What each fitted classifier was, e.g. ``"min-norm x3"`` (empty for the baselines)."""
    fitted = [est[-1] for est in estimators if hasattr(est[-1], "solution_")]
    counts = Counter(f"{clf.solution_} ({clf.status_})" for clf in fitted)
    return ", ".join(f"{what} x{k}" for what, k in counts.items())


def cross_validated(task: str, X: np.ndarray, y: np.ndarray, cv: int, tokens: int, cases):
    """One row per model: mean ``cv``-fold accuracy, its folds, seconds, the fits."""
    from sklearn.model_selection import cross_validate

    rows = []
    for name, model in _models(tokens, cases):
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = cross_validate(model, X, y, cv=cv, return_estimator=True)
        seconds = time.perf_counter() - start
        scores = out["test_score"]
        rows.append(
            {
                "task": task,
                "model": name,
                "T": tokens,
                "evaluation": f"{cv}-fold, n = {len(y)}",
                "accuracy": round(float(scores.mean()), 3),
                "folds": " ".join(f"{s:.3f}" for s in scores),
                "seconds": round(seconds, 1),
                "fits": _fits(out["estimator"]),
                "warnings": sum(w.category.__name__ == "ConvergenceWarning" for w in caught),
            }
        )
        print(rows[-1], flush=True)
    return rows


def held_out_mnist(n: int, cases) -> list[dict[str, Any]]:
    """MNIST 3 vs 8, 16 patch tokens of 7x7: train on ``n`` images, test on the rest."""
    from margin_solver.bench.realdata import load_mnist_bundled, patch_tokens

    images, labels = load_mnist_bundled()
    keep = np.isin(labels, [3, 8])
    X = patch_tokens(images[keep], 7, position=False).reshape(int(keep.sum()), -1)
    y = labels[keep]
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:n], order[n:]
    rows = []
    for name, model in _models(16, cases):
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X[train], y[train])
        seconds = time.perf_counter() - start
        rows.append(
            {
                "task": "MNIST 3 vs 8",
                "model": name,
                "T": 16,
                "evaluation": f"train {n}, test {len(test)}",
                "accuracy": round(float(model.score(X[test], y[test])), 3),
                "folds": "",
                "seconds": round(seconds, 1),
                "fits": _fits([model]),
                "warnings": sum(w.category.__name__ == "ConvergenceWarning" for w in caught),
            }
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tasks, print each row, optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist-n", type=int, default=500, help="MNIST training images")
    parser.add_argument("--skip-mnist", action="store_true", help="leave MNIST out")
    parser.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    base = ["attention", "LogisticRegression", "LinearSVC"]
    X, y = _digits()
    rows = cross_validated("digits 3 vs 8", X, y, 3, 8, [*base, "attention, positions='none'"])
    for name, tokens in TABULAR_TOKENS.items():
        X, y = _tabular(name)
        rows += cross_validated(name, X, y, 5, tokens, base)
    if not args.skip_mnist:
        rows += held_out_mnist(args.mnist_n, base)
    if args.out:
        write_json(args.out, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
