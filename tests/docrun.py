"""Run the examples of a Markdown page in order, as a reader would (tests/test_readme.py,
tests/test_usage_doc.py).

Blocks fenced as ```python run with ``exec`` in one shared namespace. A plain ``` block whose
lines start with ``$ `` is a shell session: each command (with ``\\`` continuations) runs in
bash, the lines after it up to the next ``$`` are what it printed. A block right after the
line ``<!-- not run: REASON -->`` is skipped, and the reason is part of the page.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")


@dataclass
class Block:
    kind: str  # "python", "shell", or "" (output or other text)
    text: str
    line: int
    skip_reason: str | None = None


@dataclass
class Command:
    command: str
    expected: list[str] = field(default_factory=list)


def blocks(path: Path) -> list[Block]:
    """Every fenced block of the page, in order."""
    text = path.read_text()
    out = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = NOT_RUN.search(before)
        kind = match.group(1)
        body = match.group(2)
        if not kind and any(line.startswith("$ ") for line in body.splitlines()):
            kind = "shell"
        out.append(
            Block(
                kind, body, text[: match.start()].count("\n") + 1, skip.group(1) if skip else None
            )
        )
    return out


def python_blocks(path: Path) -> list[str]:
    """The text of every ```python block of the page."""
    return [b.text for b in blocks(path) if b.kind == "python"]


def commands(block: Block) -> list[Command]:
    """The commands of a shell block with the lines each printed."""
    out: list[Command] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd + "\n" + lines[i]
            out.append(Command(cmd))
        elif out:
            out[-1].expected.append(line)
        i += 1
    return out


def run_python(code: str, namespace: dict, where: str) -> str:
    """Execute ``code`` in ``namespace``; return what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, where, "exec"), namespace)  # the docs' own examples
    return buffer.getvalue()


# ``margin-solver ARGS`` alone, optionally with ``> /dev/null`` and ``; echo "exit $?"``: run
# in this process (the same ``main`` the script calls), sparing an interpreter start per command.
_SIMPLE = re.compile(r'^margin-solver ([^|;&<>$`"\'\\]*?)( > /dev/null)?(; echo "exit \$\?")?$')


def run_command(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run one documented command: a plain ``margin-solver`` call in this process (from
    ``cwd``), anything else in bash (:func:`run_shell`)."""
    match = _SIMPLE.match(command)
    if not match:
        return run_shell(command, cwd)
    from margin_solver.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(match.group(1).split())
            except SystemExit as exc:  # argparse's usage errors and --help
                status = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    stdout = "" if match.group(2) else out.getvalue()
    if match.group(3):
        stdout += f"exit {status}\n"
        status = 0
    return subprocess.CompletedProcess(command, status, stdout, err.getvalue())


def run_shell(command: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run one documented command in bash, with this interpreter's ``margin-solver`` first on
    PATH (a command ending in ``&`` runs in the background and is waited for by bash)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("COLUMNS", None)
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start
