"""The search-quality benchmark's independent patient searches (``--patients``)."""

import json
import math

import pytest

from margin_solver.bench import search_quality


def test_second_patient_search_is_a_method_of_the_row_and_its_summary():
    spec = {"kind": "gaussian", "n": 6, "T": 2, "d": 40, "R_sqrt_d": 1e4, "seed": 5}
    row = search_quality.run_instance(spec, n_random=4, n_selections=2, patients=2)
    assert search_quality.methods([row]) == [*search_quality.METHODS, "patient_2"]
    assert math.isfinite(row["patient_2"]) and row["patient_2_s"] > 0
    assert row["best_known"] == min(row[m] for m in search_quality.methods([row]))
    table = search_quality.summary([row])
    assert "| all | 1 | patient_2 |" in table


def test_patient_searches_differ_only_by_their_seed(monkeypatch):
    seeds = []
    monkeypatch.setattr(search_quality, "patient_search",
                        lambda X, y, R, *, n_random, n_selections, seed: seeds.append(seed) or 1.0)
    spec = {"kind": "integer", "n": 6, "T": 2, "d": 40, "R_sqrt_d": 1e4, "seed": 7}
    search_quality.run_instance(spec, n_random=1, n_selections=1, patients=3)
    assert seeds == [7, 7 + search_quality.PATIENT_SEED_STEP,
                     7 + 2 * search_quality.PATIENT_SEED_STEP]


def test_patients_below_one_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        search_quality.main(["--patients", "0", "--instances", "1"])
    assert stop.value.code == 2
    assert "--patients must be at least 1" in capsys.readouterr().err


def test_default_solve_alone_against_two_patient_searches(monkeypatch, tmp_path, capsys):
    spec = {"kind": "paper", "n": 6, "T": 2, "d": 40, "R_sqrt_d": 1e4, "seed": 3}
    monkeypatch.setattr(search_quality, "instances", lambda count, seed, samples: [spec])
    out = tmp_path / "run.json"
    code = search_quality.main(["--instances", "1", "--random", "2", "--selections", "1",
                                "--patients", "2", "--solves", "default", "--out", str(out)])
    assert code == 0
    row, = json.loads(out.read_text())["rows"]
    assert "before" not in row and "certified" not in row
    assert search_quality.methods([row]) == ["default", "patient", "patient_2"]
    printed = capsys.readouterr().out
    assert "| patient_2 |" in printed and "default matches or beats" in printed


def test_solves_must_include_the_default(capsys):
    with pytest.raises(SystemExit) as stop:
        search_quality.main(["--solves", "before,certified", "--instances", "1"])
    assert stop.value.code == 2
    assert "--solves must name default" in capsys.readouterr().err


def test_the_range_of_n_is_an_option():
    # the default range draws the instances of the earlier runs; another range only changes n
    default = search_quality.instances(30, 7)
    assert default == search_quality.instances(30, 7, (6, 14))
    assert {spec["n"] for spec in default} <= set(range(6, 15))
    wide = search_quality.instances(30, 7, (33, 48))
    assert {spec["n"] for spec in wide} <= set(range(33, 49))
    assert len({spec["n"] for spec in wide}) > 5


@pytest.mark.parametrize("value", ["40", "48,33", "0,5", "a,b"])
def test_a_bad_range_of_n_is_a_usage_error(capsys, value):
    with pytest.raises(SystemExit) as stop:
        search_quality.main(["--samples", value, "--instances", "1"])
    assert stop.value.code == 2
    assert "--samples must be LO,HI" in capsys.readouterr().err
