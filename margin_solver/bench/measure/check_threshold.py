"""Where does the hard-selection min-norm interpolator switch from memorising to the signal?

For T = 2 the min-norm band (kappa_harmful, kappa_benign) of the checker rests on a norm comparison
(docs/theory.md, "Theorem conditions"): fitting every clean sample through the signal costs
||v||^2 ~ 2 / rho^2 plus the noisy samples' noise, memorising every sample through its noise
token costs ~ n / (sigma^2 d), so the signal pattern wins once kappa > kappa* = 2 / (1 - eta).
The first study measures, on sampled data, the exact v-step norms (LDP engine) of the two token
selections and the share of seeds where the signal selection is cheaper, next to kappa* and the
checker's prediction. The second calibrates the interpolation row (median noise cross-talk,
about sqrt(n (T - 1) / d)): it runs a plain two-step GD (zero init, mean logistic loss, steps
beta1 then beta2 over a grid; a local helper, not the package's GD module) and records whether
some step pair fits every training sample. The third times ``check_conditions`` at growing
n T (the noise Gram matrix is subsampled above ``max_tokens``).

Run: ``.venv/bin/python -m margin_solver.bench.measure.check_threshold --out
results/check_threshold`` (a shim over :func:`main`)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import atomic_write_text, write_json
from margin_solver.core.kernel import loss_and_grads, margins
from margin_solver.svm.vstep import solve_vstep
from margin_solver.theory import Constants, check_conditions

KAPPAS = (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0)


def selection_norms(train) -> tuple[float, float]:
    """SVM norms of the signal selection (clean -> signal, noisy -> noise) and of memorising."""
    n = train.n
    signal_pos = train.signal_index
    noise_pos = 1 - signal_pos  # T = 2
    benign_pos = np.where(train.flipped, noise_pos, signal_pos)
    rows = np.arange(n)
    y = train.y.astype(float)
    benign = solve_vstep(train.X[rows, benign_pos], y, solver="ldp")
    memorise = solve_vstep(train.X[rows, noise_pos], y, solver="ldp")
    return benign.norm, memorise.norm


def threshold_study(n: int, d: int, eta: float, seeds: int) -> list[dict]:
    rows = []
    for kappa in KAPPAS:
        dist = PaperDistribution(d=d, T=2, snr=math.sqrt(kappa / n), eta=eta)
        wins = []
        for seed in range(seeds):
            train = dist.sample(n, seed=seed)
            b, m = selection_norms(train)
            wins.append(b < m)
        predicted = check_conditions(dist.sample(n, seed=0)).predicted_regime
        rows.append(
            {
                "n": n,
                "d": d,
                "eta": eta,
                "kappa": kappa,
                "kappa_star": 2 / (1 - eta),
                "signal_share": float(np.mean(wins)),
                "seeds": seeds,
                "predicted": predicted,
            }
        )
        print(
            f"n={n} d={d} eta={eta} kappa={kappa:<5} signal cheaper in "
            f"{rows[-1]['signal_share']:.2f} of {seeds} seeds; checker predicts {predicted}"
        )
    return rows


STEP1 = (0.1, 1.0, 10.0)
STEP2 = (1.0, 10.0, 100.0, 1e3, 1e4)


def two_step_fit(train) -> float:
    """Best training accuracy of two GD steps from zero over the (beta1, beta2) grid."""
    y = train.y.astype(float)
    zero = np.zeros(train.d)
    grad1 = loss_and_grads(train.X, y, zero, zero).grad_v  # p does not move at step 1
    best = 0.0
    for b1 in STEP1:
        v1 = -b1 * grad1
        g = loss_and_grads(train.X, y, v1, zero)
        for b2 in STEP2:
            m = margins(train.X, y, v1 - b2 * g.grad_v, -b2 * g.grad_p)
            best = max(best, float(np.mean(m > 0)))
    return best


def interpolation_study(n: int, T: int, kappa: float, seeds: int) -> list[dict]:
    rows = []
    for ratio in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0):
        d = int(ratio * n * (T - 1))
        dist = PaperDistribution(d=d, T=T, snr=math.sqrt(kappa / n), eta=0.1)
        fits, crosstalk, predicted = [], [], []
        for seed in range(seeds):
            train = dist.sample(n, seed=seed)
            fits.append(two_step_fit(train))
            report = check_conditions(train, method="two-step-gd")
            crosstalk.append(report.condition("noise_crosstalk").value)
            predicted.append(report.predicted_regime)
        rows.append(
            {
                "n": n,
                "T": T,
                "d": d,
                "ratio": ratio,
                "kappa": kappa,
                "seeds": seeds,
                "interpolating_share": float(np.mean(np.array(fits) == 1.0)),
                "mean_best_train_acc": float(np.mean(fits)),
                "median_crosstalk": float(np.median(crosstalk)),
                "predicted_no_interpolation": float(
                    np.mean([p == "no interpolation" for p in predicted])
                ),
            }
        )
        r = rows[-1]
        print(
            f"two-step GD n={n} T={T} d={d} (d/(n(T-1))={ratio}): interpolates in "
            f"{r['interpolating_share']:.2f} of seeds, mean best train acc "
            f"{r['mean_best_train_acc']:.3f}, crosstalk {r['median_crosstalk']:.2f}, "
            f"'no interpolation' predicted in {r['predicted_no_interpolation']:.2f}"
        )
    return rows


def timing_study(d: int) -> list[dict]:
    rows = []
    for n, T in ((500, 2), (2000, 2), (10000, 2), (2000, 5)):
        ds = PaperDistribution(d=d, T=T, snr=math.sqrt(4 / n), eta=0.1).sample(n, seed=0)
        start = time.perf_counter()
        report = check_conditions(ds)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "n": n,
                "T": T,
                "d": d,
                "nT": n * T,
                "seconds": seconds,
                "subsampled": report.noise.subsampled,
                "gram_tokens": report.noise.n_gram_tokens,
            }
        )
        print(
            f"check_conditions n={n} T={T} d={d}: {seconds:.2f} s "
            f"(noise Gram on {report.noise.n_gram_tokens} tokens)"
        )
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    lines = [",".join(rows[0])] + [",".join(str(r[k]) for k in rows[0]) for r in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")


def plot(path: Path, rows: list[dict]) -> None:
    from matplotlib.figure import Figure

    from margin_solver.bench.plots import save_figure
    from margin_solver.bench.style import figure_style

    c = Constants()
    with figure_style():
        fig = Figure(figsize=(6, 3.5))
        ax = fig.add_subplot()
        # Marker size and dash differ per line: equal shares draw lines on top of each other.
        looks = [("o", 7, "-"), ("s", 5, "--"), ("^", 4, ":"), ("D", 3, "-.")]
        for k, key in enumerate(sorted({(r["n"], r["eta"]) for r in rows})):
            sel = [r for r in rows if (r["n"], r["eta"]) == key]
            marker, size, dash = looks[k % len(looks)]
            ax.plot(
                [r["kappa"] for r in sel],
                [r["signal_share"] for r in sel],
                marker=marker,
                ms=size,
                ls=dash,
                label=f"$n = {key[0]}$, $\\eta = {key[1]}$ ($\\kappa^* = {2 / (1 - key[1]):.2f}$)",
            )
        ax.axvspan(
            c.kappa_harmful,
            c.kappa_benign,
            color="grey",
            alpha=0.2,
            label=f"checker band $({c.kappa_harmful:g}, {c.kappa_benign:g})$",
        )
        ax.set_xscale("log")
        ax.set_xticks(KAPPAS, [f"{k:g}" for k in KAPPAS])
        ax.minorticks_off()
        ax.set_xlabel(r"$\kappa = n\,\mathrm{SNR}^2$")
        ax.set_ylabel("share of seeds: signal selection cheaper")
        ax.legend()
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    """Command line of the study: the three studies into ``--out`` (CSV, JSON, figure)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/check_threshold")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    rows = []
    for n, d, eta in ((40, 2000, 0.1), (40, 2000, 0.2), (100, 5000, 0.1)):
        rows += threshold_study(n, d, eta, args.seeds)
        write_csv(out / "threshold.csv", rows)
    gd_rows = []
    for T in (2, 3):
        gd_rows += interpolation_study(n=100, T=T, kappa=8.0, seeds=args.seeds // 2)
        write_csv(out / "interpolation.csv", gd_rows)
    timing = timing_study(d=1000)
    write_csv(out / "timing.csv", timing)
    write_json(
        out / "check_threshold.json",
        {
            "meta": meta,
            "threshold": rows,
            "interpolation": gd_rows,
            "timing": timing,
        },
    )
    plot(out / "threshold.png", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
