"""docs/usage.md runs as printed: every Python block and every ``$`` command, in order, in
one empty folder (tests/docrun.py). A command's exit status must be the one the page shows
(its ``exit N`` line, else 0), and the ``exit N``, ``wrote ...`` and one-line error lines the
page shows must be printed (numbers in error lines may differ: memory and paths vary)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import docrun
import pytest

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"
CHECKED = re.compile(r"^(exit \d+|wrote \S+|margin-solver [\w-]+: (error|not certified).*)$")


def _pattern(line: str) -> re.Pattern:
    """A documented line as a pattern: numbers may differ, ``...`` stands for anything."""
    parts = re.split(r"(\.\.\.|\d+(?:\.\d+)?)", line)
    out = "".join(
        ".*?" if p == "..." else r"\d+(?:\.\d+)?" if p and p[0].isdigit() else re.escape(p)
        for p in parts
    )
    return re.compile(out)


def _echoes(cmd: docrun.Command) -> bool:
    """The command prints its own ``exit N`` line (else the page adds it: ``echo $?``)."""
    return "exit $?" in cmd.command or "PIPESTATUS" in cmd.command


def _expected_status(cmd: docrun.Command) -> int:
    shown = [int(m.group(1)) for line in cmd.expected if (m := re.fullmatch(r"exit (\d+)", line))]
    return shown[-1] if shown and not _echoes(cmd) else 0


@pytest.mark.slow
def test_every_command_of_the_usage_page_runs_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    ran = skipped = 0
    for block in docrun.blocks(USAGE):
        where = f"docs/usage.md:{block.line}"
        if block.skip_reason:
            skipped += 1
            continue
        if block.kind == "python":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the page shows warnings on purpose
                docrun.run_python(block.text, namespace, where)
            ran += 1
        elif block.kind == "shell":
            for cmd in docrun.commands(block):
                out = docrun.run_command(cmd.command, tmp_path)
                printed = out.stdout + out.stderr
                assert out.returncode == _expected_status(cmd), (
                    where,
                    cmd.command,
                    printed[-2000:],
                )
                for line in cmd.expected:
                    if CHECKED.match(line) and (not line.startswith("exit ") or _echoes(cmd)):
                        assert _pattern(line).search(printed), (
                            where,
                            cmd.command,
                            line,
                            printed[-2000:],
                        )
                ran += 1
    assert ran >= 40 and skipped == 3  # two Dask-cluster blocks and bench --tiny, each saying why
