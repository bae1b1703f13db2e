"""How far past its ``time_limit`` a call returns: the margin a caller can expect (issue 43).

Each case is the call issue 43 (or its audit) found running past its limit, at the size it was
measured at (the first, MNIST 3 vs 8 tokens, is the issue's own: 206 s for a 10 s limit),
run in a fresh interpreter (so that cvxpy's first import, 1.5-2.3 s, falls inside the call,
as for a new user): the call alone is timed (``time.perf_counter`` around it; the data are
made before), ``--repeats`` times. The table gives the limit, the longest and the
shortest elapsed time, the largest overrun (elapsed - limit) and the status and what stopped
(the start of the message) of the slowest run. Timings depend on the machine's load: the
page says what the load was.

Usage::

    python -m margin_solver.bench.measure.time_limits [--repeats 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.fileio import write_json

#: (case, the limit in seconds, the data, the call) as Python source; ``data`` is made
#: before the clock starts.
CASES = (
    (
        "solve_min_norm(time_limit=10), MNIST 3 vs 8, n = 400, T = 16, d = 1024",
        10.0,
        "data, _ = mnist_train_test(400, 0.0, 0, 1, classes=(3, 8), lift=1024)",
        "solve_min_norm(data, R=1.0, time_limit=10.0)",
    ),
    (
        "global_lower_bound(R=3, time_limit=5), n = 40, T = 2, d = 40",
        5.0,
        "data = PaperDistribution(d=40, snr=0.5, eta=0.0).sample(40, seed=0)",
        "global_lower_bound(data.X, data.y, R=3.0, time_limit=5.0)",
    ),
    (
        "solve_min_norm(R=3, certify=True, time_limit=5), n = 40, T = 2, d = 40",
        5.0,
        "data = PaperDistribution(d=40, snr=0.5, eta=0.0).sample(40, seed=0)",
        "solve_min_norm(data, R=3.0, certify=True, time_limit=5.0)",
    ),
    (
        "solve_min_norm(n_random_starts=10**9, time_limit=5), n = 40, T = 3, d = 50",
        5.0,
        "data = PaperDistribution(d=50, T=3, snr=0.5, eta=0.0).sample(40, seed=0)",
        "solve_min_norm(data, R=1.0, n_random_starts=10**9, time_limit=5.0)",
    ),
    (
        "solve_min_norm_heads(heads=10**5, time_limit=5), n = 6, T = 2, d = 6",
        5.0,
        "data = PaperDistribution(d=6, snr=0.5, eta=0.0).sample(6, seed=0)",
        "solve_min_norm_heads(data, R=3.0, heads=10**5, time_limit=5.0)",
    ),
    (
        "solve_min_norm_heads(heads=4, n_random_starts=10**6, time_limit=5), n = 40, T = 2, d = 40",
        5.0,
        "data = PaperDistribution(d=40, snr=0.5, eta=0.0).sample(40, seed=0)",
        "solve_min_norm_heads(data, R=3.0, heads=4, n_random_starts=10**6, time_limit=5.0)",
    ),
)

_SCRIPT = """
import json, time, warnings
warnings.simplefilter("ignore")
from margin_solver import PaperDistribution, global_lower_bound, solve_min_norm
from margin_solver.minnorm.multihead import solve_min_norm_heads
from margin_solver.bench.realdata import mnist_train_test
{data}
start = time.perf_counter()
result = {call}
elapsed = time.perf_counter() - start
print(json.dumps({{"elapsed": elapsed, "status": result.status, "message": result.message}}))
"""


def run_case(data: str, call: str) -> dict:
    """Elapsed seconds, status and message of ``call`` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(data=data, call=call)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stopped(message: str) -> str:
    """What the message says stopped the call (its clause that names the time limit)."""
    for clause in message.split("; "):
        if "time limit" in clause or "not solved" in clause:
            return clause[:160]
    return message[:160]


def main(argv: Sequence[str] | None = None) -> int:
    """Run each of :data:`CASES`, print the table, optionally write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    rows = []
    for case, limit, data, call in CASES:
        runs = [run_case(data, call) for _ in range(args.repeats)]
        slowest = max(runs, key=lambda run: run["elapsed"])
        rows.append(
            {
                "call": case,
                "limit s": limit,
                "elapsed s (max)": slowest["elapsed"],
                "elapsed s (min)": min(run["elapsed"] for run in runs),
                "over s (max)": slowest["elapsed"] - limit,
                "status": slowest["status"],
                "stopped": _stopped(slowest["message"]),
            }
        )
        print(
            f"{case}: {slowest['elapsed']:.2f} s ({slowest['status']})",
            flush=True,
        )
    if args.out:
        write_json(args.out, {"meta": meta, "repeats": args.repeats, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
