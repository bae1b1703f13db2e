"""The main job of ``make demo``: the paper's story on its own data model, in about a minute.

Two datasets from the paper's model, one above and one below the SNR threshold of order
1/sqrt(n) (seed W4, Q3): for each, the certified min-norm interpolator, the two-step GD
endpoint, their comparison and the theorem-condition check; then figures and a summary.
Each step is a small function returning JSON-ready values; :func:`run_demo` strings them
together and writes everything under one folder.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.analysis.compare import ModelSummary, compare
from margin_solver.analysis.metrics import signal_attention
from margin_solver.bench.plots import plot_attention_allocation
from margin_solver.bench.study_plots import plot_phase_diagram, regime_map
from margin_solver.bench.sweeps import SweepConfig, SweepGrid, load_results, run_sweep, sidecar_path
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.kernel import attention
from margin_solver.core.progress import verbose_switch
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import Regime, check_conditions


@dataclass(frozen=True)
class DemoSetting:
    """One dataset of the demo: the paper's model at a given kappa = n SNR^2."""

    name: str
    kappa: float
    n: int = 40
    n_test: int = 1000
    T: int = 2
    d: int = 2000
    eta: float = 0.15

    def distribution(self) -> PaperDistribution:
        """The data distribution with SNR = sqrt(kappa / n)."""
        return PaperDistribution(
            d=self.d, T=self.T, snr=math.sqrt(self.kappa / self.n), eta=self.eta
        )


#: Benign (kappa above the checker's C_benign = 4) and harmful (well below 1) settings. At
#: kappa = 5 the default two-step GD also interpolates (docs/decisions.md, "GD's default
#: two-step sizes c0 = 0.1, g = 0.5").
SETTINGS = (DemoSetting("benign", kappa=5.0), DemoSetting("harmful", kappa=0.25))


def _per_sample_attention(p: np.ndarray, data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Attention on the signal token of each clean and each noisy sample."""
    on_signal = signal_attention(attention(data.X, p), data)
    return on_signal[~data.flipped], on_signal[data.flipped]


def _model_row(result: Any, summary: ModelSummary) -> dict[str, Any]:
    """The demo's row for one model, read off the comparison's summary of it."""
    return {
        "status": result.status,
        "norm_v": summary.norm_v,
        "norm_p": summary.norm_p,
        "train_error": summary.train_error,
        "test_error_clean": summary.test_error_clean,
        "test_error_noisy": summary.test_error,
        "attn_signal_clean": summary.attn_signal_clean,
        "attn_signal_noisy": summary.attn_signal_noisy,
    }


def run_setting(setting: DemoSetting, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Solve, compare and check one setting; returns its report and its attention panel."""
    train, test = setting.distribution().sample_train_test(setting.n, setting.n_test, seed=seed)
    start = time.perf_counter()
    # R = 100 / sqrt(d) makes attention nearly hard on this data, where the certified
    # hard-selection bound is tight (see docs/usage.md, "min-norm interpolator").
    mn = solve_min_norm(train, R=100 / math.sqrt(train.d), certify=True)
    mn_seconds = time.perf_counter() - start
    start = time.perf_counter()
    gd = gradient_descent(train, test=test)
    gd_seconds = time.perf_counter() - start
    comparison = compare(mn, gd, train, test, names=("min-norm", "two-step GD"))
    check = check_conditions(train, solution=mn, test=test)
    # The prediction belongs to a method: two-step GD gets its own, at its step sizes.
    check_gd = check_conditions(train, solution=gd, test=test)
    min_norm = _model_row(mn, comparison.a)
    min_norm.update(lower_bound=mn.lower_bound, gap=mn.gap, seconds=mn_seconds, message=mn.message)
    two_step = _model_row(gd, comparison.b)
    two_step.update(seconds=gd_seconds, message=gd.message)
    report = {
        "data": {
            "n": train.n,
            "T": train.T,
            "d": train.d,
            "snr": train.snr,
            "kappa": train.kappa,
            "eta": train.eta,
            "noisy_samples": int(train.flipped.sum()),
            "n_test": test.n,
        },
        "min_norm": min_norm,
        "two_step_gd": two_step,
        "comparison": comparison.to_dict(),
        "comparison_table": str(comparison),
        "check": check.to_dict(),
        "check_table": str(check),
        "check_two_step_gd": check_gd.to_dict(),
    }
    panel = {
        "title": f"{setting.name}: $\\kappa = n\\,\\mathrm{{SNR}}^2 = {setting.kappa:g}$",
        "models": {
            "min-norm": _per_sample_attention(mn.p, train),
            "two-step GD": _per_sample_attention(gd.p, train),
        },
    }
    return report, panel


#: The demo's small phase diagram: SNR on a grid shared by every n, two seeds per cell.
PHASE_GRID = SweepGrid(
    n=[20, 40, 80],
    d=[2000],
    snr=np.geomspace(0.04, 0.9, 6).round(4).tolist(),
    eta=[0.15],
    seeds=2,
    methods=["min-norm", "gd-two-step"],
)


def small_phase_diagram(out: Path, seed: int) -> tuple[list[Path], list[str]]:
    """Sweep :data:`PHASE_GRID` (resuming a previous run in ``out``) and draw its figure.

    Returns the files written and one line per method: how often the observed regime sits
    on the side of kappa = n SNR^2 = 1 that the theory predicts.
    """
    csv = out / f"demo_phase_seed{seed}.csv"
    run_sweep(PHASE_GRID, csv, SweepConfig(sweep_seed=seed, n_test=500), jobs=2)
    png = plot_phase_diagram(csv, out / f"demo_phase_seed{seed}.png")
    regimes = regime_map(load_results(csv))
    lines = []
    for method in PHASE_GRID.methods:
        above = [r for (m, n, snr), r in regimes.items() if m == method and n * snr**2 >= 1]
        below = [r for (m, n, snr), r in regimes.items() if m == method and n * snr**2 < 1]
        lines.append(
            f"{method}: benign in {above.count(Regime.BENIGN)}/{len(above)} points with kappa >= 1 "
            f"(no interpolation in {above.count(Regime.NO_INTERPOLATION)}), harmful in "
            f"{below.count(Regime.HARMFUL)}/{len(below)} points with kappa < 1"
        )
    return [csv, sidecar_path(csv), png], lines


def _fmt(value: Any, spec: str = ".3f") -> str:
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def format_setting(name: str, rep: dict[str, Any]) -> str:
    """Readable text of one setting's results."""
    data, mn = rep["data"], rep["min_norm"]
    check = rep["check"]
    lines = [
        (
            f"--- {name}: n={data['n']}, T={data['T']}, d={data['d']}, SNR={data['snr']:.4g}, "
            f"kappa={data['kappa']:.3g}, eta={data['eta']} "
            f"({data['noisy_samples']} noisy labels) ---"
        ),
        (
            f"min-norm interpolator (R = 100/sqrt(d), certified): ||v|| = {mn['norm_v']:.6g}, "
            f"lower bound = {_fmt(mn['lower_bound'], '.6g')}, gap = {_fmt(mn['gap'], '.1e')}, "
            f"{mn['seconds']:.2f} s"
        ),
        "",
        rep["comparison_table"],
        "",
        f"checker: predicted regime '{check['predicted_regime']}' ({check['regime_reason']})",
        f"         {check['verdict']}",
        f"checker, two-step GD: {rep['check_two_step_gd']['verdict']}",
    ]
    return "\n".join(lines)


def summary_table(settings: dict[str, dict[str, Any]]) -> str:
    """The ten-second summary: one line per setting and model."""
    head = (
        f"{'setting':<9}{'kappa':>6}  {'predicted':<17}{'model':<13}{'train err':>10}"
        f"{'clean test err':>15}{'noisy test err':>15}{'attn clean':>11}{'attn noisy':>11}"
    )
    lines = [head, "-" * len(head)]
    for name, rep in settings.items():
        for label, key, check in (
            ("min-norm", "min_norm", "check"),
            ("two-step GD", "two_step_gd", "check_two_step_gd"),
        ):
            m = rep[key]
            lines.append(
                f"{name:<9}{rep['data']['kappa']:>6.3g}  {rep[check]['predicted_regime']:<17}"
                f"{label:<13}{_fmt(m['train_error']):>10}{_fmt(m['test_error_clean']):>15}"
                f"{_fmt(m['test_error_noisy']):>15}{_fmt(m['attn_signal_clean'], '.2f'):>11}"
                f"{_fmt(m['attn_signal_noisy'], '.2f'):>11}"
            )
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    """Readable text of the whole demo report."""
    parts = [
        "margin_solver demo: benign vs harmful overfitting in single-head attention",
        '(every term printed below is defined in docs/usage.md, "Terms in the output")',
        "",
    ]
    for name, rep in report["settings"].items():
        parts += [format_setting(name, rep), ""]
    parts += [
        "Summary (errors on 0-1 scale; test error against clean labels has Bayes optimum 0,",
        "against noisy labels eta; attention = mean softmax weight on the signal token of",
        "clean / noisy training samples)",
        summary_table(report["settings"]),
        "",
        "Phase diagram over n x SNR (benign = interpolates with clean test error <= 0.1):",
        *(f"  {line}" for line in report["phase_diagram"]),
        "",
        report["conclusion"],
        f"(total {report['seconds']:.1f} s)",
    ]
    return "\n".join(parts)


def _conclusion(settings: dict[str, dict[str, Any]]) -> str:
    """One sentence per setting, read off the measured numbers and the checker's verdict."""
    lines = []
    for name, rep in settings.items():
        mn = rep["min_norm"]
        fits = (
            "fits every training label"
            if mn["train_error"] == 0
            else (f"misses {mn['train_error']:.0%} of the training labels")
        )
        lines.append(
            f"{name} (kappa {rep['data']['kappa']:g}): the min-norm interpolator {fits}; "
            f"clean test error {mn['test_error_clean']:.3f}; attention on the signal "
            f"{mn['attn_signal_clean']:.2f} (clean) vs {mn['attn_signal_noisy']:.2f} (noisy). "
            f"Checker: {rep['check']['verdict']}"
        )
    return "\n".join(lines)


@verbose_switch
def run_demo(out_dir: str | Path = "results", seed: int = 0) -> dict[str, Any]:
    """Run the demo, write its JSON and figures under ``out_dir`` and return the report.

    Parameters
    ----------
    out_dir : path, default="results"
        Output folder.
    seed : int, default=0
        Seed of the data (train and test sets use separate streams).

    Returns
    -------
    dict
        ``settings`` (one report per dataset), ``conclusion``, ``seconds`` and ``files``.
    """
    out = Path(out_dir)
    start = time.perf_counter()
    settings, panels = {}, []
    for setting in SETTINGS:
        settings[setting.name], panel = run_setting(setting, seed)
        panels.append(panel)
    files = [plot_attention_allocation(panels, out / "demo_attention.png")]
    phase_files, phase_message = small_phase_diagram(out, seed)
    files += phase_files
    report = {
        "settings": settings,
        "phase_diagram": phase_message,
        "conclusion": _conclusion(settings),
    }
    report["seconds"] = time.perf_counter() - start
    files.append(out / "demo.json")
    report["files"] = [str(f) for f in files]
    write_json(out / "demo.json", report)
    return report
