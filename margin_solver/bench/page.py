"""Render the tables of ``docs/benchmarks.md`` from the results files in ``docs/results/``.

The page's tables are not typed: each sits between two markers,

.. code-block:: text

    <!-- table: NAME [rows=KEY] [where=COLUMN:VALUE] [columns=A,B,C] -->
    ...
    <!-- /table -->

and :func:`render` replaces what is between them with a markdown table built from
``docs/results/NAME.json`` (written by the measurement's ``--out``), followed by the command
that wrote the file and the line "date, commit, machine, library versions" taken from its
``meta`` block (:func:`margin_solver.bench.provenance.run_metadata`). ``rows=KEY`` picks the
list of rows (default ``rows``), ``where=`` keeps the rows whose COLUMN prints as VALUE
(several conditions joined by ``;`` must all hold, and ``V1|V2`` accepts either value; a
setting that holds spaces is written in double quotes, ``where="method:two-step GD"``), and
``columns=`` picks and orders the columns (default: the keys of the rows, in first-seen
order). A results file without that metadata is refused.

Run ``python -m margin_solver.bench.page`` from the repository root to rewrite the pages
(:data:`PAGES`: the library's claims in ``docs/benchmarks.md``, the paper's and the reply's
claims reproduced by the benchmark suite's studies in ``docs/studies.md``), or with
``--check`` to fail (exit 1) when a page differs from what its results files give.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from margin_solver.bench.provenance import LIBRARIES

#: One table's markers; ``opts`` holds the optional ``rows=``, ``where=`` and ``columns=``
#: settings, each value bare or in double quotes.
MARKER = re.compile(
    r'(?P<open><!-- table: (?P<name>[\w-]+)(?P<opts>(?: [\w-]+=(?:"[^"]*"|[^ >"]+))*) -->\n)'
    r".*?"
    r"(?P<close><!-- /table -->)",
    re.DOTALL,
)


#: The pages whose tables come from ``docs/results/``, relative to the repository root.
PAGES = (Path("docs/benchmarks.md"), Path("docs/studies.md"))


class PageError(ValueError):
    """A results file or a marker the page cannot be rendered from."""


def render(page: str, results: Path) -> str:
    """The page with every marked table rebuilt from ``results/NAME.json``.

    Parameters
    ----------
    page : str
        The text of the page.
    results : Path
        The folder of results files.

    Returns
    -------
    str
        The page, identical outside the markers.

    Raises
    ------
    PageError
        A results file is missing, is not JSON, lacks its metadata or the rows a marker names.
    """

    def table(match: re.Match[str]) -> str:
        name = match["name"]
        opts = dict(opt.split("=", 1) for opt in shlex.split(match["opts"]))
        unknown = set(opts) - {"rows", "where", "columns"}
        if unknown:
            raise PageError(f"table {name}: unknown setting(s) {sorted(unknown)}")
        path = results / f"{name}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise PageError(f"table {name}: cannot read {path.name}: {exc}") from exc
        rows = _rows(data, opts.get("rows", "rows"), name)
        for condition in opts["where"].split(";") if "where" in opts else ():
            column, _, values = condition.partition(":")
            rows = [row for row in rows if _cell(row.get(column)) in values.split("|")]
        if not rows:
            raise PageError(f"table {name}: no row meets where={opts['where']!r}")
        columns = opts["columns"].split(",") if "columns" in opts else None
        body = rows_table(rows, columns)
        return f"{match['open']}{body}\n\n{provenance(data.get('meta'), name)}\n{match['close']}"

    return MARKER.sub(table, page)


def _rows(data: Any, key: str, name: str) -> list[Mapping[str, Any]]:
    rows = data.get(key) if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise PageError(f"table {name}: no list of rows under {key!r}")
    return rows


def rows_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None) -> str:
    """Rows as a markdown table; a missing value prints as ``-``."""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """Floats to four significant digits; lists joined; ``None`` and NaN as ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("|", "\\|")


def provenance(meta: Any, name: str) -> str:
    """The command that wrote a results file and its date, commit, machine and versions.

    Raises
    ------
    PageError
        If any of those facts is missing from ``meta``.
    """
    try:
        machine, versions = meta["machine"], meta["versions"]
        facts = (
            meta["command"],
            meta["date"],
            meta["commit"],
            machine["cpu"],
            machine["cores"],
            machine["load_average"],
            versions["python"],
            *(versions[lib] for lib in LIBRARIES),
        )
    except (KeyError, TypeError) as exc:
        raise PageError(
            f"table {name}: its results file lacks the metadata of "
            "margin_solver.bench.provenance.run_metadata (date, commit, machine, versions, "
            f"command): missing {exc}"
        ) from exc
    command, date, commit, cpu, cores, load, python = facts[:7]
    libraries = ", ".join(f"{lib} {v}" for lib, v in zip(LIBRARIES, facts[7:], strict=True))
    return (
        f"`{command}`  \n"
        f"{date}, commit {commit}, {cpu} ({cores} cores, load average {load} at the start); "
        f"Python {python}, {libraries}."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the pages (or, with ``--check``, report whether they are up to date)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, nargs="+", default=list(PAGES))
    parser.add_argument("--results", type=Path, default=Path("docs/results"))
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    stale = 0
    for path in args.page:
        old = path.read_text(encoding="utf-8")
        try:
            new = render(old, args.results)
        except PageError as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
        if new == old:
            continue
        if args.check:
            print(f"{path} differs from its results files: run without --check")
            stale = 1
        else:
            path.write_text(new, encoding="utf-8")
    return stale


if __name__ == "__main__":
    sys.exit(main())
