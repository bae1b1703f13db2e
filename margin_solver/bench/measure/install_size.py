"""Installed size of margin-solver's dependencies in the running environment.

Sums the bytes of the files each distribution installs (``importlib.metadata``), follows
each declared dependency's own requirements, and counts a shared distribution once, in the
order ``pyproject.toml`` declares the dependencies. Run inside the environment:
``.venv/bin/python -m margin_solver.bench.measure.install_size`` (docs/usage.md, "Install size").
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
from collections.abc import Sequence

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.fileio import write_json

MiB = 2**20


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(
    dist: md.Distribution, extras: tuple[str, ...] = ()
) -> list[tuple[str, tuple[str, ...]]]:
    """``(name, its extras)`` of each requirement of ``dist`` with ``extras`` selected."""
    out = []
    for req in dist.requires or []:
        marker = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if marker and marker.group(1) not in extras:
            continue
        name, wanted = re.match(r"([A-Za-z0-9_.\-]+)\s*(?:\[([^\]]*)\])?", req).groups()
        out.append((_norm(name), tuple(e.strip() for e in (wanted or "").split(",") if e.strip())))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Print what each dependency and each extra adds; ``--out FILE.json``: also as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    rows: list[dict] = []

    def report(what: str, new: set[str]) -> None:
        mib = sum(sizes[n] for n in new) / MiB
        rows.append({"dependency": what, "adds MiB": round(mib, 1), "distributions": len(new)})
        print(f"{what:16s} {mib:10.1f}  {', '.join(sorted(new))}")

    sizes, dists = {}, {}
    for dist in md.distributions():
        name = _norm(dist.metadata["Name"])
        dists[name] = dist
        sizes[name] = sum(
            os.path.getsize(f.locate()) for f in dist.files or [] if os.path.exists(f.locate())
        )

    def closure(req: tuple[str, tuple[str, ...]], seen: set[str]) -> set[str]:
        name, extras = req
        if name in sizes:
            first = name not in seen
            seen.add(name)
            for sub in _requirements(dists[name], extras) if (first or extras) else []:
                closure(sub, seen)
        return seen

    me = md.distribution("margin-solver")
    seen: set[str] = set()
    print("dependency        adds (MiB)  distributions")
    for dep in _requirements(me):
        new = closure(dep, set()) - seen
        seen |= new
        report(dep[0], new)
    report("base install", seen)
    extras = md.metadata("margin-solver").get_all("Provides-Extra") or []
    for extra in extras:
        wanted = set()
        for dep in set(_requirements(me, (extra,))) - set(_requirements(me)):
            closure(dep, wanted)
        report(f"extra {extra}", wanted - seen)
    if args.out:
        write_json(args.out, {"meta": meta, "rows": rows})


if __name__ == "__main__":
    main()
