"""The certificate-cost benchmark (margin_solver.bench.measure.certify_cost) writes what the
page renders: per case, the bound's and the certified solve's work and seconds."""

import argparse
import json

import pytest

from margin_solver.bench.measure import certify_cost


def test_a_small_case_is_written_with_its_work(tmp_path, capsys):
    out = tmp_path / "cost.json"
    assert certify_cost.main(["--cases", "10:2", "--out", str(out)]) == 0
    assert "n=10 T=2" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["meta"]["command"].endswith(f"--cases 10:2 --out {out}")
    (row,) = data["rows"]
    assert row["bound_status"] == "optimal" and row["certify_status"] == "optimal"
    assert row["certify_work"] >= row["bound_work"] >= 1
    assert row["work_ratio"] == row["certify_work"] / row["bound_work"]
    assert row["start"] == "lb_selection" and row["starts"] == 1


@pytest.mark.parametrize("text", ["10", "ten:2", "1:2"])
def test_a_bad_case_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="a case"):
        certify_cost._case(text)
