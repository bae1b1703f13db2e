"""The README's Python example runs as printed."""

import re
from pathlib import Path

from docrun import python_blocks

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(capsys):
    blocks = python_blocks(README)
    assert len(blocks) == 1
    assert len(blocks[0].strip().splitlines()) <= 12
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(
        r"AGREES: predicted benign for the min-norm interpolator at R = [0-9.e+-]+, "
        r"observed benign",
        out,
    )


def test_readme_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    fence = lines.index("```")
    assert lines[fence + 1].startswith("make demo") and lines[fence + 2].startswith("make test")
