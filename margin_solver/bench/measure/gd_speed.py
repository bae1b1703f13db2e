"""Per-step time of our GD (dense and kernel forms) against a PyTorch autograd implementation.

Same model, loss (mean logistic), float64, CPU, full batch, constant step, zero init. The
per-step time is the slope between a short and a long run, ``(t(S2) - t(S1)) / (S2 - S1)``,
best of ``--repeats``, so one-off setup (the kernel form's Gram product, torch's tensor
conversion) is excluded from it and reported on its own. The iterates of all three are
cross-checked after ``S1`` steps. torch is not a project dependency: without it the torch
column is skipped with a message.

``--threads`` (default 1) fixes the BLAS threads of numpy and torch's intra-op threads
alike. On a shared, loaded machine multi-threaded BLAS on these matrix-vector products
thrashes (a 1000 x 1000 product measured 0.3 ms on one thread and 10-40 ms on two), so the
single-thread comparison is the fair and stable one.

    .venv/bin/python -m margin_solver.bench.measure.gd_speed --out results/gd_speed.json
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent

SIZES = [(500, 2, 1000), (100, 4, 50_000)]


def ours(train, form, steps, step):
    t0 = time.perf_counter()
    res = gradient_descent(
        train, schedule="constant", steps=steps, step_size=step, form=form, record_steps=[steps]
    )
    return time.perf_counter() - t0, res.v


def torch_gd(X, y, steps, step):
    import torch

    t0 = time.perf_counter()
    Xt = torch.from_numpy(X)
    yt = torch.from_numpy(y.astype(np.float64))
    d = X.shape[2]
    v = torch.zeros(d, dtype=torch.float64, requires_grad=True)
    p = torch.zeros(d, dtype=torch.float64, requires_grad=True)
    for _ in range(steps):
        s = torch.softmax(Xt @ p, dim=1)
        f = (s * (Xt @ v)).sum(dim=1)
        loss = torch.nn.functional.softplus(-yt * f).mean()
        gv, gp = torch.autograd.grad(loss, (v, p))
        with torch.no_grad():
            v -= step * gv
            p -= step * gp
    return time.perf_counter() - t0, v.detach().numpy().copy()


def slope(fn, s1, s2, repeats):
    best = np.inf
    for _ in range(repeats):
        t1, _ = fn(s1)
        t2, _ = fn(s2)
        best = min(best, (t2 - t1) / (s2 - s1))
    return best


def main(argv: list[str] | None = None) -> int:
    """Command line of the benchmark: time both forms (and torch if installed), print a table."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default="results/gd_speed.json")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="BLAS / torch threads (default 1)")
    args = ap.parse_args(argv)
    with threadpool_limits(limits=args.threads, user_api="blas"):
        _run(args, run_metadata(__spec__.name, argv))
    return 0


def _run(args: argparse.Namespace, meta: dict) -> None:
    try:
        import torch

        torch.set_num_threads(args.threads)
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
        print(
            "torch is not installed: the torch column is skipped "
            "(install it in your venv only: .venv/bin/pip install torch==2.13.0)"
        )
    rows = []
    for n, T, d in SIZES:
        dist = PaperDistribution(d=d, T=T, snr=float(np.sqrt(4 / n)), eta=0.15)
        train = dist.sample(n, seed=0)
        step = default_step_sizes(train.X)[0]
        heavy = n * T * d > 5e6
        s1, s2 = (5, 25) if heavy else (20, 220)
        # kernel steps are cheap next to the Gram product: many more steps for a clean slope
        steps = {"dense": (s1, s2), "kernel": (s1, s1 + 4000 if heavy else s1 + 1000)}
        row = {"n": n, "T": T, "d": d, "steps": steps, "threads": args.threads}
        ref = ours(train, "dense", s1, step)[1]
        for form in ("dense", "kernel"):
            run = functools.partial(ours, train, form, step=step)
            row[f"{form}_per_step_s"] = slope(run, *steps[form], args.repeats)
            t_short, v = ours(train, form, s1, step)
            row[f"{form}_setup_s"] = t_short - s1 * row[f"{form}_per_step_s"]
            row[f"{form}_max_rel_diff"] = float(np.linalg.norm(v - ref) / np.linalg.norm(ref))
        if torch_version is not None:
            yf = train.y.astype(np.float64)
            run = functools.partial(torch_gd, train.X, yf, step=step)
            row["torch_per_step_s"] = slope(run, s1, s2, args.repeats)
            row["torch_max_rel_diff"] = float(
                np.linalg.norm(torch_gd(train.X, yf, s1, step)[1] - ref) / np.linalg.norm(ref)
            )
            for form in ("dense", "kernel"):
                row[f"speedup_{form}_vs_torch"] = (
                    row["torch_per_step_s"] / row[f"{form}_per_step_s"]
                )
        rows.append(row)
        print(row, flush=True)
    write_json(args.out, {"meta": {**meta, "torch": torch_version}, "rows": rows})
    print(
        "\n| n | T | d | dense ms/step | kernel ms/step (setup s) | torch ms/step | "
        "dense speedup | kernel speedup | max rel. diff of v |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tms = f"{1e3 * r['torch_per_step_s']:.3f}" if "torch_per_step_s" in r else "skipped"
        sd = f"{r['speedup_dense_vs_torch']:.1f}x" if "torch_per_step_s" in r else "-"
        sk = f"{r['speedup_kernel_vs_torch']:.1f}x" if "torch_per_step_s" in r else "-"
        diff = max(r["kernel_max_rel_diff"], r.get("torch_max_rel_diff", 0.0))
        print(
            f"| {r['n']} | {r['T']} | {r['d']} | {1e3 * r['dense_per_step_s']:.3f} | "
            f"{1e3 * r['kernel_per_step_s']:.3f} ({r['kernel_setup_s']:.2f}) | "
            f"{tms} | {sd} | {sk} | {diff:.1e} |"
        )
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
