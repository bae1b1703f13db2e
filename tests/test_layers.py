"""The package's layers, read from the real import graph (``ast``, no import executed).

The library (``margin_solver/*.py``) never imports the experiment framework
(``margin_solver.bench``) or the command line (``margin_solver.cli``); the library's import
graph has no cycles; ``docs/architecture.md`` states every module's imports exactly; and
``import margin_solver`` loads none of the heavy optional stacks.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "margin_solver"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
FRAMEWORK = ("margin_solver.bench", "margin_solver.cli", "margin_solver.__main__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Package modules that ``path`` imports (anywhere in the file, or at its top level only).

    ``from margin_solver.x import name`` counts as ``margin_solver.x.name`` when that is a
    module (``from margin_solver import conic``), otherwise as ``margin_solver.x``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "margin_solver"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "margin_solver":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
    return found - {_module_name(path)}


def _is_framework(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRAMEWORK)


LIBRARY = sorted(m for m in MODULES if not _is_framework(m))


def test_the_graph_sees_lazy_and_from_package_imports():
    """The parser must see a function-level import and ``from margin_solver import module``:
    vstep imports conic lazily that way, so missing it would hide an arrow."""
    assert "margin_solver.svm.conic" in _imports(MODULES["margin_solver.svm.vstep"])
    assert "margin_solver.svm.conic" not in _imports(MODULES["margin_solver.svm.vstep"], True)


@pytest.mark.parametrize("module", LIBRARY)
def test_library_never_imports_framework_or_cli(module):
    bad = sorted(d for d in _imports(MODULES[module]) if _is_framework(d))
    assert not bad, f"library module {module} imports {bad}"


def test_library_import_graph_has_no_cycles():
    graph = {m: _imports(MODULES[m]) & set(LIBRARY) for m in LIBRARY}
    # The package face imports the library; the library never imports the face.
    assert not [m for m in LIBRARY if "margin_solver" in graph[m]]
    graph.pop("margin_solver")
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node] - {"margin_solver"}):
            if state.get(dep) == 1:
                cycle = path[path.index(dep) :] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def _short(name: str) -> str:
    return "__init__" if name == "margin_solver" else name.removeprefix("margin_solver.")


def _stated_graph() -> dict[str, set[str]]:
    """The ``imports`` block of docs/architecture.md: ``module -> dep dep ...`` per line."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"```text imports\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md lost its ```text imports block"
    stated: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        if line.strip():
            module, _, deps = line.partition("->")
            stated[module.strip()] = set(deps.split())
    return stated


def test_architecture_doc_states_the_real_import_graph():
    real = {_short(m): {_short(d) for d in _imports(p)} for m, p in MODULES.items()}
    stated = _stated_graph()
    assert sorted(stated) == sorted(real), "modules missing from / unknown to the doc"
    wrong = {
        m: f"doc says {sorted(stated[m])}, code has {sorted(real[m])}"
        for m in real
        if stated[m] != real[m]
    }
    assert not wrong, "\n" + "\n".join(
        f"{m}: {why}\n  fix: {m} -> {' '.join(sorted(real[m]))}" for m, why in wrong.items()
    )


def test_import_margin_solver_loads_no_heavy_optional_stack():
    """matplotlib, joblib, Dask and cvxpy load only when the framework or a conic engine runs."""
    code = (
        "import sys, margin_solver\n"
        "heavy = ('matplotlib', 'joblib', 'dask', 'distributed', 'cvxpy', 'margin_solver.bench')\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.split() == []


@pytest.mark.parametrize("verb", ["solve", "check", "gd"])
def test_library_verbs_do_not_load_the_framework(verb):
    """``margin-solver solve|check|gd --help`` builds the parser without the framework."""
    code = (
        "import sys\n"
        "from margin_solver.cli import main\n"
        "try:\n"
        f"    main([{verb!r}, '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('matplotlib', 'joblib', 'dask', 'distributed', 'margin_solver.bench')\n"
        "print('LOADED', ' '.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = out.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == [], f"margin-solver {verb} --help loaded {loaded}"
    assert "usage: margin-solver " + verb in out.stdout
