"""The whole-solve benchmark against the token Gram product: its sizes and the strategy
table's fields reach the solve (docs/benchmarks.md, "Cost against the token Gram product")."""

from __future__ import annotations

import json

from margin_solver.bench.measure.minnorm_scaling import main


def test_whole_solve_at_given_sizes_with_options(tmp_path):
    out = tmp_path / "scaling.json"
    argv = ["--study", "whole_solve", "--size", "5", "2", "30", "--size", "4", "3", "20"]
    argv += ["--repeats", "1", "--out", str(out)]
    assert main([*argv, "--options", '{"vstep_solver": "active"}']) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["n"], r["T"], r["d"]) for r in rows] == [(5, 2, 30), (4, 3, 20)]
    assert all(json.loads(r["options"]) == {"vstep_solver": "active"} for r in rows)
    assert all(len(r["solve_s_all"]) == 1 and r["status"] == "local_optimal" for r in rows)
