"""Calibrate the checker's per-method constants on some seeds and validate them on others.

The checker predicts a regime *for one method* (``check_conditions(method=...)``): two-step GD
at its step sizes, or the min-norm interpolator P_R at its R. This study runs both methods on
the paper's model (T = 2, eta = 0.1) over a kappa grid with two disjoint sets of seeds:

* **calibration** seeds: the observed regimes choose the constants (two-step GD:
  ``gd_kappa_harmful``, ``gd_kappa_benign``, ``gd_upper_C``; min-norm at large R:
  ``kappa_harmful``, ``kappa_benign``) by maximising agreements minus misses over a grid of
  candidate thresholds (:func:`calibrate`);
* **validation** seeds: the sweep records the checker's prediction with the package constants
  of the run next to the observation; :func:`validation_table` counts agreements per method,
  R and kappa. The agreement rate there is the number to report.

Every split and method is a resumable sweep (:func:`margin_solver.bench.sweeps.run_sweep`)
with its own CSV under ``out``. Min-norm runs at ``R = R_scale / nu`` for ``R_scale`` 100
(token selection) and 10 (soft attention: ``R nu / sqrt(n)`` below ``R_select``, predicted
"outside the theory").
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path
from typing import Any

from margin_solver.bench.sweeps import SweepConfig, SweepGrid, load_results, run_sweep
from margin_solver.core.fileio import atomic_write_text
from margin_solver.theory import Constants, two_step_upper_kappa

__all__ = ["calibrate", "observed_regime", "run_check_calibration", "validation_table"]

KAPPAS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: P_R's options here: not certified (``certify_max_n = 0``) and no further search after the
#: first starts (``search_starts = 0``): at T = 4 the search took 270 s per cell (n = 16,
#: d = 25 600) against 0.35 s without it, more than the whole study may take.
_MIN_NORM = {"certify_max_n": 0, "search_starts": 0}
#: (label, sweep method, method options): what is calibrated and validated.
RUNS = (
    ("two-step GD", "gd-two-step", {}),
    ("min-norm R=100/nu", "min-norm", {"R_scale": 100.0, **_MIN_NORM}),
    ("min-norm R=20/nu", "min-norm", {"R_scale": 20.0, **_MIN_NORM}),
)
#: The checker's method name of each sweep method.
CHECK_METHOD = {"gd-two-step": "two-step-gd", "min-norm": "min-norm"}
BENIGN_ERROR, HARMFUL_ERROR = Constants.benign_error, Constants.harmful_error


def _sizes(size: str) -> dict[str, Any]:
    """The grid at ``size``: sample sizes, ratios d / n^2, tokens T, kappas and seeds.

    Small n keeps d = 100 n^2 within 2 cores (quick: n = 16, d = 25 600, 100 test samples of
    T = 4 tokens, 82 MB). A training set of 16 holds no flipped label in 0.9^16 = 19 % of
    draws at eta = 0.1; the checker's noisy-sample assumption then fails, as it should, and
    the study counts that "outside the theory" beside the agreement.
    """
    if size == "tiny":
        return {
            "n": [8],
            "ratio": [1.0, 4.0],
            "T": [2],
            "kappa": [0.5, 4.0, 16.0],
            "calib": [0],
            "valid": [1],
            "n_test": 100,
        }
    if size == "quick":
        return {
            "n": [16],
            "ratio": [1.0, 4.0, 20.0, 100.0],
            "T": [2, 4],
            "kappa": list(KAPPAS),
            "calib": [0, 1],
            "valid": [2, 3],
            "n_test": 100,
        }
    return {
        "n": [16, 24],
        "ratio": [1.0, 4.0, 20.0, 100.0],
        "T": [2, 4],
        "kappa": list(KAPPAS),
        "calib": [0, 1, 2, 3, 4],
        "valid": [5, 6, 7, 8, 9],
        "n_test": 200,
    }


def _ratio(row: dict[str, Any]) -> float:
    """The grid's d / n^2 of a row (d was rounded from it)."""
    return round(float(row["d"]) / float(row["n"]) ** 2, 1)


def observed_regime(row: dict[str, Any]) -> str:
    """What a results row shows: benign / harmful / intermediate / no interpolation, or
    "failed" when the optimiser failed (a min-norm run without an interpolating point, or a
    failed cell): never evidence for or against the theory."""
    status = row.get("status")
    margin, err = _num(row.get("min_margin")), _num(row.get("test_error_clean"))
    if status == "failed" or margin is None:
        return "no interpolation" if status == "infeasible" else "failed"
    if not margin > 0:
        return "no interpolation" if row["method"] == "gd-two-step" else "failed"
    if err is None:
        return "failed"
    if err <= BENIGN_ERROR:
        return "benign"
    if err >= HARMFUL_ERROR:
        return "harmful"
    return "intermediate"


def _num(x: Any) -> float | None:
    """A finite float, or None for an empty cell (NaN in a loaded CSV)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _score(pairs: list[tuple[str | None, str]]) -> tuple[int, int]:
    agree = sum(p == o for p, o in pairs if p is not None and o != "failed")
    miss = sum(p != o for p, o in pairs if p is not None and o != "failed")
    return agree, miss


def calibrate(rows: list[dict[str, Any]], method: str) -> dict[str, float]:
    """Thresholds that maximise agreements minus misses on ``rows`` of one sweep method.

    Candidates are the grid's kappas, the geometric means of neighbours, half the smallest
    and twice the largest. Between two grid
    points the data cannot place a threshold, so ties go to the widest band (the most
    conservative constants: thresholds on grid points), and for ``gd-two-step`` to the upper
    SNR limit's multiplier ``gd_upper_C`` nearest 1 (the derivation's value; candidates 0.5
    to 3).
    """
    kappas = sorted({float(r["kappa"]) for r in rows})
    # Half the smallest and twice the largest kappa: a side no calibration cell supports gets
    # a threshold beyond the grid (no prediction inside it) rather than on its edge.
    cands = sorted(
        set(kappas)
        | {math.sqrt(a * b) for a, b in itertools.pairwise(kappas)}
        | {kappas[0] / 2, kappas[-1] * 2}
    )
    uppers = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0) if method == "gd-two-step" else (None,)
    best: tuple[Any, ...] | None = None
    for h, b, up in itertools.product(cands, cands, uppers):
        if h > b:
            continue
        pairs = []
        for r in rows:
            k = float(r["kappa"])
            limit = None if up is None else up * two_step_upper_kappa(float(r["eta"]))
            if limit is not None and k > limit:
                pred = "no interpolation"
            else:
                pred = "benign" if k >= b else "harmful" if k <= h else None
            pairs.append((pred, observed_regime(r)))
        agree, miss = _score(pairs)
        key = (agree - miss, b / h, -abs(math.log(up)) if up else 0.0, -b)
        if best is None or key > best[0]:
            best = (key, h, b, up, agree, miss)
    assert best is not None
    _, h, b, up, agree, miss = best
    out = {"kappa_harmful": h, "kappa_benign": b, "agree": agree, "miss": miss}
    if up is not None:
        out["upper_C"] = up
    return out


#: What a validation row's prediction counts as.
DECIDED = ("benign", "harmful", "no interpolation")


def validation_table(
    rows: list[dict[str, Any]], label: str
) -> tuple[list[dict[str, Any]], Counter]:
    """Per d / n^2 and T: the predictions made, what was observed, and the counts.

    ``agree`` / ``miss``: a decided prediction (benign, harmful, no interpolation) against
    the observation; ``cannot tell`` (the checker's own word, among them "outside the
    calibrated range") and ``outside the theory`` are counted apart from the decided ones and
    reported beside the agreement, so that silence cannot pass for agreement; ``not
    comparable``: the optimiser failed.
    """
    table, total = [], Counter()
    for ratio, T in sorted({(_ratio(r), int(r["T"])) for r in rows}):
        sel = [r for r in rows if _ratio(r) == ratio and int(r["T"]) == T]
        counts = Counter()
        for r in sel:
            pred, seen = str(r.get("predicted_regime") or "-"), observed_regime(r)
            if seen == "failed":
                counts["not comparable"] += 1
            elif pred in DECIDED:
                counts["agree" if pred == seen else "miss"] += 1
            elif pred == "cannot tell":
                counts["cannot tell"] += 1
            else:
                counts["outside the theory"] += 1
        total.update(counts)
        table.append(
            {
                "method": label,
                "d/n^2": ratio,
                "T": T,
                "n": sorted({int(r["n"]) for r in sel}),
                "predicted": dict(Counter(str(r.get("predicted_regime") or "-") for r in sel)),
                "observed": dict(Counter(observed_regime(r) for r in sel)),
                **_rates(counts),
            }
        )
    return table, total


def _rates(counts: Counter) -> dict[str, Any]:
    """Counts with the agreement rate (over decided predictions) and the silent share."""
    decided = counts["agree"] + counts["miss"]
    comparable = decided + counts["cannot tell"] + counts["outside the theory"]
    return {
        **{k: counts[k] for k in ("agree", "miss")},
        "agreement": counts["agree"] / decided if decided else None,
        "cannot_tell": counts["cannot tell"],
        "outside_theory": counts["outside the theory"],
        "silent_share": (comparable - decided) / comparable if comparable else None,
        "not_comparable": counts["not comparable"],
    }


def calibrated_entries(
    rows: list[dict[str, Any]], method: str, R_scale: float | None
) -> list[dict]:
    """:func:`calibrate` per (d / n^2, T) group of one run's calibration rows."""
    out = []
    for ratio, T in sorted({(_ratio(r), int(r["T"])) for r in rows}):
        sel = [r for r in rows if _ratio(r) == ratio and int(r["T"]) == T]
        cal = calibrate(sel, method)
        out.append(
            {
                "method": CHECK_METHOD[method],
                "R_scale": R_scale,
                "d/n^2": ratio,
                "T": T,
                "kappa_harmful": cal["kappa_harmful"],
                "kappa_benign": cal["kappa_benign"],
                "upper_C": cal.get("upper_C"),
                "agree": cal["agree"],
                "miss": cal["miss"],
            }
        )
    return out


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def _markdown(entries: list[dict], tables: list[dict], totals: dict[str, Counter]) -> str:
    lines = [
        "Calibration seeds: the constants chosen per method, d / n^2 and T "
        "(theory.constants.CALIBRATION holds them):",
        "",
        "| method | R nu | d/n^2 | T | kappa_harmful | kappa_benign | upper_C | agree | miss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        lines.append(
            f"| {e['method']} | {_fmt(e['R_scale'])} | {e['d/n^2']:g} | {e['T']} "
            f"| {e['kappa_harmful']:.3g} | {e['kappa_benign']:.3g} | {_fmt(e['upper_C'])} "
            f"| {e['agree']} | {e['miss']} |"
        )
    keys = ("agree", "miss", "agreement", "cannot_tell", "outside_theory", "silent_share")
    lines += [
        "",
        "Validation seeds (the checker's predictions with the package constants of the run):",
        "",
        "| method | d/n^2 | T | n | " + " | ".join(keys) + " | not comparable |",
        "|---|---|---|---|" + "---|" * len(keys) + "---|",
    ]
    for t in tables:
        n = ",".join(map(str, t["n"]))
        cells = " | ".join(_fmt(t[k]) for k in keys)
        lines.append(
            f"| {t['method']} | {t['d/n^2']:g} | {t['T']} | {n} | {cells} | {t['not_comparable']} |"
        )
    lines += ["", "| method | " + " | ".join(keys) + " | not comparable |"]
    lines.append("|---|" + "---|" * len(keys) + "---|")
    for label, tot in totals.items():
        rates = _rates(tot)
        cells = " | ".join(_fmt(rates[k]) for k in keys)
        lines.append(f"| {label} | {cells} | {rates['not_comparable']} |")
    return "\n".join(lines) + "\n"


def run_split(
    out: Path, size: str, split: str, **backend: Any
) -> list[tuple[str, str, dict[str, Any], list[dict[str, Any]], str]]:
    """Run (or resume) one split's sweeps (``"calib"`` or ``"valid"``), one CSV per run;
    return (label, method, options, rows, message) per run. ``backend``: ``jobs``,
    ``scheduler``, ``progress`` of :func:`margin_solver.bench.sweeps.run_sweep`."""
    grid = _sizes(size)
    done = []
    for label, method, options in RUNS:
        tag = f"{split}_{method}_{int(options.get('R_scale', 0))}"
        csv = Path(out) / f"check_{tag}.csv"
        config = SweepConfig(
            sweep_seed=2410_07746,
            n_test=grid["n_test"],
            method_options={method: dict(options)},
            # The calibration rows need only what was observed; predictions are made with
            # the constants they choose, on the validation seeds.
            check=split == "valid",
        )
        grids = [
            SweepGrid(
                n=[n],
                d=[round(ratio * n * n)],
                kappa=grid["kappa"],
                T=grid["T"],
                eta=[0.1],
                seeds=grid[split],
                methods=[method],
            )
            for n in grid["n"]
            for ratio in grid["ratio"]
        ]
        res = run_sweep(grids, csv, config, **backend)
        done.append((label, method, options, load_results(csv), f"{tag}: {res.message}"))
    return done


def run_check_calibration(
    out: Path, size: str, **backend: Any
) -> tuple[Path, Path | None, str, str]:
    """Run (or resume) the calibration and validation sweeps; return the study's outputs.

    Besides the markdown it writes ``check_calibration.json``: the calibrated entries and the
    validation rows, with the run's metadata (what ``docs/benchmarks.md`` renders).
    """
    from margin_solver.bench.provenance import run_metadata
    from margin_solver.core.fileio import write_json

    out = Path(out)
    meta = run_metadata(
        "margin_solver",
        ["bench", "--only", "check-calibration", *(["--quick"] if size == "quick" else [])],
    )
    entries, tables, totals, messages = [], [], {}, []
    for _, method, options, rows, message in run_split(out, size, "calib", **backend):
        entries += calibrated_entries(rows, method, options.get("R_scale"))
        messages.append(message)
    for label, _, _, rows, message in run_split(out, size, "valid", **backend):
        t, tot = validation_table(rows, label)
        tables += t
        totals[label] = tot
        messages.append(message)
    text = _markdown(entries, tables, totals)
    atomic_write_text(out / "check_calibration.md", text)
    summary = [{"method": label, **_rates(tot)} for label, tot in totals.items()]
    write_json(
        out / "check_calibration.json",
        {"meta": meta, "constants": entries, "validation": tables, "rows": summary},
    )
    return Path(out) / f"check_valid_{RUNS[0][1]}_0.csv", None, text, "; ".join(messages)
