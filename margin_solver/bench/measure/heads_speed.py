"""Cost of H attention heads in the kernel (token-Gram) form, against one head.

Measures, on one instance of the paper's distribution, the time of

* a kernel-form GD evaluation (loss and gradients of all heads from the Gram matrix), and
* the per-head part of a min-norm phi evaluation in
  :class:`margin_solver.minnorm.multihead.MultiHeadForm` over
  :class:`margin_solver.descent.alternating.KernelForm`: scores, softmax and the summed
  feature Gram;
* the whole phi evaluation (that plus the v-step, an n x n SVM whose cost depends on the
  Gram matrix it is given, not on H directly),

for each H, as the median of ``repeats`` calls (the H values in turn), and prints each time with its
ratio to H = 1: linear scaling means ratios near H (the v-step, the same n x n SVM for every H, is a
fixed part of the phi evaluation). The one-off Gram product is not included (it is shared by every
H). Run::

    python -m margin_solver.bench.measure.heads_speed --n 100 --T 4 --d 2000 --heads 1 2 4 8
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram, softmax
from margin_solver.descent.alternating import KernelForm, evaluate_phi
from margin_solver.gd.endpoints import _gd_state
from margin_solver.minnorm.multihead import MultiHeadForm


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(
    n: int, T: int, d: int, heads: Sequence[int], repeats: int, seed: int = 0
) -> list[dict]:
    """Median seconds per H (kernel form) of a GD evaluation, of the per-head part of a phi
    evaluation and of the whole phi evaluation.

    The H values are timed in turn within each repetition (round robin), so that a change of
    the machine's load during the run affects every H alike and the ratios stay comparable.
    """
    data = PaperDistribution(d=d, T=T, snr=0.5, eta=0.1).sample(n, seed=seed)
    X, y = data.X, data.y.astype(np.float64)
    base = KernelForm(X, TokenGram(X))
    rng = np.random.default_rng(seed)
    calls = {}
    for h in heads:
        W0 = rng.normal(0.0, 1e-2 / np.sqrt(d), size=(2 * h, d))
        state = _gd_state("kernel", X, W0, h)
        W = state.W0 + rng.normal(0.0, 1e-3, size=state.W0.shape)
        form = MultiHeadForm(base, h)
        p = form.from_coefficients(rng.normal(0.0, 1.0 / (n * T), size=(h, n, T)))
        calls[h] = {
            "gd_eval": lambda state=state, W=W: state.evaluate(W, y),
            "feature_gram": lambda form=form, p=p: form.feature_gram(softmax(form.scores(p))),
            "phi_eval": lambda form=form, p=p: evaluate_phi(form, y, p),
        }
    times: dict[tuple[int, str], list[float]] = {}
    for _ in range(repeats):
        for h in heads:
            for name, fn in calls[h].items():
                times.setdefault((h, name), []).append(_seconds(fn))
    return [
        {"heads": h, **{name: statistics.median(times[h, name]) for name in calls[h]}}
        for h in heads
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per H: seconds and ratio to the first H of the list."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--T", type=int, default=4)
    parser.add_argument("--d", type=int, default=2000)
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    with single_threaded_blas():
        rows = measure(args.n, args.T, args.d, args.heads, args.repeats)
    print(f"n={args.n} T={args.T} d={args.d} (kernel form, median of {args.repeats}, 1 thread)")
    cols = ("gd_eval", "feature_gram", "phi_eval")
    print(
        "| H | GD evaluation (ms) | ratio | scores + feature Gram (ms) | ratio "
        "| whole phi evaluation (ms) | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{1e3 * r[c]:.3g} | {r[c] / rows[0][c]:.2f}" for c in cols]
        print(f"| {r['heads']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
