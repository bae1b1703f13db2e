"""Result objects, JSON output, atomic writes and the shared metrics."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

from margin_solver.analysis.metrics import evaluate
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.results import ResultMixin


@dataclass(repr=False)
class _Toy(ResultMixin):
    status: str
    message: str
    x: np.ndarray
    value: float


def test_result_json_and_repr():
    r = _Toy("optimal", "solved", np.arange(3.0), float("nan"))
    d = json.loads(r.to_json())
    assert d == {
        "status": "optimal",
        "message": "solved",
        "x": [0.0, 1.0, 2.0],
        "value": None,
        "success": True,
    }
    text = repr(r)
    assert text.splitlines()[1].strip() == "message: solved"
    assert "success: True" in text
    assert not _Toy("infeasible", "no v separates", np.zeros(1), 0.0).success


def test_write_json_is_atomic_and_leaves_no_temporary(tmp_path):
    path = write_json(tmp_path / "out" / "r.json", _Toy("optimal", "ok", np.ones(2), 1.5))
    assert json.loads(path.read_text())["x"] == [1.0, 1.0]
    # the file and its ownership mark (fileio.mark_path), no temporary left behind
    assert sorted(p.name for p in path.parent.iterdir()) == [".r.json.margin-solver", "r.json"]


def test_evaluate_errors_and_attention_split():
    # sample 0 clean, sample 1 noisy; tokens: signal e1/e2 first, noise e3 second
    X = np.zeros((2, 2, 3))
    X[0, 0, 0] = 1.0  # clean +1 sample, signal mu_+ = e1
    X[1, 0, 1] = 1.0  # clean -1 sample ...
    X[0, 1, 2] = X[1, 1, 2] = 1.0
    ds = Dataset(X, y=[1, 1], clean_y=[1, -1], signal_index=[0, 0])
    v = np.array([1.0, -1.0, 0.0])
    p = np.array([np.log(3.0), 0.0, 0.0])  # sample 0 attends 3/4 to signal, sample 1 1/2
    m = evaluate(v, p, ds)
    assert m.error == 0.5 and m.error_clean == 0.0
    assert m.attn_signal_clean == pytest.approx(0.75) and m.attn_signal_noisy == pytest.approx(0.5)
    assert m.min_margin == pytest.approx(-0.5)
    np.testing.assert_array_equal(m.selected_token, [0, 0])
    assert json.dumps(m.to_dict())


def test_evaluate_without_metadata():
    ds = PaperDistribution(d=20, snr=1.0).sample(8, seed=0)
    raw = Dataset(ds.X, ds.y)
    m = evaluate(np.ones(20), np.zeros(20), raw)
    assert m.error_clean is None and m.attn_signal is None and m.attn_signal_noisy is None


def test_trusted_metrics_with_stand_in_labels_equals_evaluate_on_a_rebuilt_dataset():
    # the checker passes its estimated clean labels and signal positions instead of building a
    # Dataset around them: the numbers must be the same
    from margin_solver.analysis.metrics import trusted_metrics

    full = PaperDistribution(d=60, snr=0.8, eta=0.2).sample(30, seed=4)
    bare = Dataset(full.X, full.y)
    rng = np.random.default_rng(0)
    v, p = rng.standard_normal(60), rng.standard_normal(60)
    stand_in = trusted_metrics(v, p, bare, full.clean_y, full.signal_index)
    assert stand_in.to_dict() == evaluate(v, p, full).to_dict()
    assert stand_in.attn_signal_noisy is not None and stand_in.error_clean is not None
    # the dataset's own labels win over stand-ins
    flipped = trusted_metrics(v, p, full, -full.clean_y, full.signal_index)
    assert flipped.to_dict() == evaluate(v, p, full).to_dict()
