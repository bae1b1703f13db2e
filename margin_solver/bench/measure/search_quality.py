"""Quality of solve_min_norm's answer against a patient independent search (issue 19).

Generated instances of several kinds (``gaussian``; ``cls``: a token shared by every sample,
like a CLS token; ``integer``: tokens in {-2..2}, with ties; ``scales``: Gaussian tokens times
10^U(-2, 2) each; ``paper``: the paper's model, kappa in {0.25, 1, 4}, eta = 0.15) with n in
6..14, T in 2..4, d in {2, 3, 6, 12, 40} (n > d and n < d) and R sqrt(d) in
{0.1, 1, 10, 100, 1e4}; with ``--kinds wine,cancer,digits`` (or any mix), real tokens instead:
the first two classes of scikit-learn's bundled wine, breast cancer or digits data,
standardised (:func:`margin_solver.bench.realdata.tabular_two_classes`), n rows drawn by the
instance's seed, each cut into T blocks of d consecutive features, (T, d) one of
:data:`REAL_CUTS`. On each:

``before``
    ``solve_min_norm(X, y, R, search_starts=0)``: the first starts only (the solver before
    issue 19).
``default``
    ``solve_min_norm(X, y, R)``: default options.
``certified``
    ``solve_min_norm(X, y, R, certify=True)``.
``patient``
    The independent search written here, not in the library: ``--random`` random starts
    (half on the sphere of radius R, half at a uniform radius inside the ball) and the
    realisations (attention SVM at norm R) of the ``--selections`` token selections of
    smallest selection-SVM norm that some p realises (all T^n selections when T^n <= 4096,
    else 3000 random ones), each refined by the exact alternating descent.
``patient_2``, ``patient_3``, ...
    With ``--patients K``: the same patient search again with other seeds (the instance's
    seed plus ``j * PATIENT_SEED_STEP``), independent of the first. How often one patient
    search misses the best known by more than 1e-3 says how far "the best known" is from
    a sure optimum, and is the yardstick for ``default``: a solver that misses no more
    often than an independent patient search does matches such a search.

"Best known" is the smallest norm any of them found. Reported per method and kind: the share of
instances within 1e-3 (relative) of the best known (an instance where nobody found a feasible
point counts as a match for a method that found none either), the worst ratio to the best known,
and the seconds; and the hard-selection lower bound LB (valid for every R), to show how far
the best known can be from the optimum. With the ``certified`` solve, the certificate's
words are checked against the best known (:func:`certificate_checks`): an ``optimal`` whose
norm is more than ``gap_tol`` above it, a lower bound above it, an ``infeasible`` where
someone found a feasible point.

Usage::

    .venv/bin/python -m margin_solver.bench.measure.search_quality [--instances 250] [--random 30]
        [--selections 20] [--patients 1] [--samples 6,14] [--kinds wine,cancer,digits]
        [--ideas selection,continuation,random] [--out FILE.json]
    .venv/bin/python -m margin_solver.bench.measure.search_quality --summarise FILE.json
    .venv/bin/python -m margin_solver.bench.measure.search_quality --ablate FILE.json [--first 60]
        [--idea-sets "none;selection;continuation;random;selection,continuation,random"]

``--ablate`` reruns only the default solve on the first instances of an earlier run, once per
set of search families (``none``: search off), and compares each with that run's best known
norm (lowered by whatever the ablation finds). ``--ideas`` and ``--ablate`` change the
families through ``solve_min_norm(..., options={"search_ideas": ...})``, the strategy table
(:class:`margin_solver.core.strategy.Strategy`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections import Counter

import numpy as np

from margin_solver.bench.page import rows_table
from margin_solver.bench.provenance import run_metadata
from margin_solver.bench.realdata import tabular_two_classes
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.kernel import TokenGram
from margin_solver.core.strategy import DEFAULT_STRATEGY, FAMILIES
from margin_solver.descent.alternating import DenseForm, KernelForm, descend, norm
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.svm.selection import attention_svm, selection_svm

KINDS = ("gaussian", "cls", "integer", "scales", "paper")
#: Real tokens: (T, d) cuts of each bundled data set's features (T d <= its feature count).
REAL_CUTS = {"wine": ((2, 6), (3, 4)), "cancer": ((3, 10), (5, 6)), "digits": ((4, 16), (8, 8))}
#: Every kind of :func:`make_instance`.
ALL_KINDS = KINDS + tuple(REAL_CUTS)
METHODS = ("before", "default", "certified", "patient")
#: Seed offset between the patient searches of ``--patients``.
PATIENT_SEED_STEP = 10**6
#: The library's solves of an instance and their options.
SOLVES = {
    "before": {"search_starts": 0},
    "default": {},
    "certified": {"certify": True},
}
MATCH_RTOL = 1e-3
SEED = 20261130
#: Range of n of the instances (inclusive; ``--samples``).
SAMPLES = (6, 14)


def make_instance(kind: str, n: int, T: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (n, T, d) and labels of one instance: generated, or for a real kind (of
    :data:`REAL_CUTS`) n rows of its data drawn by ``seed``, each cut into T tokens of d
    consecutive features."""
    rng = np.random.default_rng(seed)
    if kind in REAL_CUTS:
        features, labels = tabular_two_classes(kind)
        if n > len(labels) or T * d > features.shape[1]:
            raise ValueError(
                f"{kind} has {len(labels)} rows of {features.shape[1]} features; "
                f"n = {n}, T = {T}, d = {d} do not fit"
            )
        rows = rng.permutation(len(labels))[:n]
        return features[rows, : T * d].reshape(n, T, d), labels[rows].copy()
    if kind == "paper":
        kappa = float(rng.choice([0.25, 1.0, 4.0]))
        ds = PaperDistribution(d=max(d, 2), T=T, snr=math.sqrt(kappa / n), eta=0.15).sample(
            n, seed=seed
        )
        return ds.X, ds.y.astype(np.float64)
    y = rng.choice([-1.0, 1.0], n)
    if kind == "integer":
        return rng.integers(-2, 3, (n, T, d)).astype(np.float64), y
    X = rng.standard_normal((n, T, d))
    if kind == "cls":
        X[:, 0] = rng.standard_normal(d)
    elif kind == "scales":
        X *= 10.0 ** rng.uniform(-2, 2, (n, T, 1))
    return X, y


def instances(
    count: int, seed: int = SEED, samples: tuple[int, int] = SAMPLES, kinds: tuple[str, ...] = KINDS
) -> list[dict]:
    """``count`` instance specifications, the ``kinds`` in turn, with n drawn from ``samples``
    (inclusive). A real kind takes its (T, d) from :data:`REAL_CUTS` by the T drawn, so the
    draws, and the generated kinds' instances, are the same whatever the kinds."""
    rng = np.random.default_rng(seed)
    specs = []
    for k in range(count):
        spec = {
            "kind": kinds[k % len(kinds)],
            "n": int(rng.integers(samples[0], samples[1] + 1)),
            "T": int(rng.integers(2, 5)),
            "d": int(rng.choice([2, 3, 6, 12, 40])),
            "R_sqrt_d": float(rng.choice([0.1, 1.0, 10.0, 100.0, 1e4])),
            "seed": seed + k,
        }
        if spec["kind"] in REAL_CUTS:
            cuts = REAL_CUTS[spec["kind"]]
            spec["T"], spec["d"] = cuts[spec["T"] % len(cuts)]
        specs.append(spec)
    return specs


def patient_search(
    X: np.ndarray, y: np.ndarray, R: float, *, n_random: int, n_selections: int, seed: int
) -> float:
    """Smallest ||v|| over random starts and realised good selections, each refined by descent."""
    n, T, d = X.shape
    gram = TokenGram(X)
    form = KernelForm(X, gram) if d > n * T else DenseForm(X)
    rng = np.random.default_rng(seed)
    starts = [form.zeros()]
    for k in range(n_random):
        p = form.from_coefficients(rng.standard_normal((n, T)))
        length = norm(form, p)
        if length > 0:
            radius = R if k % 2 == 0 else R * rng.uniform() ** (1.0 / min(d, n * T))
            starts.append(p * (radius / length))
    if T**n <= 4096:
        candidates = (np.array(s) for s in itertools.product(range(T), repeat=n))
    else:
        candidates = (rng.integers(0, T, n) for _ in range(3000))
    scored = []
    for tokens in candidates:
        svm = selection_svm(gram.H, y, T, tokens)
        if svm.feasible:
            scored.append((svm.norm, tokens))
    scored.sort(key=lambda item: item[0])
    realised = 0
    for _, tokens in scored:
        if realised == n_selections:
            break
        c = attention_svm(gram.H, T, tokens, R)
        if c is not None:
            realised += 1
            starts.append(form.from_coefficients(c))
    best = math.inf
    for p0 in starts:
        # quasi-Newton descents, as in every earlier run (comparable best-known norms)
        run = descend(form, y, p0, R, max_iter=300, sqp=False)
        if run.point.feasible:
            best = min(best, run.norm)
    return best


def methods(rows: list[dict]) -> list[str]:
    """The methods of :data:`METHODS` that every row holds, then the further patient
    searches (``patient_2``, ...)."""
    extra = sorted(
        {
            key
            for row in rows
            for key in row
            if key.startswith("patient_") and not key.endswith("_s")
        },
        key=lambda key: int(key.split("_")[1]),
    )
    return [m for m in METHODS if all(m in row for row in rows)] + extra


def run_instance(
    spec: dict,
    n_random: int,
    n_selections: int,
    patients: int = 1,
    solves: tuple[str, ...] = SOLVES,
    ideas: tuple[str, ...] | None = None,
) -> dict:
    """One instance: the library's ``solves`` (of :data:`SOLVES`), then ``patients`` patient
    searches (the first with the instance's seed, as ``patient``; the others as
    ``patient_2``, ...). ``ideas``: the search families of the library's solves (the
    strategy's ``search_ideas``; its default when None)."""
    strategy = {} if ideas is None else {"options": {"search_ideas": ideas}}
    X, y = make_instance(spec["kind"], spec["n"], spec["T"], spec["d"], spec["seed"])
    R = spec["R_sqrt_d"] / math.sqrt(X.shape[2])
    row = dict(spec, d=X.shape[2])
    for method, options in SOLVES.items():
        if method not in solves:
            continue
        t0 = time.perf_counter()
        res = solve_min_norm(X, y, R=R, **options, **strategy)
        row[f"{method}_s"] = time.perf_counter() - t0
        row[method] = res.norm
        row[f"{method}_status"] = res.status
        if method == "certified":
            row["lower_bound"] = res.lower_bound
            row["bound_status"] = res.bound.status if res.bound is not None else None
            row["gap_tol"] = res.gap_tol
        if method == "default":
            row["default_starts"] = len(res.start_norms)
            row["default_start"] = res.start
    for j in range(patients):
        name = "patient" if j == 0 else f"patient_{j + 1}"
        t0 = time.perf_counter()
        with single_threaded_blas():
            row[name] = patient_search(
                X,
                y,
                R,
                n_random=n_random,
                n_selections=n_selections,
                seed=spec["seed"] + j * PATIENT_SEED_STEP,
            )
        row[f"{name}_s"] = time.perf_counter() - t0
    row["best_known"] = min(row[m] for m in methods([row]))
    return row


def ratio(value: float | None, best: float | None) -> float:
    """value / best known; 1 when neither found a feasible point (None, as read back from the
    JSON file, stands for inf)."""
    value = math.inf if value is None else value
    if best is None or not math.isfinite(best):
        return 1.0
    return value / best


def summary_rows(rows: list[dict]) -> list[dict]:
    """Per kind and overall, per method: share within MATCH_RTOL, worst ratio, seconds."""
    out = []
    groups = [(kind, [r for r in rows if r["kind"] == kind]) for kind in ALL_KINDS]
    groups.append(("all", rows))
    for kind, group in groups:
        if not group:
            continue
        for method in methods(group):
            ratios = [ratio(r[method], r["best_known"]) for r in group]
            share = sum(q <= 1 + MATCH_RTOL for q in ratios) / len(group)
            times = [r[f"{method}_s"] for r in group]
            out.append(
                {
                    "kind": kind,
                    "instances": len(group),
                    "method": method,
                    "within 1e-3 of best known": f"{100 * share:.1f}%",
                    "worst ratio": max(ratios),
                    "median s": float(np.median(times)),
                    "total s": sum(times),
                }
            )
    return out


def summary(rows: list[dict]) -> str:
    """Markdown table of :func:`summary_rows`."""
    return rows_table(summary_rows(rows), None)


def head_to_head(rows: list[dict]) -> str:
    """Markdown table: the default solve against each patient search, instance by instance.

    Per patient search: the share of instances where the default's norm is at most the
    patient's times (1 + 1e-3) (it matches or beats the patient search), where it is lower
    by more than that (beats), and where the patient's is lower by more than that (the
    patient search wins); instances where neither found a feasible point count as matches.
    """
    lines = [
        "| against | default matches or beats | default beats by > 1e-3 | patient beats "
        "by > 1e-3 | worst default / patient |",
        "|---|---|---|---|---|",
    ]
    for method in methods(rows):
        if not method.startswith("patient"):
            continue
        ratios = [ratio(r["default"], r[method]) for r in rows]
        inverse = [ratio(r[method], r["default"]) for r in rows]
        count = len(rows)
        lines.append(
            f"| {method} | {100 * sum(q <= 1 + MATCH_RTOL for q in ratios) / count:.1f}% | "
            f"{100 * sum(q > 1 + MATCH_RTOL for q in inverse) / count:.1f}% | "
            f"{100 * sum(q > 1 + MATCH_RTOL for q in ratios) / count:.1f}% | "
            f"{max(ratios):.4g} |"
        )
    return "\n".join(lines)


def certificate_checks(rows: list[dict]) -> str:
    """The certified solve's words against the best known, one line (empty without it).

    Counts the statuses, then the instances where a word is false: ``optimal`` with a norm
    more than ``gap_tol`` (relative) above the best known, a lower bound above the best known
    (beyond 1e-9 relative rounding), ``infeasible`` where a feasible point was found.
    """
    rows = [r for r in rows if "certified_status" in r]
    if not rows:
        return ""
    counts = Counter(r["certified_status"] for r in rows)
    best = [math.inf if r["best_known"] is None else r["best_known"] for r in rows]
    false_optimal = [
        r["seed"]
        for r, b in zip(rows, best)
        if r["certified_status"] == "optimal"
        and ratio(r["certified"], b) > 1 + r.get("gap_tol", 1e-4)
    ]
    bound_above = [
        r["seed"]
        for r, b in zip(rows, best)
        if r.get("lower_bound") is not None and r["lower_bound"] > b * (1 + 1e-9)
    ]
    false_infeasible = [
        r["seed"]
        for r, b in zip(rows, best)
        if r["certified_status"] == "infeasible" and math.isfinite(b)
    ]
    statuses = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    return (
        f"certified solve: {statuses}; optimal above the best known by more than gap_tol: "
        f"{len(false_optimal)} {false_optimal}; lower bound above the best known: "
        f"{len(bound_above)} {bound_above}; infeasible with a feasible point found: "
        f"{len(false_infeasible)} {false_infeasible}"
    )


def report(rows: list[dict]) -> str:
    """The tables of :func:`summary` and :func:`head_to_head`, then the certificate checks."""
    return "\n\n".join(
        part for part in (summary(rows), head_to_head(rows), certificate_checks(rows)) if part
    )


def ablate(path: str, first: int, idea_sets: list[tuple[str, ...]]) -> str:
    """Markdown table: the default solve with each family set on an earlier run's instances."""
    with open(path, encoding="utf-8") as handle:
        rows = json.load(handle)["rows"][:first]
    norms: dict[tuple[str, ...], list[float]] = {}
    seconds: dict[tuple[str, ...], float] = {}
    for ideas in idea_sets:
        norms[ideas], seconds[ideas] = [], 0.0
        for row in rows:
            X, y = make_instance(row["kind"], row["n"], row["T"], row["d"], row["seed"])
            R = row["R_sqrt_d"] / math.sqrt(X.shape[2])
            t0 = time.perf_counter()
            res = solve_min_norm(
                X,
                y,
                R=R,
                search_starts=None if ideas else 0,
                options={"search_ideas": ideas},
            )
            norms[ideas].append(res.norm)
            seconds[ideas] += time.perf_counter() - t0
    best = [
        min(
            [math.inf if r["best_known"] is None else r["best_known"]]
            + [norms[i][k] for i in idea_sets]
        )
        for k, r in enumerate(rows)
    ]
    lines = [
        "| search families | within 1e-3 of best known | worst ratio | total s |",
        "|---|---|---|---|",
    ]
    for ideas in idea_sets:
        ratios = [ratio(v, b) for v, b in zip(norms[ideas], best)]
        share = sum(q <= 1 + MATCH_RTOL for q in ratios) / len(rows)
        lines.append(
            f"| {','.join(ideas) or 'none (search off)'} | {100 * share:.1f}% | "
            f"{max(ratios):.4g} | {seconds[ideas]:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the instances, writing ``--out`` after each, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=250)
    parser.add_argument(
        "--random", type=int, default=30, help="random starts of the patient search"
    )
    parser.add_argument(
        "--selections", type=int, default=20, help="realised selections of the patient search"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=SEED,
        help="base seed of the instances (another seed: other instances)",
    )
    parser.add_argument(
        "--solves",
        default=",".join(SOLVES),
        help=f"comma-separated library solves to run, of {','.join(SOLVES)} (default: all)",
    )
    parser.add_argument(
        "--samples",
        default=f"{SAMPLES[0]},{SAMPLES[1]}",
        metavar="LO,HI",
        help="range of n of the instances, inclusive (default: %(default)s)",
    )
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"comma-separated kinds of instance, of {','.join(ALL_KINDS)} "
        "(the last three: real tokens; default: %(default)s)",
    )
    parser.add_argument(
        "--patients",
        type=int,
        default=1,
        help="independent patient searches per instance (other seeds)",
    )
    parser.add_argument(
        "--ideas",
        default=None,
        help="comma-separated families of the library's search "
        f"(of {','.join(FAMILIES)}); default: {','.join(DEFAULT_STRATEGY.search_ideas)}",
    )
    parser.add_argument("--out", default="results/search_quality.json")
    parser.add_argument(
        "--summarise",
        metavar="FILE",
        help="print the table of an earlier run's results file and exit",
    )
    parser.add_argument(
        "--ablate",
        metavar="FILE",
        help="rerun the default solve with each of --idea-sets on FILE's instances",
    )
    parser.add_argument("--first", type=int, default=60, help="instances of --ablate")
    parser.add_argument(
        "--idea-sets",
        default="none;selection;continuation;random;selection,continuation,random",
        help="semicolon-separated family sets of --ablate",
    )
    args = parser.parse_args(argv)
    if args.patients < 1:
        parser.error(f"--patients must be at least 1, got {args.patients}")
    try:
        samples = tuple(int(k) for k in args.samples.split(","))
    except ValueError:
        samples = ()
    if len(samples) != 2 or not 1 <= samples[0] <= samples[1]:
        parser.error(f"--samples must be LO,HI with 1 <= LO <= HI, got {args.samples!r}")
    kinds = tuple(args.kinds.split(","))
    if not kinds or set(kinds) - set(ALL_KINDS):
        parser.error(f"--kinds must name kinds of {', '.join(ALL_KINDS)}; got {args.kinds!r}")
    rows_needed = {kind: len(tabular_two_classes(kind)[1]) for kind in kinds if kind in REAL_CUTS}
    if rows_needed and samples[1] > min(rows_needed.values()):
        parser.error(
            f"--samples: {min(rows_needed, key=rows_needed.get)} has "
            f"{min(rows_needed.values())} rows, fewer than n = {samples[1]}"
        )
    solves = tuple(args.solves.split(","))
    unknown = sorted(set(solves) - set(SOLVES))
    if unknown or "default" not in solves:
        parser.error(
            f"--solves must name default and only {', '.join(SOLVES)}; got {args.solves!r}"
        )
    if args.ablate:
        sets = [() if s == "none" else tuple(s.split(",")) for s in args.idea_sets.split(";")]
        print(ablate(args.ablate, args.first, sets))
        return 0
    if args.summarise:
        with open(args.summarise, encoding="utf-8") as handle:
            rows = json.load(handle)["rows"]
        print(report(rows))
        return 0
    # an ablation: the library's default families replaced (through options=)
    ideas = None if args.ideas is None else tuple(i for i in args.ideas.split(",") if i)
    meta = {
        **run_metadata(__spec__.name, argv),
        "ideas": list(DEFAULT_STRATEGY.search_ideas if ideas is None else ideas),
        "random": args.random,
        "selections": args.selections,
        "patients": args.patients,
        "seed": args.seed,
        "samples": list(samples),
        "kinds": list(kinds),
        "solves": list(solves),
        "load_average_start": list(os.getloadavg()),
    }
    rows: list[dict] = []
    started = time.time()
    for spec in instances(args.instances, args.seed, samples, kinds):
        rows.append(run_instance(spec, args.random, args.selections, args.patients, solves, ideas))
        meta["load_average_end"] = list(os.getloadavg())
        write_json(args.out, {"meta": meta, "table": summary_rows(rows), "rows": rows})
        r = rows[-1]
        print(
            f"{r['kind']:8s} n={r['n']:2d} T={r['T']} d={r['d']:2d} R*sqrt(d)={r['R_sqrt_d']:g}: "
            + " ".join(f"{m}={r[m]:.6g}" for m in methods([r])),
            flush=True,
        )
    print(
        f"\n{len(rows)} instances in {time.time() - started:.0f} s; ideas {meta['ideas']}; "
        f"load average {meta['load_average_start']} at the start, "
        f"{meta['load_average_end']} at the end\n"
    )
    print(report(rows))
    worst = sorted(rows, key=lambda r: -ratio(r["default"], r["best_known"]))[:5]
    print("\nworst default instances:")
    for r in worst:
        print(
            f"  {r['kind']} n={r['n']} T={r['T']} d={r['d']} R*sqrt(d)={r['R_sqrt_d']:g} "
            f"seed={r['seed']}: default {r['default']:.6g}, best known {r['best_known']:.6g} "
            f"(patient {r['patient']:.6g}), LB {r.get('lower_bound', 'not run')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
