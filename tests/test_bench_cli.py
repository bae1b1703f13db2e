"""End to end: `margin-solver bench --tiny` and `margin-solver sweep`, and the regime map."""

import json

import pytest
from PIL import Image
from test_claim_studies import CLAIMS

from margin_solver._version import __version__
from margin_solver.bench.resultlog import read_rows
from margin_solver.bench.studies import STUDIES
from margin_solver.bench.study_plots import regime_map
from margin_solver.bench.sweeps import load_results
from margin_solver.bench.trajectory_study import read_trajectories
from margin_solver.cli import main
from margin_solver.theory import Regime


@pytest.mark.slow
def test_bench_tiny_writes_every_study_and_resumes(tmp_path, capsys, monkeypatch):
    pytest.importorskip("sklearn")
    # Studies whose tiny run through run_study (what bench calls) is another test's: run once.
    # test_check_calibration, test_figure1, test_claim_studies
    for name in ("check-calibration", "figure1", *CLAIMS):
        monkeypatch.delitem(STUDIES, name)
    out = tmp_path / "res"
    assert main(["bench", "--tiny", "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    report = (out / "REPORT.md").read_text()
    assert "--tiny" in report and "cores" in report
    assert not (out / "mnist.csv").exists()  # MNIST studies run when asked for
    for name, study in STUDIES.items():
        if study.needs_path or study.custom is not None:
            continue
        rows = load_results(out / f"{name}.csv")
        assert {r["method"] for r in rows} == set(study.methods)
        assert all(r["status"] not in ("failed", "infeasible") for r in rows)
        meta = json.loads((out / f"{name}.json").read_text())
        assert meta["version"] == __version__ and meta["runs"][-1]["state"] == "complete"
        with Image.open(out / f"{name}.png") as img:
            assert img.info["dpi"][0] == pytest.approx(200, abs=1)
        table = (out / f"{name}.md").read_text()
        assert table.count("\n") == 2 + len(
            {(r["method"], *(r[k] for k in study.table_by)) for r in rows}
        )
        assert f"![{name}]({name}.png)" in report
    traj = read_trajectories(out / "trajectories.csv")
    assert len(traj) == 2 + 3  # min-norm, two-step endpoint, 3 checkpoints of constant-step GD
    (ref,) = [r for r in traj if r["method"] == "min-norm"]
    assert ref["cos_v"] == pytest.approx(1.0) and ref["cos_p"] == pytest.approx(1.0)
    assert "![trajectories](trajectories.png)" in report
    speed = read_rows(out / "speed.csv")
    assert [(r["script"], r["exit_code"]) for r in speed] == [("vstep_speed", "0")]
    assert "| ldp | optimal |" in (out / "speed.md").read_text()
    capsys.readouterr()
    assert (
        main(
            [
                "bench",
                "--tiny",
                "--out",
                str(out),
                "--only",
                "eta",
                "trajectories",
                "--jobs",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert (
        "0 cells run (0 failed), 8 already done" in printed
        and "0 rows computed, 5 already done" in printed
    )


def test_sweep_cli_runs_a_grid_and_reports_bad_input(tmp_path, capsys):
    out = tmp_path / "s.csv"
    grid = ["sweep", "--n", "8", "--kappa", "1", "4", "--d", "50", "--seeds", "2", "--n-test", "40"]
    args = [*grid, "--methods", "uniform-svm", "--out", str(out), "--jobs", "1", "--no-progress"]
    assert main(args) == 0
    assert "4 cells run (0 failed), 0 already done" in capsys.readouterr().out
    assert len(load_results(out)) == 4
    assert (
        main(["sweep", "--n", "8", "--d", "50", "--methods", "uniform-svm", "--out", str(out)]) == 2
    )
    assert "give --snr or --kappa" in capsys.readouterr().err
    assert main([*grid, "--methods", "nope", "--out", str(tmp_path / "t.csv")]) == 2
    assert "Unknown method 'nope'" in capsys.readouterr().err
    assert main([*args, "--method-options", "[1]"]) == 2
    assert "--method-options must be a JSON object" in capsys.readouterr().err


def test_sweep_cli_heads_is_a_grid_axis_on_the_same_samples(tmp_path, capsys):
    out = tmp_path / "h.csv"
    args = [
        "sweep",
        "--n",
        "8",
        "--kappa",
        "4",
        "--d",
        "40",
        "--n-test",
        "20",
        "--methods",
        "gd-two-step",
        "--heads",
        "1",
        "2",
        "--out",
        str(out),
        "--jobs",
        "1",
        "--no-progress",
    ]
    assert main(args) == 0
    assert "2 cells run (0 failed), 0 already done" in capsys.readouterr().out
    rows = load_results(out)
    assert sorted(r["heads"] for r in rows) == [1.0, 2.0]
    assert all(r["status"] == "completed" for r in rows)
    assert len({r["n_noisy"] for r in rows}) == 1  # one draw of the data for both
    assert rows[0]["norm"] != rows[1]["norm"]  # two different models


def test_regime_map_classifies_by_interpolation_and_clean_error():
    def row(n, train_error, test_error, status="optimal"):
        return {
            "method": "m",
            "n": n,
            "snr": 0.5,
            "status": status,
            "train_error": train_error,
            "test_error_clean": test_error,
        }

    rows = [
        row(1, 0.0, 0.02),
        row(1, 0.0, 0.06),  # interpolates, mean error 0.04
        row(2, 0.0, 0.3),
        row(2, 0.0, 0.2),  # interpolates, mean error 0.25
        row(3, 0.1, 0.0),
        row(3, 0.0, 0.0),
        row(3, float("nan"), float("nan"), "infeasible"),
    ]
    regimes = regime_map(rows, benign_max_error=0.1)
    assert regimes == {
        ("m", 1, 0.5): Regime.BENIGN,
        ("m", 2, 0.5): Regime.HARMFUL,
        ("m", 3, 0.5): Regime.NO_INTERPOLATION,
    }


def test_speed_benchmarks_run_in_process_and_a_failure_is_a_row(tmp_path, monkeypatch):
    """The speed report calls the benchmark functions (no script beside the package); one
    that raises is recorded with exit code 1 and its traceback, and the report still ends."""
    from margin_solver.bench.measure import speed_report, vstep_speed

    def broken(argv):
        print("started")
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(vstep_speed, "main", broken)
    csv, md, message = speed_report.run_speed_report(tmp_path, "tiny")
    [row] = read_rows(csv)
    assert row["script"] == "vstep_speed" and row["exit_code"] == "1"
    assert "started" in row["output"] and "ZeroDivisionError: injected" in row["output"]
    assert "(exit 1," in md.read_text()
