"""The paper's Figure 1 as a study: test accuracy over (n, SNR) with the boundary fitted from the
cells, beside the authors' curve ``SNR^2 = 2.1 / n`` (Magen et al., arXiv 2410.07746).

The figure is a heatmap of test accuracy on *noisy* test labels (flipped at eta = 0.1, so about
0.5 on the harmful side and ``1 - eta = 0.9`` at best) over the sample size n (x) and the SNR
in [0, 1] (y); the authors' reply ties it to "many training steps" (W4) and gives neither d, T,
step sizes nor seeds. This study draws it for three methods side by side on the same cells
(one data draw per cell, shared by the methods: the sweep's point jobs):

* ``gd-long``: GD from zero with the constant default step for :data:`GD_STEPS` steps (the
  figure's most likely method);
* ``gd-two-step``: two GD steps at the package's default step sizes (Theorem 3.3's setting);
* ``min-norm``: the min-norm interpolator P_R at ``R = 100 / nu`` (token selection), not
  certified (``certify_max_n = 0``: the lower bound would cost more than the whole grid);
  at ``d = 2n`` without the search after the first starts (:func:`config`).

T = 2, eta = 0.1, and two dimensions: ``d = 2 n_max^2`` for every n (at least ``2 n^2``, the
theorems' regime, authors' reply Q3.1) and ``d = 2 n`` per n (the reply's Figure 4 claim).
n starts at 2: a sweep cell needs two samples (the checker's estimates and the grid refuse one).

The boundary (:func:`fit_boundary`): the constant ``kappa = n SNR^2`` whose curve
``SNR^2 = kappa / n`` best separates the cells with accuracy above the midpoint
``(0.5 + (1 - eta)) / 2`` from those below (fewest cells on the wrong side), fitted on the
seed-mean accuracies, with the interval of the per-seed fits. The same fit on the clean-label
error (midpoint 0.25) stands beside it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.bench.sweeps import SweepConfig, SweepGrid, load_results, run_sweep

__all__ = ["AUTHORS_KAPPA", "fit_boundary", "grids", "plot_figure1", "run_figure1"]

#: The authors' boundary curve in their Figure 1: ``SNR^2 = 2.1 / n``.
AUTHORS_KAPPA = 2.1
#: Steps of the long GD run (the sweep's ``gd-long`` default).
GD_STEPS = 1000
METHODS = ("gd-long", "gd-two-step", "min-norm")
LABELS = {
    "gd-long": f"long GD ({GD_STEPS} steps)",
    "gd-two-step": "two-step GD",
    "min-norm": r"min-norm $P_R$",
}
ETA, T = 0.1, 2
SWEEP_SEED = 2410_07746
#: Test samples per cell.
N_TEST = 500
#: Grid at each size: (n values, number of SNR values in [0, 1], seeds).
SIZES: dict[str, tuple[list[int], int, int]] = {
    "tiny": ([2, 4, 6], 4, 1),
    "quick": ([2, *range(5, 41, 5)], 12, 1),
    "full": (list(range(2, 41)), 60, 3),
}


def grids(
    size: str,
    dims: str = "n2",
    *,
    ns: Sequence[int] | None = None,
    snr_count: int | None = None,
    seeds: int | None = None,
) -> list[SweepGrid]:
    """The sweep grids of one run: ``dims="n2"`` (d = 2 n_max^2) or ``"2n"`` (d = 2 n per n).

    ``ns``, ``snr_count`` and ``seeds`` override the size's values (a reduced grid).
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}.")
    if dims not in ("n2", "2n"):
        raise ValueError(f"dims must be 'n2' or '2n', got {dims!r}.")
    base_n, base_snr, base_seeds = SIZES[size]
    ns = list(base_n if ns is None else ns)
    snr = np.linspace(0.0, 1.0, base_snr if snr_count is None else snr_count).round(4).tolist()
    seeds = base_seeds if seeds is None else seeds
    if dims == "n2":
        d = 2 * max(ns) ** 2
        return [SweepGrid(n=ns, d=[d], snr=snr, eta=[ETA], seeds=seeds, methods=list(METHODS))]
    return [
        SweepGrid(n=[n], d=[2 * n], snr=snr, eta=[ETA], seeds=seeds, methods=list(METHODS))
        for n in ns
    ]


def reduced_ns(step: int) -> list[int]:
    """Every ``step``-th n down from 40, and 2: a reduced grid that keeps n_max = 40 (so
    d = 2 n_max^2 and the cells the full grid shares with it stay the same)."""
    return sorted({*range(40, 1, -step), 2})


def config(dims: str = "n2") -> SweepConfig:
    """The sweep settings: no checker (only the test accuracies are drawn), uncertified P_R.

    At ``d = 2n = n T`` P_R runs its first starts only (``search_starts = 0``): the solver's
    automatic search, which runs whenever ``d <= n T``, took 8.7 s per cell on average and up
    to 76 s (n = 36-40 under load), against about 0.3 s without it.
    """
    min_norm: dict[str, Any] = {"R_scale": 100.0, "certify_max_n": 0}
    if dims == "2n":
        min_norm["search_starts"] = 0
    return SweepConfig(
        sweep_seed=SWEEP_SEED,
        n_test=N_TEST,
        method_options={"gd-long": {"steps": GD_STEPS}, "min-norm": min_norm},
        check=False,
    )


def fit_boundary(
    cells: Sequence[tuple[float, float, float]], midpoint: float, above_is_high: bool = True
) -> tuple[float, int]:
    """The constant ``kappa`` whose curve ``SNR^2 = kappa / n`` best splits the cells.

    Parameters
    ----------
    cells : sequence of (n, snr, value)
    midpoint : float
        A cell is on the high-SNR side when ``value >= midpoint`` (``above_is_high``) or
        ``value <= midpoint`` (otherwise: an error).
    above_is_high : bool, default=True

    Returns
    -------
    (kappa, wrong) : (float, int)
        The threshold and the number of cells on the wrong side of it. Candidates lie
        halfway (in log kappa) between neighbouring distinct cell kappas; among equally good
        ones the middle of their range is returned (the data cannot place it more finely).
        ``nan`` when no candidate exists (fewer than two distinct positive kappas).

    Examples
    --------
    >>> cells = [(n, s, 0.9 if n * s * s > 3 else 0.5) for n in (2, 4, 8) for s in (0.2, 0.5, 1)]
    >>> kappa, wrong = fit_boundary(cells, 0.7)
    >>> 2 < kappa < 4, wrong
    (True, 0)
    """
    kappa = np.array([n * s * s for n, s, _ in cells], dtype=float)
    value = np.array([v for *_, v in cells], dtype=float)
    keep = np.isfinite(value)
    kappa, value = kappa[keep], value[keep]
    high = value >= midpoint if above_is_high else value <= midpoint
    levels = np.unique(kappa[kappa > 0])
    if len(levels) < 2:
        return math.nan, int(high.sum())
    cands = np.sqrt(levels[:-1] * levels[1:])
    wrong = np.array([int(np.sum(high != (kappa > c))) for c in cands])
    best = np.flatnonzero(wrong == wrong.min())
    return float(np.sqrt(cands[best[0]] * cands[best[-1]])), int(wrong.min())


def _cells(
    rows: Sequence[dict[str, Any]], method: str, column: str, seed: int | None
) -> list[tuple[float, float, float]]:
    """(n, snr, mean of column over the selected seeds) per (n, snr) of one method.

    The mean adds the seeds in seed order, not in the file's row order (the order in which
    the sweep's workers finished): a sum's rounding depends on its order, and a mean that
    lands on the midpoint could otherwise move a cell across it between two runs of the
    same cells (one cell of the full grid's 2340 did, issue 42).
    """
    acc: dict[tuple[float, float], list[tuple[int, float]]] = {}
    for r in rows:
        if r["method"] != method or (seed is not None and int(r["seed"]) != seed):
            continue
        value = float(r[column]) if r.get(column) is not None else math.nan
        acc.setdefault((float(r["n"]), float(r["snr"])), []).append((int(r["seed"]), value))
    out = []
    for (n, s), pairs in sorted(acc.items()):
        v = [value for _, value in sorted(pairs)]
        out.append((n, s, float(np.nanmean(v)) if np.isfinite(v).any() else math.nan))
    return out


def _prepare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``test_accuracy_noisy = 1 - test_error_noisy`` (the figure's quantity)."""
    out = []
    for r in rows:
        err = r.get("test_error_noisy")
        ok = err is not None and math.isfinite(float(err))
        out.append({**r, "test_accuracy_noisy": 1.0 - float(err) if ok else math.nan})
    return out


#: What is fitted: (column, midpoint, high side is above the midpoint).
FITS = {
    "noisy accuracy": ("test_accuracy_noisy", (0.5 + (1.0 - ETA)) / 2, True),
    "clean error": ("test_error_clean", 0.25, False),
}


def boundary_table(rows: list[dict[str, Any]], dims: str) -> list[dict[str, Any]]:
    """Per method: the fitted kappa (seed-mean cells), its interval over seeds, wrong cells."""
    rows = _prepare(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    out = []
    for method in METHODS:
        line: dict[str, Any] = {"d": "2 n_max^2" if dims == "n2" else "2 n", "method": method}
        for name, (column, mid, above) in FITS.items():
            cells = _cells(rows, method, column, None)
            kappa, wrong = fit_boundary(cells, mid, above)
            per_seed = [fit_boundary(_cells(rows, method, column, s), mid, above)[0] for s in seeds]
            tag = "acc" if name == "noisy accuracy" else "clean"
            line[f"kappa_{tag}"] = kappa
            line[f"kappa_{tag}_seeds"] = [min(per_seed), max(per_seed)]
            line[f"wrong_{tag}"] = f"{wrong}/{len(cells)}"
        side = [r for r in rows if r["method"] == method and r["kappa"] > line["kappa_acc"]]
        side.sort(key=lambda r: (float(r["n"]), float(r["snr"]), int(r["seed"])))  # as _cells
        line["acc_above"] = float(np.nanmean([r["test_accuracy_noisy"] for r in side]))
        line["clean_err_above"] = float(np.nanmean([float(r["test_error_clean"]) for r in side]))
        line["authors_kappa"] = AUTHORS_KAPPA
        out.append(line)
    return out


def plot_figure1(csvs: dict[str, Path], out: Path) -> list[Path]:
    """Draw the study's figures from its CSVs; return the paths written.

    ``out`` (``.pdf``, vector, and ``.png``): the paper's figure, noisy-label test accuracy at
    ``d = 2 n_max^2``, one panel per method, with the fitted boundary (its band: the fits of
    single seeds) and the authors' curve. ``out`` + ``_all``: every run's noisy-label accuracy
    and clean-label error (rows) for every method (columns).
    """
    panels = []
    for dims, csv in csvs.items():
        rows = _prepare(load_results(csv))
        fits = {t["method"]: t for t in boundary_table(rows, dims)}
        d_text = f"$d = 2\\,n_{{\\max}}^2 = {int(rows[0]['d'])}$" if dims == "n2" else "$d = 2n$"
        panels.append((rows, fits, d_text, "test_accuracy_noisy"))
        panels.append((rows, fits, d_text, "test_error_clean"))
    main = _draw(panels[:1], out)
    every = _draw(panels, out.with_name(out.name + "_all"))
    return [*main, *every]


def _draw(panels: list[tuple[Any, ...]], out: Path) -> list[Path]:
    """Heatmap rows of ``panels`` (rows, fits, d label, column), methods as columns."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    from margin_solver.bench.plots import save_figure
    from margin_solver.bench.style import figure_style

    with figure_style():
        fig = Figure(
            figsize=(4.0 * len(METHODS) + 1.2, 3.4 * len(panels) + 0.4), layout="constrained"
        )
        axes = fig.subplots(len(panels), len(METHODS), squeeze=False, sharex=True, sharey=True)
        for i, (rows, fits, d_text, column) in enumerate(panels):
            ns = sorted({float(r["n"]) for r in rows})
            snrs = sorted({float(r["snr"]) for r in rows})
            acc = column == "test_accuracy_noisy"
            for j, method in enumerate(METHODS):
                ax = axes[i, j]
                grid = np.full((len(snrs), len(ns)), np.nan)
                for n, s, v in _cells(rows, method, column, None):
                    grid[snrs.index(s), ns.index(n)] = v
                image = ax.pcolormesh(
                    _edges(ns),
                    _edges(snrs),
                    grid,
                    cmap=colormaps["cividis" if acc else "cividis_r"],
                    vmin=0.5 if acc else 0.0,
                    vmax=1.0 - ETA if acc else 0.5,
                    shading="flat",
                )
                x = np.linspace(max(ns[0], 1.0), ns[-1], 200)
                ax.plot(x, np.sqrt(AUTHORS_KAPPA / x), "--", color="white", lw=2.0)
                ax.plot(
                    x,
                    np.sqrt(AUTHORS_KAPPA / x),
                    "--",
                    color="black",
                    lw=1.0,
                    label=r"authors: $\mathrm{SNR}^2 = 2.1/n$",
                )
                fit = fits[method]
                k = fit["kappa_acc" if acc else "kappa_clean"]
                lo, hi = fit["kappa_acc_seeds" if acc else "kappa_clean_seeds"]
                if math.isfinite(k):
                    ax.plot(
                        x,
                        np.sqrt(k / x),
                        "-",
                        color="#d55e00",
                        lw=1.8,
                        label=rf"fitted: $\kappa = {k:.2g}$",
                    )
                if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
                    ax.fill_between(
                        x, np.sqrt(lo / x), np.sqrt(hi / x), color="#d55e00", alpha=0.25, lw=0
                    )
                ax.set_ylim(snrs[0], snrs[-1])
                what = "" if acc else ": clean-label error"
                ax.set_title(f"{LABELS[method]}, {d_text}{what}", fontsize=10)
                if i == len(panels) - 1:
                    ax.set_xlabel("$n$ (training samples)")
                if j == 0:
                    ax.set_ylabel("SNR")
                ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
            fig.colorbar(
                image,
                ax=axes[i, :].tolist(),
                label="test accuracy (noisy labels)" if acc else "test error (clean labels)",
            )
        fig.suptitle(
            rf"Test accuracy (noisy labels) over $(n, \mathrm{{SNR}})$, $T = {T}$, "
            rf"$\eta = {ETA:g}$ (mean over seeds; orange band: fits of single seeds)",
            fontsize=11,
        )
        return [save_figure(fig, out.with_suffix(suffix)) for suffix in (".pdf", ".png")]


def _edges(centres: Sequence[float]) -> np.ndarray:
    """Cell edges halfway between the centres (a non-uniform grid draws true to scale)."""
    c = np.asarray(centres, dtype=float)
    if len(c) == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[:-1] + c[1:]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def _markdown(tables: list[dict[str, Any]], timing: dict[str, float]) -> str:
    lines = [
        "| d | method | fitted kappa (noisy acc. 0.7) | seeds' range | wrong cells "
        "| fitted kappa (clean err. 0.25) | seeds' range | wrong cells "
        "| noisy acc. above | clean err. above | authors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tables:
        lo, hi = t["kappa_acc_seeds"]
        clo, chi = t["kappa_clean_seeds"]
        lines.append(
            f"| {t['d']} | {t['method']} | {t['kappa_acc']:.3g} | {lo:.3g}-{hi:.3g} "
            f"| {t['wrong_acc']} | {t['kappa_clean']:.3g} | {clo:.3g}-{chi:.3g} "
            f"| {t['wrong_clean']} | {t['acc_above']:.3f} | {t['clean_err_above']:.3f} "
            f"| {t['authors_kappa']:g} |"
        )
    lines.append("")
    lines += [f"- {name}: {sec:.0f} s" for name, sec in timing.items()]
    return "\n".join(lines) + "\n"


def run_figure1(
    out: Path,
    size: str,
    *,
    ns: Sequence[int] | None = None,
    snr_count: int | None = None,
    seeds: int | None = None,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> tuple[Path, Path, str, str, list[dict[str, Any]]]:
    """Run (or resume) both dimensions' sweeps, fit the boundaries and draw the figure.

    Returns (csv of the d = 2 n_max^2 run, png, markdown table, message, boundary rows).
    """
    out = Path(out)
    csvs, messages, tables, timing = {}, [], [], {}
    for dims in ("n2", "2n"):
        csv = out / f"figure1_{dims}.csv"
        start = time.perf_counter()
        res = run_sweep(
            grids(size, dims, ns=ns, snr_count=snr_count, seeds=seeds),
            csv,
            config(dims),
            jobs=jobs,
            scheduler=scheduler,
            progress=progress,
        )
        timing[f"d = {'2 n_max^2' if dims == 'n2' else '2n'} sweep (this run)"] = (
            time.perf_counter() - start
        )
        messages.append(f"{dims}: {res.message}")
        csvs[dims] = csv
        tables += boundary_table(load_results(csv), dims)
    png = plot_figure1(csvs, out / "figure1")[1]
    return csvs["n2"], png, _markdown(tables, timing), "; ".join(messages), tables


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study at a size, optionally on a reduced grid, and write its JSON results."""
    from margin_solver.bench.provenance import run_metadata
    from margin_solver.core.fileio import atomic_write_text, write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="quick")
    ap.add_argument("--out", type=Path, required=True, help="folder of the CSVs and figures")
    ap.add_argument("--n-step", type=int, help="every k-th n down from 40, and 2 (a reduced grid)")
    ap.add_argument("--snr-count", type=int, help="SNR values in [0, 1]")
    ap.add_argument("--seeds", type=int)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--json", type=Path, help="also write the boundary rows as JSON")
    args = ap.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    ns = None if args.n_step is None else reduced_ns(args.n_step)
    args.out.mkdir(parents=True, exist_ok=True)
    _, png, text, message, rows = run_figure1(
        args.out, args.size, ns=ns, snr_count=args.snr_count, seeds=args.seeds, jobs=args.jobs
    )
    atomic_write_text(args.out / "figure1.md", text)
    if args.json:
        write_json(args.json, {"meta": meta, "rows": rows})
    print(message)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
