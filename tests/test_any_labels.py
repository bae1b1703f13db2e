"""Any two labels everywhere (issue 41): the solvers, Dataset and the CLI read them once,
as signs (``classes[0]`` -> -1, ``classes[1]`` -> +1), and keep the user's labels."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin_solver.analysis.compare import compare
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.cli import main
from margin_solver.core.data import Dataset, PaperDistribution, load_dataset
from margin_solver.core.validation import InvalidInputError, encode_labels
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.minnorm.multihead import solve_min_norm_heads
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import check_conditions

TRAIN = PaperDistribution(d=40, snr=1.0, eta=0.0).sample(8, seed=2)
SIGNS = TRAIN.y.astype(float)

#: Pairs of labels (classes[0], classes[1]) in the order that makes classes[1] the +1 class.
PAIRS = [(-1, 1), (0, 1), (False, True), ("cat", "dog"), (2.5, 7.0), ("3", "8")]


def _relabel(signs, pair):
    return np.where(signs > 0, np.array(pair[1], dtype=object), np.array(pair[0], dtype=object))


@pytest.mark.parametrize("pair", PAIRS)
def test_the_solvers_give_the_same_answer_for_any_two_labels(pair):
    y = np.asarray(_relabel(SIGNS, pair).tolist())  # numbers, booleans or strings
    ref_mn, mn = (solve_min_norm(TRAIN.X, lab, 5.0, n_random_starts=0) for lab in (SIGNS, y))
    assert mn.norm == ref_mn.norm and mn.status == ref_mn.status
    ref_gd, gd = (gradient_descent(TRAIN.X, lab) for lab in (SIGNS, y))
    np.testing.assert_array_equal(gd.v, ref_gd.v)
    # the results carry the user's labels in sign order and predict in them
    assert ref_mn.classes.tolist() == [-1, 1] and ref_gd.classes.tolist() == [-1, 1]
    for result in (mn, gd):
        assert result.classes.tolist() == list(pair)
        assert json.loads(result.to_json())["classes"] == list(pair)
    assert mn.solution_present and mn.predict(TRAIN.X).tolist() == y.tolist()  # interpolates
    signs = np.where(ref_gd.decision_function(TRAIN.X) >= 0, 1, -1)
    assert gd.predict(TRAIN.X).tolist() == _relabel(signs, pair).tolist()
    ref_lb, lb = (global_lower_bound(TRAIN.X, lab) for lab in (SIGNS, y))
    assert lb.value == ref_lb.value
    data = Dataset(TRAIN.X, y, clean_y=y, params=TRAIN.params)
    assert data.labels.tolist() == y.tolist() and data.classes.tolist() == list(pair)
    report = check_conditions(data)
    assert report.predicted_regime == check_conditions(TRAIN).predicted_regime
    assert report.classes.tolist() == list(pair) and compare(mn, gd, data).classes is data.classes


@pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")
def test_labels_of_several_heads_and_mismatched_labels():
    y = _relabel(SIGNS, ("cat", "dog")).astype(str)
    data = Dataset(TRAIN.X, y)
    heads = solve_min_norm_heads(data, R=5.0, heads=2, n_random_starts=0, max_iter=5)
    assert heads.v.shape == (2, TRAIN.d) and heads.classes.tolist() == ["cat", "dog"]
    assert heads.predict(data.X).tolist() == y.tolist()
    # signs that mean other labels are refused, not compared as if they meant the same
    signs = solve_min_norm(TRAIN, R=5.0, n_random_starts=0)
    with pytest.raises(InvalidInputError, match=r"fitted with the labels \[-1, 1\]"):
        compare(signs, heads, data)
    with pytest.raises(InvalidInputError, match=r"fitted with the labels \[-1, 1\]"):
        check_conditions(data, signs)
    with pytest.raises(InvalidInputError, match="test has the labels"):
        gradient_descent(data, test=TRAIN)
    with pytest.raises(InvalidInputError, match=re.escape("classes=train.classes")):
        check_conditions(data, test=TRAIN)
    infeasible = solve_min_norm(TRAIN.X[[0, 0]], ["cat", "dog"], 5.0)  # same tokens
    assert infeasible.status == "infeasible" and infeasible.classes.tolist() == ["cat", "dog"]
    with pytest.raises(InvalidInputError, match="no model"):
        infeasible.predict(TRAIN.X)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(-5, 5), st.text(min_size=1, max_size=3), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_encode_labels_round_trips_or_names_the_labels(values):
    kinds = {type(v) for v in values}
    if len(kinds) > 1:  # numpy would coerce mixed kinds; not a labelling a user gives
        return
    y = np.asarray(values)
    distinct = np.unique(y)
    try:
        signs, classes = encode_labels(y)
    except InvalidInputError as exc:
        message = str(exc)
        assert len(message.splitlines()) == 1
        assert len(distinct) > 2 or (len(distinct) == 1 and "one label only" in message)
        if len(distinct) > 2:
            assert f"got {len(distinct)}:" in message
        return
    assert len(distinct) <= 2 and set(signs.tolist()) <= {-1.0, 1.0}
    assert classes[(signs > 0).astype(int)].tolist() == y.tolist()
    if len(distinct) == 2:
        assert classes.tolist() == sorted(distinct.tolist())  # the larger label is +1


def test_three_labels_are_one_line_naming_them():
    with pytest.raises(InvalidInputError, match=re.escape("got 3: ['a', 'b', 'c']")):
        Dataset(TRAIN.X[:3], ["a", "b", "c"])


def test_a_file_with_string_labels_keeps_them_and_the_cli_solves_it(tmp_path, capsys):
    y = _relabel(SIGNS, ("eight", "three")).astype(str)  # sorted: "three" is +1
    path = Dataset(TRAIN.X, y).save(tmp_path / "named.npz")
    back = load_dataset(path)
    assert back.labels.tolist() == y.tolist() and back.y.tolist() == SIGNS.astype(int).tolist()
    one = back.subset(np.flatnonzero(y == "eight"))  # one label alone keeps its sign
    assert set(one.y.tolist()) == {-1} and load_dataset(one.save(tmp_path / "one.npz")).y[0] == -1
    out = tmp_path / "solution.json"
    assert main(["solve", str(path), "--R", "5", "--json", str(out)]) == 0
    assert "labels      -1 = 'eight', +1 = 'three'" in capsys.readouterr().out
    assert json.loads(out.read_text())["classes"] == ["eight", "three"]
    assert main(["gd", str(path), "--json", str(tmp_path / "gd.json")]) in (0, 3)
    assert "labels: -1 = 'eight', +1 = 'three'" in capsys.readouterr().out
    assert json.loads((tmp_path / "gd.json").read_text())["classes"] == ["eight", "three"]
    assert main(["check", str(path), "--solution", str(out)]) == 0  # the same labels
    assert "labels: -1 = 'eight', +1 = 'three'" in capsys.readouterr().out
    np.savez(tmp_path / "three.npz", X=TRAIN.X[:3], y=np.array(["a", "b", "c"]))
    assert main(["solve", str(tmp_path / "three.npz"), "--R", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "y must hold two labels" in err and "'c'" in err
