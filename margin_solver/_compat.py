"""The module paths of releases before the subpackages, kept working with a warning.

``import margin_solver.vstep`` (a flat module until 0.1) now loads
``margin_solver.svm.vstep`` and warns once with :class:`DeprecationWarning`; the public names
of ``margin_solver`` itself never moved. ``bounds``, ``minnorm`` and ``gd`` are packages now:
their old names are served by the package's ``__getattr__`` (:func:`forward`).
``margin_solver.compare`` is not aliased: as a module it would replace the function
``margin_solver.compare`` on the package.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: Old flat module -> its module now (relative to ``margin_solver``).
MOVED = {
    "validation": "core.validation",
    "results": "core.results",
    "fileio": "core.fileio",
    "blas": "core.blas",
    "progress": "core.progress",
    "kernel": "core.kernel",
    "data": "core.data",
    "ooc": "core.ooc",
    "ondisk": "core.ondisk",
    "generate": "core.generate",
    "vstep": "svm.vstep",
    "conic": "svm.conic",
    "selection": "svm.selection",
    "alternating": "descent.alternating",
    "sqp": "descent.sqp",
    "linbound": "bounds.linbound",
    "rbounds": "bounds.rbounds",
    "sdpbound": "bounds.sdpbound",
    "realisable": "bounds.realisable",
    "search": "minnorm.search",
    "multihead": "minnorm.multihead",
    "regpath": "gd.regpath",
    "metrics": "analysis.metrics",
    "heads": "analysis.heads",
    "solutions": "analysis.solutions",
    "estimation": "analysis.estimation",
}


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"margin_solver.{old} moved to margin_solver.{new}; import it from there "
        "(the old path goes in a later release)",
        DeprecationWarning,
        stacklevel=4,
    )


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``margin_solver.<old>`` and hands back the module it became (the same object,
    so that a patch through either name reaches the one module)."""

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, fullname, path=None, target=None):
        old = fullname.removeprefix("margin_solver.")
        if fullname.startswith("margin_solver.") and old in MOVED:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec) -> ModuleType:
        old = spec.name.removeprefix("margin_solver.")
        _warn(old, MOVED[old])
        module = importlib.import_module(f"margin_solver.{MOVED[old]}")
        self._own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the module ran under its own name; the import system set ``__spec__`` to the
        # alias's: give it back its own, which ``importlib.reload`` and pickling read
        module.__spec__ = self._own_specs.pop(module.__name__)


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())


def forward(package: str, module: str, name: str) -> object:
    """``margin_solver.<package>.<name>`` of the flat module ``margin_solver.<package>`` of old,
    now in ``margin_solver.<package>.<module>``: the attribute, with a warning."""
    if name.startswith("__") or importlib.util.find_spec(f"margin_solver.{package}.{name}"):
        # a submodule: ``from margin_solver.bounds import linbound`` must import it
        raise AttributeError(f"module 'margin_solver.{package}' has no attribute {name!r}")
    target = importlib.import_module(f"margin_solver.{package}.{module}")
    if not hasattr(target, name):
        raise AttributeError(f"module 'margin_solver.{package}' has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{package}.{module}.{name}")
    return getattr(target, name)
