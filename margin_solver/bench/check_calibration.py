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
#: (label, sweep method, method options): what is calibrated and validated.
RUNS = (
    ("two-step GD", "gd-two-step", {}),
    ("min-norm R=100/nu", "min-norm", {"R_scale": 100.0}),
    ("min-norm R=10/nu", "min-norm", {"R_scale": 10.0}),
)
BENIGN_ERROR, HARMFUL_ERROR = Constants.benign_error, Constants.harmful_error


def _sizes(size: str) -> dict[str, Any]:
    if size == "tiny":
        return {"n": [12], "d": [300], "kappa": [0.5, 4.0, 16.0], "calib": [0], "valid": [1]}
    if size == "quick":
        return {
            "n": [24],
            "d": [1000],
            "kappa": [0.25, 1.0, 4.0, 16.0],
            "calib": [0, 1],
            "valid": [2],
        }
    return {
        "n": [40, 100],
        "d": [2000, 5000],
        "kappa": list(KAPPAS),
        "calib": [0, 1, 2, 3, 4],
        "valid": [5, 6, 7, 8, 9],
    }


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

    Candidates are the grid's kappas and the geometric means of neighbours. Between two grid
    points the data cannot place a threshold, so ties go to the widest band (the most
    conservative constants: thresholds on grid points), and for ``gd-two-step`` to the upper
    SNR limit's multiplier ``gd_upper_C`` nearest 1 (the derivation's value; candidates 0.5
    to 3).
    """
    kappas = sorted({float(r["kappa"]) for r in rows})
    cands = sorted(set(kappas) | {math.sqrt(a * b) for a, b in itertools.pairwise(kappas)})
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


def validation_table(
    rows: list[dict[str, Any]], label: str
) -> tuple[list[dict[str, Any]], Counter]:
    """Per kappa: the predictions made, what was observed, and the agreement counts."""
    table, total = [], Counter()
    for kappa in sorted({float(r["kappa"]) for r in rows}):
        sel = [r for r in rows if float(r["kappa"]) == kappa]
        counts = Counter()
        for r in sel:
            pred, seen = str(r.get("predicted_regime") or "-"), observed_regime(r)
            if seen == "failed":
                counts["not comparable"] += 1
            elif pred in ("benign", "harmful", "no interpolation"):
                counts["agree" if pred == seen else "miss"] += 1
            else:
                counts["no prediction"] += 1
        total.update(counts)
        table.append(
            {
                "method": label,
                "n": sorted({int(r["n"]) for r in sel}),
                "kappa": kappa,
                "predicted": dict(Counter(str(r.get("predicted_regime") or "-") for r in sel)),
                "observed": dict(Counter(observed_regime(r) for r in sel)),
                **{k: counts[k] for k in ("agree", "miss", "not comparable", "no prediction")},
            }
        )
    return table, total


def _markdown(calibrated: dict[str, dict], tables: list[dict], totals: dict[str, Counter]) -> str:
    c = Constants()
    lines = ["Calibration seeds (constants chosen there; package defaults in brackets):", ""]
    for label, cal in calibrated.items():
        if label.startswith("two-step"):
            lines.append(
                f"- {label}: gd_kappa_harmful = {cal['kappa_harmful']:.3g} "
                f"[{c.gd_kappa_harmful:g}], gd_kappa_benign = {cal['kappa_benign']:.3g} "
                f"[{c.gd_kappa_benign:g}], gd_upper_C = {cal['upper_C']:g} [{c.gd_upper_C:g}] "
                f"({cal['agree']} agree, {cal['miss']} miss on calibration seeds)"
            )
        else:
            lines.append(
                f"- {label}: kappa_harmful = {cal['kappa_harmful']:.3g} [{c.kappa_harmful:g}], "
                f"kappa_benign = {cal['kappa_benign']:.3g} [{c.kappa_benign:g}] "
                f"({cal['agree']} agree, {cal['miss']} miss on calibration seeds)"
            )
    lines += [
        "",
        "Validation seeds (predictions with the package constants of the run):",
        "",
        (
            "| method | n | kappa | predicted | observed | agree | miss | not comparable "
            "| no prediction |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tables:
        fmt = ", ".join(f"{k} x{v}" for k, v in sorted(t["predicted"].items()))
        obs = ", ".join(f"{k} x{v}" for k, v in sorted(t["observed"].items()))
        n = ",".join(map(str, t["n"]))
        lines.append(
            f"| {t['method']} | {n} | {t['kappa']:g} | {fmt} | {obs} | {t['agree']} | {t['miss']} "
            f"| {t['not comparable']} | {t['no prediction']} |"
        )
    lines += [
        "",
        "| method | agree | miss | agreement rate | not comparable | no prediction |",
        "|---|---|---|---|---|---|",
    ]
    for label, tot in totals.items():
        decided = tot["agree"] + tot["miss"]
        rate = f"{tot['agree'] / decided:.2f}" if decided else "-"
        lines.append(
            f"| {label} | {tot['agree']} | {tot['miss']} | {rate} | {tot['not comparable']} "
            f"| {tot['no prediction']} |"
        )
    return "\n".join(lines) + "\n"


def run_check_calibration(
    out: Path, size: str, progress: bool = False
) -> tuple[Path, Path | None, str, str]:
    """Run (or resume) the calibration and validation sweeps (with their progress bars when
    ``progress``); return the study's outputs."""
    grid = _sizes(size)
    out = Path(out)
    calibrated, tables, totals, messages = {}, [], {}, []
    last_csv = out / "check_calibration.csv"
    for split in ("calib", "valid"):
        for label, method, options in RUNS:
            tag = f"{split}_{method}_{int(options.get('R_scale', 0))}"
            csv = out / f"check_{tag}.csv"
            config = SweepConfig(
                sweep_seed=2410_07746,
                n_test=500 if size != "tiny" else 100,
                method_options={method: dict(options)},
            )
            grids = [
                SweepGrid(
                    n=[n],
                    d=[d],
                    kappa=grid["kappa"],
                    eta=[0.1],
                    seeds=grid[split],
                    methods=[method],
                )
                for n, d in zip(grid["n"], grid["d"])
            ]
            res = run_sweep(grids, csv, config, jobs=1, progress=progress)
            messages.append(f"{tag}: {res.message}")
            rows = load_results(csv)
            if split == "calib" and label != "min-norm R=10/nu":  # soft attention: no theorem
                calibrated[label] = calibrate(rows, method)
            if split == "valid":
                t, tot = validation_table(rows, label)
                tables += t
                totals[label] = tot
            last_csv = csv
    text = _markdown(calibrated, tables, totals)
    atomic_write_text(out / "check_calibration.md", text)
    return last_csv, None, text, "; ".join(messages)
