"""The search-quality benchmark's independent patient searches (``--patients``)."""

import json
import math

import numpy as np
import pytest

from margin_solver.bench.measure import search_quality


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
    monkeypatch.setattr(
        search_quality,
        "patient_search",
        lambda X, y, R, *, n_random, n_selections, seed: seeds.append(seed) or 1.0,
    )
    spec = {"kind": "integer", "n": 6, "T": 2, "d": 40, "R_sqrt_d": 1e4, "seed": 7}
    search_quality.run_instance(spec, n_random=1, n_selections=1, patients=3)
    assert seeds == [
        7,
        7 + search_quality.PATIENT_SEED_STEP,
        7 + 2 * search_quality.PATIENT_SEED_STEP,
    ]


def test_patients_below_one_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        search_quality.main(["--patients", "0", "--instances", "1"])
    assert stop.value.code == 2
    assert "--patients must be at least 1" in capsys.readouterr().err


def test_default_solve_alone_against_two_patient_searches(monkeypatch, tmp_path, capsys):
    spec = {"kind": "paper", "n": 6, "T": 2, "d": 40, "R_sqrt_d": 1e4, "seed": 3}
    monkeypatch.setattr(search_quality, "instances", lambda count, seed, samples, kinds: [spec])
    out = tmp_path / "run.json"
    code = search_quality.main(
        [
            "--instances",
            "1",
            "--random",
            "2",
            "--selections",
            "1",
            "--patients",
            "2",
            "--solves",
            "default",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    (row,) = json.loads(out.read_text())["rows"]
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


@pytest.mark.parametrize("kind", ["wine", "cancer", "digits"])
def test_real_kinds_cut_standardised_rows_into_tokens(kind):
    from margin_solver.bench.realdata import tabular_two_classes

    (spec,) = search_quality.instances(1, 11, (10, 10), (kind,))
    assert (spec["T"], spec["d"]) in search_quality.REAL_CUTS[kind]
    X, y = search_quality.make_instance(kind, 10, spec["T"], spec["d"], spec["seed"])
    features, labels = tabular_two_classes(kind)
    assert X.shape == (10, spec["T"], spec["d"]) and set(y) <= {-1.0, 1.0}
    # every sample is one row of the data, its first T d features in T consecutive blocks
    flat = X.reshape(10, -1)
    for row, label in zip(flat, y):
        match = np.flatnonzero((features[:, : flat.shape[1]] == row).all(axis=1))
        assert match.size >= 1 and labels[match[0]] == label
    spread = features.std(axis=0)
    assert np.allclose(features.mean(axis=0), 0) and np.allclose(spread[spread > 0], 1)


def test_real_kinds_leave_the_generated_instances_as_they_were():
    mixed = search_quality.instances(12, 7, kinds=search_quality.KINDS + ("wine",))
    plain = search_quality.instances(12, 7)
    assert [(s["n"], s["R_sqrt_d"]) for s in mixed] == [(s["n"], s["R_sqrt_d"]) for s in plain]
    assert search_quality.instances(30, 20261130) == search_quality.instances(
        30, 20261130, kinds=search_quality.KINDS
    )


def test_certificate_checks_name_each_false_word():
    base = {"kind": "gaussian", "gap_tol": 1e-4, "lower_bound": 0.5, "best_known": 1.0}
    rows = [
        dict(base, seed=1, certified_status="optimal", certified=1.0),  # true
        dict(base, seed=2, certified_status="optimal", certified=1.01),  # 1 % above
        dict(base, seed=3, certified_status="local_optimal", certified=1.0, lower_bound=1.2),
        dict(base, seed=4, certified_status="infeasible", certified=math.inf, lower_bound=math.inf),
        dict(
            base,
            seed=5,
            certified_status="infeasible",
            certified=None,
            lower_bound=None,
            best_known=None,
        ),  # nobody found one
    ]
    line = search_quality.certificate_checks(rows)
    assert "2 infeasible, 1 local_optimal, 2 optimal" in line
    assert "optimal above the best known by more than gap_tol: 1 [2]" in line
    assert "lower bound above the best known: 2 [3, 4]" in line
    assert "infeasible with a feasible point found: 1 [4]" in line
    assert search_quality.certificate_checks([{"kind": "paper", "default": 1.0}]) == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kinds", "gaussian,iris"], "--kinds must name kinds of"),
        (["--kinds", "wine", "--samples", "6,200"], "wine has 130 rows, fewer than n = 200"),
    ],
)
def test_bad_kinds_are_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as stop:
        search_quality.main([*args, "--instances", "1"])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_a_real_token_run_checks_its_certificates(monkeypatch, tmp_path, capsys):
    out = tmp_path / "real.json"
    code = search_quality.main(
        [
            "--kinds",
            "wine",
            "--instances",
            "1",
            "--samples",
            "6,6",
            "--random",
            "2",
            "--selections",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["kind"] == "wine" and (row["T"], row["d"]) in search_quality.REAL_CUTS["wine"]
    printed = capsys.readouterr().out
    assert "| wine | 1 | default |" in printed and "certified solve: 1 " in printed
