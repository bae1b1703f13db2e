"""The benchmarks page's tables are rendered from its results files, never typed."""

import json
import re
from pathlib import Path

import pytest

from margin_solver.bench import page
from margin_solver.bench.provenance import run_metadata

ROOT = Path(__file__).resolve().parents[1]


def _results(folder: Path, name: str, data: dict) -> None:
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("name", [path.name for path in page.PAGES])
def test_committed_page_equals_the_page_rendered_from_committed_results(name):
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    assert page.MARKER.search(text), "the page has no generated table"
    assert page.render(text, ROOT / "docs" / "results") == text


@pytest.mark.parametrize("name", [path.name for path in page.PAGES + (Path("README.md"),)])
def test_pages_name_no_path_of_one_machine(name):
    # a command on the page is one a reader can run from the repository: no absolute paths
    text = (ROOT / name if name == "README.md" else ROOT / "docs" / name).read_text("utf-8")
    assert not re.findall(r"(?<![\w.])/(?:tmp|work|home|root|Users)/\S*", text)


def test_every_committed_results_file_has_its_table_on_a_page():
    texts = [(ROOT / path).read_text(encoding="utf-8") for path in page.PAGES]
    marked = {m["name"] for text in texts for m in page.MARKER.finditer(text)}
    assert marked == {p.stem for p in (ROOT / "docs" / "results").glob("*.json")}


def test_table_is_rebuilt_between_its_markers_with_the_runs_metadata(tmp_path):
    meta = run_metadata("margin_solver.bench.measure.example", ["--out", "x.json"])
    rows = [{"engine": "a", "s": 0.123456, "gap": None}, {"engine": "b|c", "s": 2.0, "x": 1}]
    _results(tmp_path, "demo", {"meta": meta, "rows": rows})
    text = "before\n<!-- table: demo columns=engine,s,gap -->\nstale\n<!-- /table -->\nafter\n"
    out = page.render(text, tmp_path)
    assert out.startswith("before\n<!-- table: demo columns=engine,s,gap -->\n| engine | s | gap |")
    assert "| a | 0.1235 | - |\n| b\\|c | 2 | - |" in out and "stale" not in out
    assert "`python -m margin_solver.bench.measure.example --out x.json`" in out
    assert f"{meta['date']}, commit {meta['commit']}" in out
    assert f"numpy {meta['versions']['numpy']}, scipy" in out
    assert out.endswith("<!-- /table -->\nafter\n")
    assert page.render(out, tmp_path) == out


def test_rows_and_where_settings_pick_a_list_and_filter_it(tmp_path):
    meta = run_metadata("m", [])
    data = {"meta": meta, "table": [{"k": "x", "v": 1}, {"k": "y", "v": 2}], "rows": []}
    _results(tmp_path, "t", data)
    out = page.render("<!-- table: t rows=table where=k:y -->\n<!-- /table -->", tmp_path)
    assert "| k | v |\n|---|---|\n| y | 2 |\n" in out


def test_where_joins_conditions_takes_alternatives_and_quoted_values(tmp_path):
    rows = [
        {"m": "two step", "n": 1},
        {"m": "two step", "n": 2},
        {"m": "x", "n": 3},
        {"m": "y", "n": 2},
    ]
    _results(tmp_path, "t", {"meta": run_metadata("m", []), "rows": rows})
    out = page.render('<!-- table: t where="m:two step|y;n:2" -->\n<!-- /table -->', tmp_path)
    assert "| m | n |\n|---|---|\n| two step | 2 |\n| y | 2 |\n\n" in out
    with pytest.raises(page.PageError, match="no row meets"):
        page.render("<!-- table: t where=n:9 -->\n<!-- /table -->", tmp_path)


@pytest.mark.parametrize("missing", ["date", "commit", "machine", "versions", "command"])
def test_results_file_without_its_metadata_is_refused(tmp_path, missing):
    meta = run_metadata("m", [])
    del meta[missing]
    _results(tmp_path, "t", {"meta": meta, "rows": [{"a": 1}]})
    with pytest.raises(page.PageError, match="lacks the metadata"):
        page.render("<!-- table: t -->\n<!-- /table -->", tmp_path)


def test_results_file_without_meta_or_rows_is_refused(tmp_path):
    _results(tmp_path, "bare", {"rows": [{"a": 1}]})
    _results(tmp_path, "empty", {"meta": run_metadata("m", []), "rows": []})
    with pytest.raises(page.PageError, match="lacks the metadata"):
        page.render("<!-- table: bare -->\n<!-- /table -->", tmp_path)
    with pytest.raises(page.PageError, match="no list of rows"):
        page.render("<!-- table: empty -->\n<!-- /table -->", tmp_path)
    with pytest.raises(page.PageError, match="cannot read"):
        page.render("<!-- table: absent -->\n<!-- /table -->", tmp_path)


def test_check_reports_a_stale_page_and_rewrite_fixes_it(tmp_path, capsys):
    _results(tmp_path, "t", {"meta": run_metadata("m", []), "rows": [{"a": 1}]})
    doc = tmp_path / "page.md"
    doc.write_text("<!-- table: t -->\n<!-- /table -->\n", encoding="utf-8")
    argv = ["--page", str(doc), "--results", str(tmp_path)]
    assert page.main([*argv, "--check"]) == 1
    assert page.main(argv) == 0
    assert page.main([*argv, "--check"]) == 0
    assert "| a |\n|---|\n| 1 |" in doc.read_text(encoding="utf-8")


def test_run_metadata_records_the_facts_the_page_prints():
    meta = run_metadata("margin_solver.bench.measure.x", ["--quick"])
    assert meta["command"] == "python -m margin_solver.bench.measure.x --quick"
    assert meta["machine"]["cores"] >= 1 and meta["machine"]["cpu"]
    assert set(meta["versions"]) == {"python", "numpy", "scipy", "cvxpy"}
    assert len(meta["date"]) == 10 and meta["commit"]


def test_suite_time_records_pytests_counts_in_a_file_the_page_renders(tmp_path, monkeypatch):
    from margin_solver.bench.measure import suite_time

    tests = tmp_path / "test_two.py"
    tests.write_text("def test_ok():\n    pass\n\n\ndef test_fails():\n    assert False\n")
    out = tmp_path / "suite_time.json"
    argv = ["--out", str(out), "--", str(tests), "-n", "0", "-p", "no:cacheprovider"]
    assert suite_time.main(argv) == 1
    row = json.loads(out.read_text())["rows"][0]
    assert (row["passed"], row["failed"], row["exit code"]) == (1, 1, 1) and row["wall s"] > 0
    rendered = page.render("<!-- table: suite_time -->\n<!-- /table -->", tmp_path)
    assert "| 1 | 1 | 0 |" in rendered and "margin_solver.bench.measure.suite_time" in rendered


def test_startup_time_times_fresh_interpreters():
    from margin_solver.bench.measure import startup_time

    seconds = startup_time.time_command(("-c", "pass"), repeats=2)
    assert len(seconds) == 2 and all(0 < s < 60 for s in seconds)
