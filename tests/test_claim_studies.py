"""The claim studies of issue 14 at the tiny size: end to end, resumable, figures from CSVs."""

import math

import numpy as np
import pytest
from PIL import Image

from margin_solver.bench import claim_longgd, claim_neighbours, claim_regpath, claim_tokens
from margin_solver.bench.claim_runner import read_claim_rows
from margin_solver.bench.studies import run_study
from margin_solver.core.data import Dataset

CLAIMS = (
    "weight-decay-path",
    "large-T",
    "dominant-token",
    "long-gd",
    "fixed-head",
    "attention-svm",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("claims")
    return out, {name: run_study(name, out, "tiny", jobs=1) for name in CLAIMS}


@pytest.mark.slow
def test_each_claim_study_writes_csv_figure_table_and_resumes(tiny):
    out, results = tiny
    for res in results.values():
        assert res.csv.exists() and res.table.read_text().startswith(("|", "Path", "| T"))
        with Image.open(res.png) as img:
            assert img.size[0] > 300
    again = run_study("long-gd", out, "tiny", jobs=1)
    assert again.message.startswith("0 tasks run, 2 already done")


@pytest.mark.slow
def test_regpath_rows_compare_with_pr(tiny):
    out, _ = tiny
    rows = read_claim_rows(out / "claim_regpath.csv", claim_regpath.FIELDS, claim_regpath.TEXT)
    assert {r["method"] for r in rows} == {"path", "constrained", "gd-wd"}
    path = [r for r in rows if r["method"] == "path"]
    assert {r["lam"] for r in path} == {1e-1, 1e-3}
    constrained = sorted(
        (r for r in rows if r["method"] == "constrained"), key=lambda r: r["r_scale"]
    )
    assert [r["r_scale"] for r in constrained] == [1.0, 8.0]
    assert all(math.isnan(r["lam"]) for r in constrained) and all(math.isnan(r["mu"]) for r in path)
    assert constrained[0]["mu"] > constrained[1]["mu"] > 0
    both = path + constrained
    assert all(r["status"] == "converged" and -1 <= r["cos_v"] <= 1 + 1e-12 for r in both)
    # No interpolator at radius R is cheaper than P_R's solution, certified at this n.
    assert all(r["ref_status"] == "optimal" and r["norm_ratio"] >= 1 - 1e-6 for r in both)


@pytest.mark.slow
def test_long_gd_and_neighbour_rows(tiny):
    out, _ = tiny
    rows = read_claim_rows(out / "claim_longgd.csv", claim_longgd.FIELDS, claim_longgd.TEXT)
    assert {r["step"] for r in rows} == set(claim_longgd.checkpoints(100))
    assert {r["weight_decay"] for r in rows} == {0.0, 1e-3}
    sak = read_claim_rows(
        out / "claim_sakamoto.csv", claim_neighbours.SAK_FIELDS, claim_neighbours.TEXT
    )
    assert {r["method"] for r in sak} == {"p-only", "v-only", "joint"}
    assert all(r["norm_p"] == 0 for r in sak if r["method"] == "v-only")
    tar = read_claim_rows(
        out / "claim_tarzanagh.csv", claim_neighbours.TAR_FIELDS, claim_neighbours.TEXT
    )
    last = max(tar, key=lambda r: r["step"])
    assert last["same_as_final"] == 1.0 and last["cos_current"] == pytest.approx(last["cos_final"])


def test_kappa_star_interpolates_on_log_kappa():
    rows = [{"kappa": k, "test_error_clean": e} for k, e in ((1.0, 0.5), (2.0, 0.3), (4.0, 0.1))]
    assert claim_tokens.kappa_star(rows) == pytest.approx(2**1.25)
    assert claim_tokens.kappa_star(rows, level=0.6) == 1.0
    assert math.isnan(claim_tokens.kappa_star(rows, level=0.05))


def test_top_noise_share_of_flipped_samples():
    # Sample 0 is flipped, signal at token 0; p puts scores (0, log 3, 0) -> attention
    # (1/5, 3/5, 1/5): top noise token 3/5, its share of the noise attention 3/4.
    X = np.zeros((2, 3, 3))
    X[:, 1, 1] = 1.0
    data = Dataset(
        X=X, y=np.array([-1, 1]), clean_y=np.array([1, 1]), signal_index=np.array([0, 0])
    )
    top, frac, k = claim_tokens.top_noise_share(data, np.array([0.0, np.log(3.0), 0.0]))
    assert (top, frac, k) == (pytest.approx(0.6), pytest.approx(0.75), 1)


def test_fixed_head_figure_names_a_constant_panel_instead_of_drawing_it(tmp_path, monkeypatch):
    rows = [
        {
            "kappa": k,
            "n": 40,
            "d": 100,
            "seed": s,
            "method": m,
            "status": "completed",
            "train_error": 0.0,
            "test_error_clean": 0.1 * k + s,
            "attn_signal_clean": 0.5,
            "attn_signal_noisy": 0.5,
            "norm_p": 1.0,
        }
        for k in (1.0, 2.0)
        for s in (0, 1)
        for m in ("p-only", "v-only", "joint")
    ]
    rows[0]["attn_signal_clean"] = 0.9  # this panel varies, the training error does not
    csv = tmp_path / "sak.csv"
    fields = claim_neighbours.SAK_FIELDS
    csv.write_text(
        ",".join(fields)
        + "\n"
        + "".join(",".join(str(r.get(f, "")) for f in fields) + "\n" for r in rows)
    )
    drawn = []
    monkeypatch.setattr(claim_neighbours, "save_figure", lambda fig, png: drawn.append(fig) or png)
    claim_neighbours.plot_sakamoto(csv, tmp_path / "sak.png")
    (fig,) = drawn
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "clean test error",
        "attention on signal (clean train)",
    ]
    assert "Not drawn: training error = 0" in fig._suptitle.get_text()


def _claim_row(train, test, init, **options):
    return [{"n_train": train.n}]


@pytest.mark.skipif(
    not __import__("pathlib").Path("/proc/self/task").exists(), reason="reads /proc"
)
def test_claim_tasks_leave_no_worker_processes_behind(tmp_path):
    # joblib's shared executor kept its loky workers alive after a study (and after a killed
    # `margin-solver bench`); the claim runner's own executor ends them with the run
    from pathlib import Path

    from margin_solver.bench.claim_runner import ClaimTask, run_claim_tasks
    from margin_solver.bench.sweeps import SweepGrid

    def children():
        return {
            int(c)
            for task in Path("/proc/self/task").iterdir()
            for c in (task / "children").read_text().split()
        }

    before = children()
    cells = list(SweepGrid(n=[6], d=[10], kappa=[1.0], seeds=4, methods=["uniform-svm"]).cells())
    tasks = [ClaimTask({"seed": c.seed}, c, 5, 0, _claim_row, {}) for c in cells]
    run_claim_tasks(tasks, tmp_path / "c.csv", ("seed", "n_train"), ("seed",), jobs=2)
    rows = read_claim_rows(tmp_path / "c.csv", ("seed", "n_train"), ())
    assert sorted(r["seed"] for r in rows) == sorted(float(c.seed) for c in cells)
    commands = {
        pid: Path(f"/proc/{pid}/cmdline").read_bytes()
        for pid in children() - before
        if Path(f"/proc/{pid}/cmdline").exists()
    }
    # the resource trackers live as long as this process, whatever runs the tasks
    assert [c for c in commands.values() if b"resource_tracker" not in c] == []


def _warning_claim_row(train, test, init, **options):
    import warnings

    from margin_solver.core.results import ConvergenceWarning

    warnings.warn("did not interpolate", ConvergenceWarning, stacklevel=1)
    warnings.warn("something else", UserWarning, stacklevel=1)
    return [{"status": "not_interpolating"}]


def test_a_claim_task_keeps_its_methods_convergence_warnings_in_its_rows():
    # `bench --quick` printed a raw ConvergenceWarning from the tokens claim: the status
    # column already says it; other warnings still reach the caller
    import warnings

    from margin_solver.bench.claim_runner import ClaimTask, run_task
    from margin_solver.bench.sweeps import SweepGrid

    cell = next(
        iter(SweepGrid(n=[6], d=[10], kappa=[1.0], seeds=1, methods=["uniform-svm"]).cells())
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = run_task(ClaimTask({"seed": 0}, cell, 5, 0, _warning_claim_row, {}))
    assert rows == [{"seed": 0, "status": "not_interpolating"}]
    assert [str(w.message) for w in caught] == ["something else"]
