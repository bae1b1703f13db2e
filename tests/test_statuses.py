"""The status vocabulary: one table in the code, the same table in docs/statuses.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from margin_solver.cli import EXIT_CAVEAT, EXIT_NO_ANSWER, EXIT_OK, exit_status
from margin_solver.core.results import SOLUTION_PRESENT, STATUS_TABLE, ResultMixin

DOC = Path(__file__).resolve().parents[1] / "docs" / "statuses.md"


def _doc_table() -> dict[str, tuple[bool, bool]]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- status-table -->\n(.*?)<!-- /status-table -->", text, re.S)
    assert block, "docs/statuses.md lost its status-table markers"
    rows = {}
    for line in block.group(1).splitlines()[2:]:
        name, success, present = (c.strip() for c in line.strip("|").split("|")[:3])
        rows[name.strip("`")] = (success == "yes", present == "yes")
    return rows


def test_docs_table_matches_the_code():
    assert _doc_table() == STATUS_TABLE


@dataclass(repr=False)
class _Result(ResultMixin):
    status: str
    message: str = ""


@pytest.mark.parametrize("status", sorted(STATUS_TABLE))
def test_flags_and_exit_status_follow_the_table(status):
    res = _Result(status)
    success, present = STATUS_TABLE[status]
    assert res.success is success and res.solution_present is present
    assert (status in SOLUTION_PRESENT) is present
    expected = EXIT_OK if success else (EXIT_CAVEAT if present else EXIT_NO_ANSWER)
    assert exit_status(res) == expected
    assert res.to_dict()["success"] is success


def test_a_certified_optimum_and_a_proof_of_infeasibility_differ_from_search_failures():
    assert STATUS_TABLE["optimal"] == (True, True)
    assert STATUS_TABLE["infeasible"] == (False, False)
    assert STATUS_TABLE["no_feasible_point_found"] == (False, False)
    assert STATUS_TABLE["max_iter"] == (False, True)
