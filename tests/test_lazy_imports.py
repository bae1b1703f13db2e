"""Each CLI verb imports what it runs: listing the verbs or running ``check`` / ``gd`` loads
neither the min-norm solver nor scipy.optimize; package names and submodules still resolve."""

import subprocess
import sys

import pytest

from margin_solver.core.data import PaperDistribution


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")[-2]
    return set(out.split())


HEAVY = {
    "scipy.optimize",
    "margin_solver.minnorm.solve",
    "margin_solver.bounds.lower",
    "cvxpy",
    "matplotlib",
    "joblib",
}


def test_building_the_parser_loads_no_solver():
    loaded = _loaded_after("from margin_solver.cli import build_parser\nbuild_parser()")
    assert not HEAVY & loaded


@pytest.mark.parametrize("verb", ["check", "gd"])
def test_check_and_gd_load_no_min_norm_solver(tmp_path, verb):
    path = tmp_path / "train.npz"
    PaperDistribution(d=50, snr=0.5, eta=0.1).sample(10, seed=0).save(path)
    code = (
        "import contextlib, io\nfrom margin_solver.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main([{verb!r}, {str(path)!r}])"
    )
    loaded = _loaded_after(code)
    assert f"margin_solver.{'theory' if verb == 'check' else 'gd'}" in loaded
    assert not HEAVY & loaded


def test_package_names_and_submodules_resolve_on_first_use():
    loaded = _loaded_after(
        "import margin_solver as m\n"
        "assert m.solve_min_norm.__module__ == 'margin_solver.minnorm.solve'\n"
        "assert m.vstep.solve_vstep is m.solve_vstep\n"
        "assert callable(m.compare)"
    )
    assert "margin_solver.minnorm.solve" in loaded
    import margin_solver

    with pytest.raises(AttributeError):
        margin_solver.no_such_name  # noqa: B018
