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
- ``call_long``: a ``steps=LONG_STEPS`` call, to show long runs are unchanged.

    .venv/bin/python -m margin_solver.bench.measure.gd_call [--repeats 7]
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
from margin_solver.core.data import PaperDistribution
from margin_solver.gd.endpoints import default_step_sizes, gradient_descent

#: Steps of the long call.
LONG_STEPS = 200


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
    """Print one table row per size: the call, one numpy step, one torch step, ratios."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    try:
        import torch

        torch.set_num_threads(1)
        has_torch = True
    except ImportError:
        has_torch = False
        print("torch is not importable: the torch column is skipped")
    print(
        "| n | T | d | call steps=1 ms | numpy step ms | torch step ms | call / torch | "
        "call / numpy step | call steps=200 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with threadpool_limits(limits=1, user_api="blas"):
        for n, T, d in SIZES:
            train = PaperDistribution(d=d, T=T, snr=float(np.sqrt(4 / n)), eta=0.15).sample(n, 0)
            step = default_step_sizes(train.X)[0]
            call = functools.partial(
                gradient_descent, train, schedule="constant", steps=1, step_size=step
            )
            timed = [call]
            if has_torch:
                yf = train.y.astype(np.float64)
                timed.append(functools.partial(torch_gd, train.X, yf, 1, step))
            for fn in timed:
                fn()  # warm-up (first-call imports and caches)
            t_call, t_torch = [*_best_in_turn(timed, args.repeats), float("nan")][:2]
            t_step = slope(functools.partial(ours, train, "dense", step=step), 2, 12, args.repeats)
            t_long = _best(
                functools.partial(
                    gradient_descent,
                    train,
                    schedule="constant",
                    steps=LONG_STEPS,
                    step_size=step,
                    form="dense",
                    record_steps=[LONG_STEPS],
                ),
                max(1, args.repeats // 3),
            )
            print(
                f"| {n} | {T} | {d} | {1e3 * t_call:.2f} | {1e3 * t_step:.2f} | "
                f"{1e3 * t_torch:.2f} | {t_call / t_torch:.2f} | {t_call / t_step:.2f} | "
                f"{1e3 * t_long:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
