"""docs/usage.md prints what it shows: every Python block and every ``$`` command runs in
order, in one empty folder, as a reader following the page would, and what each prints must be
the output the page shows under it (tests/docrun.py: words exactly, numbers to a relative
1e-3, both sides at most 1e-6 in magnitude counting as equal; ``...`` on the page marks what
depends on the clock or the machine, e.g. seconds and memory, and is not compared). A command
exits with status 0 unless the page shows its ``exit N``."""

from __future__ import annotations

from pathlib import Path

import docrun
import pytest

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"


@pytest.mark.slow
def test_the_usage_page_prints_what_it_shows(tmp_path):
    run = docrun.run_page(USAGE, tmp_path, "docs/usage.md")
    assert not run.differences, "\n".join(run.differences)
    # every block has run but two that need a Dask cluster, the demo (tests/test_demo.py
    # compares its summary) and bench --tiny, each saying why
    assert run.ran >= 40 and run.skipped == 4
