"""Cost of a whole short ``gradient_descent`` call against one torch autograd step.

A sweep or a user calling ``gradient_descent(steps=1)`` pays the call's setup (validation,
step sizes, recording, the endpoint's evaluation) besides the step itself. This times, side
by side in one run at the sizes of :data:`margin_solver.bench.measure.gd_speed.SIZES`, single BLAS
thread, best of ``--repeats`` (the call and the torch step timed in turn, so that a change
of load during the run weighs on both alike):

- ``call_1``: ``gradient_descent(train, schedule="constant", steps=1, step_size=step)``
  with its default recording (steps 0 and 1), the whole call;
- ``numpy_step``: one step of our dense form alone (the per-step slope of long runs, as in
  :mod:`~margin_solver.bench.measure.gd_speed`);
- ``torch_step``: one autograd step of the same model (forward, backward, update) with
  torch, when torch is importable (it is not a project dependency);
- ``call_long``: a ``steps=LONG_STEPS`` call with the defaults (the form ``"auto"`` picks,
  the default recording), against ``LONG_STEPS`` torch steps (the torch step's time times
  ``LONG_STEPS``): long runs must stay faster than torch.

    .venv/bin/python -m margin_solver.bench.measure.gd_call [--repeats 7] \
        [--out docs/results/gd_call.json]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from margin_solver.bench.measure.gd_speed import SIZES, ours, slope, torch_gd
from margin_solver.bench.provenance import run_metadata
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent

#: Steps of the long call.
LONG_STEPS = 500


def _best(fn: Callable[[], object], repeats: int) -> float:
    return _best_in_turn([fn], repeats)[0]


def _best_in_turn(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """Best of ``repeats`` timings of each function, timed in turn (a, b, a, b, ...), so that
    the load of a shared machine changing during the run weighs on all of them alike."""
    best = [np.inf] * len(fns)
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    """Print one table row per size: the call, one numpy step, one torch step, ratios; with
    ``--out``, also write the rows as a results file (:mod:`margin_solver.bench.page`)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    try:
        import torch

        torch.set_num_threads(1)
        meta["torch"] = torch.__version__
    except ImportError:
        meta["torch"] = None
        print("torch is not importable: the torch columns are skipped")
    print(
        "| n | T | d | call steps=1 ms | numpy step ms | torch step ms | call / torch | "
        f"call / numpy step | call steps={LONG_STEPS} ms | long / torch |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for n, T, d in SIZES:
            rows.append(_row(n, T, d, args.repeats, meta["torch"] is not None))
            r = rows[-1]
            print(
                f"| {n} | {T} | {d} | {r['call_1_ms']:.2f} | {r['numpy_step_ms']:.2f} | "
                f"{r['torch_step_ms']:.2f} | {r['call_1_over_torch_step']:.2f} | "
                f"{r['call_1_ms'] / r['numpy_step_ms']:.2f} | {r['call_long_ms']:.1f} | "
                f"{r['call_long_over_torch']:.2f} |",
                flush=True,
            )
    if args.out:
        write_json(args.out, {"meta": meta, "rows": rows})
        print(f"wrote {args.out}")
    return 0


def _row(n: int, T: int, d: int, repeats: int, has_torch: bool) -> dict[str, float]:
    """The timings of one size (milliseconds; NaN for torch when it is not importable)."""
    train = PaperDistribution(d=d, T=T, snr=float(np.sqrt(4 / n)), eta=0.15).sample(n, 0)
    step = default_step_sizes(train.X)[0]
    call = functools.partial(gradient_descent, train, schedule="constant", steps=1, step_size=step)
    timed = [call]
    if has_torch:
        yf = train.y.astype(np.float64)
        timed.append(functools.partial(torch_gd, train.X, yf, 1, step))
    for fn in timed:
        fn()  # warm-up (first-call imports and caches)
    t_call, t_torch = [*_best_in_turn(timed, repeats), float("nan")][:2]
    t_step = slope(functools.partial(ours, train, "dense", step=step), 2, 12, repeats)
    long = functools.partial(
        gradient_descent, train, schedule="constant", steps=LONG_STEPS, step_size=step
    )
    t_long = _best(long, max(1, repeats // 3))
    return {
        "n": n,
        "T": T,
        "d": d,
        "call_1_ms": 1e3 * t_call,
        "numpy_step_ms": 1e3 * t_step,
        "torch_step_ms": 1e3 * t_torch,
        "call_1_over_torch_step": t_call / t_torch,
        "call_long_ms": 1e3 * t_long,
        "call_long_over_torch": t_long / (LONG_STEPS * t_torch),
    }


if __name__ == "__main__":
    sys.exit(main())
