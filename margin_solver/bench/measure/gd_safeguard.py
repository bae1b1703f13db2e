"""Two-step GD's default steps: safeguarded (package default) against the scaled steps taken
exactly.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m margin_solver.bench.measure.gd_safeguard [--seeds 4]

Part 1, real tokens (scikit-learn's bundled wine, breast cancer and digits, no download): the
loss after each step and the status, with the exact scaled steps (``beta0, beta1`` from
``default_step_sizes``) and with the defaults (halved while a step would raise the loss), and
the cosine between the first step's direction ``sum_i y_i xbar_i`` and the mean token; then
1000 constant steps of the scaled size taken exactly and of the default size (halved at the
first step while it would raise the loss, then kept).
Part 2, the paper's model (the grid of ``python -m margin_solver.bench.measure.gd_defaults``: T = 2,
eta = 0.15, 300 test samples): both runs per seed, how many endpoints differ, and the means of the
quantities docs/decisions.md, "Safeguarded default GD steps", reports.
Part 3, the phase-diagram grid of ``margin-solver bench`` (d = 4000, T = 2, eta = 0.1,
n in 8..128, seven SNRs from 0.03 to 1, 5 seeds; training sets drawn here, not the sweep's
streams): how many endpoints differ, and whether any run's interpolation changes.
"""

import argparse
import itertools
import math
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine

from margin_solver.bench.realdata import digits_train_test
from margin_solver.core.data import PaperDistribution
from margin_solver.core.results import ConvergenceWarning
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent


def feature_tokens(features, T):
    """Each row of a feature table cut into T tokens of equal length (zero-padded)."""
    n, m = features.shape
    width = -(-m // T)
    padded = np.zeros((n, T * width))
    padded[:, :m] = features
    return padded.reshape(n, T, width)


def real_sets():
    wine, cancer = load_wine(), load_breast_cancer()
    two = wine.target < 2
    digits, _ = digits_train_test(80, 0.1, 1, 1001)
    lifted, _ = digits_train_test(80, 0.1, 1, 1001, lift=1024, lift_seed=0)
    return {
        "wine (0 vs 1), T=2": (
            feature_tokens(wine.data[two], 2),
            np.where(wine.target[two] == 1, 1, -1),
        ),
        "breast cancer, T=3": (feature_tokens(cancer.data, 3), np.where(cancer.target == 1, 1, -1)),
        "digits 3/8, patch 4": (digits.X, digits.y),
        "digits 3/8, lift 1024": (lifted.X, lifted.y),
    }


def fmt(values):
    return ", ".join(f"{v:.4g}" for v in values)


def real_tokens():
    print(
        "| data | n, T, d | sum y | cos(step 1, mean token) | exact: loss by step | status | "
        "default: loss by step | train err | status | steps taken |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (X, y) in real_sets().items():
        n, T, d = X.shape
        g = (y[:, None] * X.mean(axis=1)).sum(axis=0)
        mean = X.reshape(-1, d).mean(axis=0)
        cos = g @ mean / (np.linalg.norm(g) * np.linalg.norm(mean))
        b0, b1 = default_step_sizes(X)
        exact = gradient_descent(X, y, beta0=b0, beta1=b1)
        safe = gradient_descent(X, y)
        print(
            f"| {name} | {n}, {T}, {d} | {int(y.sum())} | {cos:.3f} | "
            f"{fmt(exact.trajectory['loss'])} | {exact.status} | {fmt(safe.trajectory['loss'])} | "
            f"{safe.trajectory['train_error'][-1]:.3f} | {safe.status} | "
            f"[{fmt(safe.step_sizes)}] (from [{fmt((b0, b1))}]) |"
        )


def constant_real(steps=1000):
    print(
        f"\n| data | constant, {steps} steps, exact scaled step: loss max / end, train err, "
        "status | default (settled at step 1): loss max / end, train err, status, step |"
    )
    print("|---|---|---|")
    for name, (X, y) in real_sets().items():
        b0 = default_step_sizes(X)[0]
        cells = []
        for res in (
            gradient_descent(X, y, schedule="constant", steps=steps, step_size=b0),
            gradient_descent(X, y, schedule="constant", steps=steps),
        ):
            loss = res.trajectory["loss"]
            cells.append(
                f"{loss.max():.4g} / {loss[-1]:.4g}, {res.trajectory['train_error'][-1]:.3f}, "
                f"{res.status}, {res.step_sizes[0]:.4g}"
            )
        print(f"| {name} | {cells[0]} | {cells[1]} |")


def paper(seeds):
    print(
        "\n| n | d | kappa | changed | default: interpolates, train err, clean test err, "
        "attn clean, attn noisy | exact: the same |"
    )
    print("|---|---|---|---|---|---|")
    for (n, d), kappa in itertools.product(
        [(40, 2000), (40, 20000), (100, 20000)], [1, 2, 3, 4, 6, 8, 12]
    ):
        rows, changed = {"default": [], "exact": []}, 0
        for seed in range(seeds):
            dist = PaperDistribution(d=d, T=2, snr=math.sqrt(kappa / n), eta=0.15)
            train, test = dist.sample_train_test(n, 300, seed=seed)
            b0, b1 = default_step_sizes(train.X)
            runs = {
                "default": gradient_descent(train, test=test, record_steps=[2]),
                "exact": gradient_descent(train, test=test, record_steps=[2], beta0=b0, beta1=b1),
            }
            changed += not np.array_equal(runs["default"].p, runs["exact"].p)
            for key, res in runs.items():
                tj = res.trajectory
                rows[key].append(
                    [
                        res.interpolates,
                        tj["train_error"][-1],
                        tj["test_error_clean"][-1],
                        tj["attn_signal_clean"][-1],
                        tj["attn_signal_noisy"][-1],
                    ]
                )
        cells = []
        for key in ("default", "exact"):
            m = np.mean(rows[key], axis=0)
            cells.append(
                f"{round(m[0] * seeds)}/{seeds}, {m[1]:.3f}, {m[2]:.3f}, {m[3]:.2f}, {m[4]:.2f}"
            )
        print(f"| {n} | {d} | {kappa} | {changed}/{seeds} | {cells[0]} | {cells[1]} |", flush=True)


def phase_grid(seeds=5):
    runs = changed = changed_interpolating = flips = 0
    for n, snr in itertools.product(
        [8, 16, 32, 64, 128], [1, 0.557, 0.311, 0.173, 0.0965, 0.0538, 0.03]
    ):
        for seed in range(seeds):
            train = PaperDistribution(d=4000, T=2, snr=snr, eta=0.1).sample(n, seed=seed)
            b0, b1 = default_step_sizes(train.X)
            default = gradient_descent(train, record_steps=[2])
            exact = gradient_descent(train, record_steps=[2], beta0=b0, beta1=b1)
            differs = not np.array_equal(default.p, exact.p)
            runs += 1
            changed += differs
            changed_interpolating += differs and exact.interpolates
            flips += default.interpolates != exact.interpolates
    print(
        f"\nphase-diagram grid: {runs} runs, {changed} endpoints differ, "
        f"{changed_interpolating} of them in runs that interpolate with the exact steps, "
        f"{flips} runs change interpolation"
    )


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)  # the statuses are in the tables
    real_tokens()
    constant_real()
    paper(args.seeds)
    phase_grid()


if __name__ == "__main__":
    main()
