"""Cost of H attention heads in the kernel (token-Gram) form, against one head.

Measures, on one instance of the paper's distribution, the time of

* a kernel-form GD evaluation (loss and gradients of all heads from the Gram matrix), and
* the per-head part of a min-norm phi evaluation in
  :class:`margin_solver.multihead.MultiHeadForm` over
  :class:`margin_solver.alternating.KernelForm`: scores, softmax and the summed feature Gram;
* the whole phi evaluation (that plus the v-step, an n x n SVM whose cost depends on the
  Gram matrix it is given, not on H directly),

for each H, as the median of ``repeats`` calls, and prints each time with its ratio to H = 1:
linear scaling means ratios near H (the v-step, the same n x n SVM for every H, is a fixed
part of the phi evaluation). The one-off Gram product is not included (it is shared by every
H). Run::

    python -m margin_solver.bench.heads_speed --n 100 --T 4 --d 2000 --heads 1 2 4 8
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from margin_solver.alternating import KernelForm, evaluate_phi
from margin_solver.blas import single_threaded_blas
from margin_solver.data import PaperDistribution
from margin_solver.gd import _gd_state
from margin_solver.kernel import TokenGram, softmax
from margin_solver.multihead import MultiHeadForm


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(n: int, T: int, d: int, heads: Sequence[int], repeats: int, seed: int = 0) -> list[dict]:
    """Median seconds per H (kernel form) of a GD evaluation, of the per-head part of a phi
    evaluation and of the whole phi evaluation."""
    data = PaperDistribution(d=d, T=T, snr=0.5, eta=0.1).sample(n, seed=seed)
    X, y = data.X, data.y.astype(np.float64)
    gram = TokenGram(X)
    base = KernelForm(X, gram)
    rng = np.random.default_rng(seed)
    rows = []
    for h in heads:
        W0 = rng.normal(0.0, 1e-2 / np.sqrt(d), size=(2 * h, d))
        state = _gd_state("kernel", X, W0, h)
        W = state.W0 + rng.normal(0.0, 1e-3, size=state.W0.shape)
        form = MultiHeadForm(base, h)
        p = form.from_coefficients(rng.normal(0.0, 1.0 / (n * T), size=(h, n, T)))
        gd = _median_seconds(lambda: state.evaluate(W, y), repeats)
        gram_part = _median_seconds(lambda: form.feature_gram(softmax(form.scores(p))), repeats)
        phi = _median_seconds(lambda: evaluate_phi(form, y, p), repeats)
        rows.append({"heads": h, "gd_eval": gd, "feature_gram": gram_part, "phi_eval": phi})
    return rows


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
    print("| H | GD evaluation (ms) | ratio | scores + feature Gram (ms) | ratio "
          "| whole phi evaluation (ms) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{1e3 * r[c]:.3g} | {r[c] / rows[0][c]:.2f}" for c in cols]
        print(f"| {r['heads']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
