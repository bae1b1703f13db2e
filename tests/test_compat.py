"""The module paths before the subpackages still work, each with a DeprecationWarning."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from margin_solver import _compat


def _run(code: str) -> str:
    """``code`` in a fresh interpreter (an old path imports once per process), stderr too."""
    out = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout + out.stderr


def test_every_old_module_path_is_the_new_module():
    checks = "".join(
        f"import margin_solver.{new} as new\n"
        f"import margin_solver.{old} as old\n"
        f"print('{old}', old is new, old.__spec__.name)\n"
        "importlib.reload(old)\n"
        for old, new in sorted(_compat.MOVED.items())
    )
    out = _run("import importlib\n" + checks)
    for old, new in _compat.MOVED.items():
        assert f"{old} True margin_solver.{new}" in out
        assert f"margin_solver.{old} moved to margin_solver.{new}" in out


@pytest.mark.parametrize(
    ("package", "module", "name"),
    [
        ("bounds", "lower", "global_lower_bound"),
        ("minnorm", "solve", "solve_min_norm"),
        ("gd", "endpoints", "gradient_descent"),
    ],
)
def test_old_flat_modules_now_packages_forward_their_names(package, module, name):
    with pytest.warns(DeprecationWarning, match=f"moved to margin_solver.{package}.{module}"):
        old = getattr(importlib.import_module(f"margin_solver.{package}"), name)
    assert old is getattr(importlib.import_module(f"margin_solver.{package}.{module}"), name)


def test_a_submodule_of_such_a_package_imports_without_a_warning():
    out = _run("from margin_solver.bounds import linbound\nprint(linbound.__name__)")
    assert "margin_solver.bounds.linbound" in out
    assert "Deprecation" not in out


def test_unknown_names_still_raise_attribute_error():
    import margin_solver.bounds

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        margin_solver.bounds.no_such_name  # noqa: B018
