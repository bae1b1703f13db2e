"""README.md prints what it shows: its Python example and its ``$`` commands run in order, in
one empty folder, and each prints the output shown under it (tests/docrun.py: words exactly,
numbers to a relative 1e-3, both sides at most 1e-6 in magnitude counting as equal; ``...``
marks what depends on the clock and is not compared)."""

from pathlib import Path

import docrun
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.slow
def test_the_readme_prints_what_it_shows(tmp_path):
    run = docrun.run_page(README, tmp_path, "README.md")
    assert not run.differences, "\n".join(run.differences)
    assert run.ran == 3  # the Python example, make-data and the certified solve


def test_the_python_example_fits_in_ten_lines():
    (block,) = [b for b in docrun.blocks(README) if b.kind == "python"]
    code = [line for line in block.text.splitlines() if line.strip()]
    assert len(code) <= 11  # ten lines and the import's continuation


def test_readme_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    fence = lines.index("```")
    assert lines[fence + 1].startswith("make demo") and lines[fence + 2].startswith("make test")
