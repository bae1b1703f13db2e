"""Run the examples of a Markdown page in order, as a reader would, and compare what they print
with what the page shows (tests/test_readme.py, tests/test_usage_doc.py).

The page's convention:

- A block fenced as ```python runs with ``exec``; all Python blocks of a page share one
  namespace. What it prints is shown in the block fenced as ```output that comes right after
  it (the next fenced block; prose may stand between them). A Python block without one may
  print anything; an ```output block after anything but a Python block is an error.
- A plain ``` block whose lines start with ``$ `` is a shell session: each command (with ``\\``
  continuations) runs in bash, and the lines after it up to the next ``$`` are what it printed,
  stdout and stderr merged in the order a terminal shows them.
- A block right after the line ``<!-- not run: REASON -->`` is skipped, and the reason is part
  of the page. Plain blocks without ``$`` lines (a synopsis, a command to paste) are not run.

Shown and printed output are compared line by line (trailing blank lines and runs of spaces
aside) by :func:`differences`: words must be equal and numbers agree to :data:`RTOL` (relative),
or are both at most :data:`ATOL` in magnitude. ``...`` in a shown line stands for any text on
that line: the page writes it where the output depends on the clock or the machine (seconds,
memory, dates, a time-limited bound), so that only reproducible digits are shown.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")

RTOL = 1e-3
"""Relative tolerance on every shown number: the examples are deterministic, so this only
absorbs the rounding of another machine's BLAS in a printed digit."""

ATOL = 1e-6
"""Numbers both at most this in magnitude agree: gaps of certified solves (1e-9 to 1e-7),
losses near 0 and attention weights near 0 are rounding-level and machine-dependent."""

# A number (sign, digits, fraction, exponent) or a run of other non-space characters.
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TOKEN = re.compile(rf"({_NUMBER})|(\S)")
ELLIPSIS = "..."


@dataclass
class Block:
    kind: str  # "python", "output", "shell", or "" (other text)
    text: str
    line: int
    skip_reason: str | None = None


@dataclass
class Command:
    command: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Example:
    """One Python block with the output the page shows for it (None: the page shows none)."""

    code: str
    line: int
    shown: list[str] | None


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


def examples(page: list[Block]) -> list[Example | Block]:
    """The page's blocks with each Python block paired with its ```output block.

    Raises
    ------
    ValueError
        When an output block does not follow a Python block.
    """
    out: list[Example | Block] = []
    for i, block in enumerate(page):
        if block.kind == "output":
            if i == 0 or page[i - 1].kind != "python":
                raise ValueError(f"line {block.line}: an output block must follow a Python block")
            continue
        if block.kind == "python":
            following = page[i + 1] if i + 1 < len(page) else None
            shown = (
                following.text.splitlines() if following and following.kind == "output" else None
            )
            out.append(Example(block.text, block.line, shown))
        else:
            out.append(block)
    return out


@dataclass
class PageRun:
    """What running a page found: one message per line that differs (:func:`differences`) or
    command that failed without showing it, and how many examples ran and were skipped."""

    differences: list[str] = field(default_factory=list)
    ran: int = 0
    skipped: int = 0


def run_page(path: Path, cwd: Path, name: str) -> PageRun:
    """Run every example of the page at ``path`` in order in the folder ``cwd`` (the current
    directory meanwhile), comparing what each prints with what the page shows.

    A command must exit with status 0 unless the page shows its status (``; echo "exit $?"``),
    so that no failure goes unseen. ``name`` is the page's name in the messages.
    """
    out = PageRun()
    namespace: dict = {}
    here = os.getcwd()
    os.chdir(cwd)
    try:
        for item in examples(blocks(path)):
            where = f"{name}:{item.line}"
            if isinstance(item, Example):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the pages show warnings on purpose
                    printed = run_python(item.code, namespace, where)
                if item.shown is not None:
                    out.differences += differences(item.shown, printed, where)
                out.ran += 1
            elif item.skip_reason:
                out.skipped += 1
            elif item.kind == "shell":
                for cmd in commands(item):
                    run = run_command(cmd.command, cwd)
                    at = f"{where} `$ {cmd.command}`"
                    if run.returncode != 0:
                        out.differences.append(
                            f"{at}: exit status {run.returncode}, not shown on the page; "
                            f"printed:\n{run.stdout[-2000:]}"
                        )
                    out.differences += differences(cmd.expected, run.stdout, at)
                    out.ran += 1
    finally:
        os.chdir(here)
    return out


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


def _tokens(line: str) -> list[str | float]:
    """Numbers as floats, every other non-space character as itself (so that spacing, which
    moves with a number's width in a table, does not count)."""
    return [float(num) if num else char for num, char in _TOKEN.findall(line)]


def _same(shown: list[str | float], printed: list[str | float]) -> bool:
    if len(shown) != len(printed):
        return False
    for a, b in zip(shown, printed, strict=True):
        if isinstance(a, float) and isinstance(b, float):
            if not (abs(a - b) <= RTOL * max(abs(a), abs(b)) or max(abs(a), abs(b)) <= ATOL):
                return False
        elif a != b:
            return False
    return True


def same_line(shown: str, printed: str) -> bool:
    """Whether a printed line is the shown one: equal words, numbers within :data:`RTOL` (or
    both within :data:`ATOL` of 0), anything where the shown line has ``...``."""
    pieces = shown.split(ELLIPSIS)
    if len(pieces) == 1:
        return _same(_tokens(shown), _tokens(printed))
    # Each ``...`` takes any run of printed tokens: match the pieces in order, shortest first.
    target = _tokens(printed)
    parts = [_tokens(piece) for piece in pieces]

    def fits(k: int, at: int) -> bool:
        part = parts[k]
        if k == len(parts) - 1:
            return len(target) - at >= len(part) and _same(part, target[len(target) - len(part) :])
        return any(
            _same(part, target[start : start + len(part)]) and fits(k + 1, start + len(part))
            for start in range(at, len(target) - len(part) + 1)
        )

    return _same(parts[0], target[: len(parts[0])]) and fits(1, len(parts[0]))


def differences(shown: list[str], printed: str, where: str) -> list[str]:
    """Every line where ``printed`` is not what the page shows, each as a message naming the
    place on the page, the shown line and the printed one (empty when they agree)."""
    a = _trimmed(shown)
    b = _trimmed(printed.splitlines())
    out = [
        f"{where}, output line {k + 1}:\n  shown:   {s}\n  printed: {p}"
        for k, (s, p) in enumerate(zip(a, b, strict=False))
        if not same_line(s, p)
    ]
    for k in range(min(len(a), len(b)), max(len(a), len(b))):
        s, p = (a[k], "(nothing)") if k < len(a) else ("(nothing)", b[k])
        out.append(f"{where}, output line {k + 1}:\n  shown:   {s}\n  printed: {p}")
    return out


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


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
    ``cwd``), anything else in bash (:func:`run_shell`). ``stdout`` holds stdout and stderr
    merged in the order they were written (``stderr`` is empty), as a terminal shows them."""
    match = _SIMPLE.match(command)
    if not match:
        return run_shell(command, cwd)
    from margin_solver.cli import main

    printed = io.StringIO()
    # ``> /dev/null`` discards stdout only: stderr still reaches the terminal.
    out = io.StringIO() if match.group(2) else printed
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(printed):
            try:
                status = main(match.group(1).split())
            except SystemExit as exc:  # argparse's usage errors and --help
                status = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    stdout = printed.getvalue()
    if match.group(3):
        stdout += f"exit {status}\n"
        status = 0
    return subprocess.CompletedProcess(command, status, stdout, "")


def run_shell(command: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run one documented command in bash, with this interpreter's ``margin-solver`` first on
    PATH (a command ending in ``&`` runs in the background and is waited for by bash); stdout
    and stderr merged as in :func:`run_command`."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave as written
    env.pop("COLUMNS", None)
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
