"""Bad input that gave a traceback, and the memory refusals.

Every such input gives one line on stderr and exit status 2 at the command line
(those cases are in the corpus of tests/test_cli_hardening.py, which checks the status of every
case) and an InvalidInputError in the API; a call that cannot fit in memory is refused before
it allocates, naming the size and the way around it. Memory is never really exhausted here:
the available-memory figure is monkeypatched.
"""

import math
import re
import tracemalloc

import numpy as np
import pytest
import test_cli_hardening
from test_cli_hardening import CASES as CLI_CASES

from margin_solver.bounds.lower import global_lower_bound
from margin_solver.cli import EXIT_INPUT_ERROR, main
from margin_solver.core import validation
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.kernel import TokenGram
from margin_solver.core.validation import InsufficientMemoryError, InvalidInputError
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.minnorm.multihead import solve_min_norm_heads
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import check_conditions, conflicting_pairs

GOOD = PaperDistribution(d=6, T=2, snr=0.8, eta=0.1).sample(6, seed=0)

# The corpus's input files: tests/test_cli_hardening.py's module-scoped fixture, which pytest
# finds under this name here; the tests below take it as their ``files`` argument.
files = test_cli_hardening.files


def _run_case(case, files, capsys):
    """Run one case of the command-line corpus (tests/test_cli_hardening.py) with ``files``."""
    template, pattern = CLI_CASES[case]
    argv = [re.sub(r"\{(\w+)\}", lambda m: str(files.get(m[1], m[0])), a) for a in template]
    assert main(argv) == EXIT_INPUT_ERROR
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.search(pattern, lines[0]), lines


def test_refused_sweeps_and_benches_write_nothing(files, tmp_path, capsys):
    """Refused before anything is created: no log, no sidecar, no bench folder."""
    for case in (
        "sweep snr 1e300",
        "sweep snr overflowing rho",
        "sweep scheduler scheme",
        "sweep scheduler nothing listening",
        "bench scheduler nothing listening",
        "bench mnist missing",
        "sweep out json",
    ):
        _run_case(case, {**files, "dir": tmp_path}, capsys)
    assert not list(tmp_path.iterdir())


# --- the API: the same inputs are InvalidInputError ----------------------------------------------
@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: PaperDistribution(d=1, signal="random", snr=1.0), r"signal='random' needs d >= 2"),
        (lambda: PaperDistribution(d=5, snr=1e300), r"signal norm rho = 2.24e\+300 exceeds"),
        (lambda: PaperDistribution(d=5, rho=1e150), r"signal norm rho = 1e\+150 exceeds"),
        (lambda: solve_min_norm(GOOD, R=1e300), r"outside \[1e-150, 1e\+150\]"),
        (lambda: solve_min_norm(GOOD, R=1e-200), r"outside \[1e-150, 1e\+150\]"),
        # issue 43: an int beyond float64 raised OverflowError ("int too large to convert")
        (lambda: solve_min_norm(GOOD, R=10**400), r"R = 1000.*\(401 digits\) is too large"),
        (lambda: solve_min_norm(GOOD, R=1.0, time_limit=10**5000), r"\(5001 digits\)"),
        (lambda: gradient_descent(GOOD, R=-(10**400)), r"too large for a float64"),
        # the finite-R bound divided by R**2 (ZeroDivisionError) or overflowed (OverflowError)
        *(
            (lambda R=R: global_lower_bound(GOOD.X, GOOD.y, R=R), r"outside \[1e-150, 1e\+150\]")
            for R in (5e-324, 1e-200, 1e200, 1.7e308)
        ),
    ],
)
def test_bad_parameters_raise_invalid_input(call, pattern):
    with pytest.raises(InvalidInputError, match=pattern):
        call()


# 10**70: an int the issue 43 fuzz run named ("int too large"); solvable on 2755c10 already
@pytest.mark.parametrize("R", [1e-150, 1e150, 10**70])
def test_the_radius_range_is_solvable_at_both_ends(R):
    result = solve_min_norm(GOOD, R=R, n_random_starts=0)
    assert math.isfinite(result.norm) and result.p_norm <= R * (1 + 1e-9)


@pytest.mark.parametrize("snr", ["high", None, [1.0], True, 10**400])
def test_printing_a_dataset_with_a_non_numeric_snr(snr):
    ds = Dataset(GOOD.X, GOOD.y, params={"snr": snr, "eta": "low"})
    assert repr(ds) == "Dataset(n=6, T=2, d=6)"
    assert ds.snr is None and ds.kappa is None and ds.eta is None


def test_a_numeric_snr_still_prints():
    ds = Dataset(GOOD.X, GOOD.y, params={"snr": 0.5})
    assert repr(ds) == "Dataset(n=6, T=2, d=6, snr=0.5, kappa=1.5)"


# --- memory: announced, refused before allocating, linear where it can be ----------------------
def _fake_available(monkeypatch, nbytes):
    monkeypatch.setattr(validation, "available_memory", lambda: nbytes)


def test_token_gram_beyond_available_memory_is_refused_before_allocating(monkeypatch):
    """The issue's n T = 50,000: an 18.6 GiB Gram matrix (plus its working copy)."""
    _fake_available(monkeypatch, 8 * 2**30)
    X = np.broadcast_to(np.ones((1, 1, 1)), (25_000, 2, 1))  # no memory of its own
    tracemalloc.start()
    try:
        with pytest.raises(
            InsufficientMemoryError,
            match=r"50000 x 50000.* needs 37\.3 GiB but only "
            r"8\.0 GiB .*fewer samples or fewer tokens",
        ):
            TokenGram(X)
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "call",
    [
        lambda: solve_min_norm_heads(GOOD, R=1.0, heads=10**6),
        lambda: gradient_descent(GOOD, heads=10**6),
        lambda: gradient_descent(GOOD, heads=10**6, init="random", form="kernel"),
    ],
    ids=["min-norm", "gd", "gd kernel random"],
)
def test_a_million_heads_beyond_available_memory_are_refused_before_allocating(monkeypatch, call):
    """Issue 43: ``heads=10**6`` hung; with 1 GiB available it is refused before anything of
    the heads' size exists (a state of 2 x 10**6 rows, the kernel form's Gram of the basis
    with 2 x 10**6 random vectors)."""
    _fake_available(monkeypatch, 2**30)
    tracemalloc.start()
    try:
        with pytest.raises(InsufficientMemoryError, match=r"1000000 heads .*use fewer heads"):
            call()
        assert tracemalloc.get_traced_memory()[1] < 64 * 2**20
    finally:
        tracemalloc.stop()


def test_insufficient_memory_is_also_a_memory_error():
    assert issubclass(InsufficientMemoryError, MemoryError)
    assert issubclass(InsufficientMemoryError, InvalidInputError)


def test_solve_too_big_for_memory_is_one_line_and_exit_2(monkeypatch, files, capsys):
    _fake_available(monkeypatch, 2**11)  # the 12 x 12 Gram of GOOD and its copy need 2304 B
    assert main(["solve", str(files["good"]), "--R", "1"]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert (
        "token Gram matrix (n T x n T = 12 x 12, float64) with one working copy needs "
        "2.2 KiB but only 2.0 KiB of memory is available; the min-norm solvers" in err[0]
    )


def test_solve_that_fits_is_not_refused(monkeypatch, files, capsys):
    _fake_available(monkeypatch, 2**20)
    assert main(["solve", str(files["good"]), "--R", "1", "--no-progress"]) == 0


def test_check_noise_gram_beyond_available_memory_is_refused(monkeypatch, files, capsys):
    _fake_available(monkeypatch, 2**9)  # the 6 x 6 noise Gram and two temporaries need 864 B
    assert main(["check", str(files["good"])]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err.strip()
    assert "token Gram matrix" in err and "max_tokens" in err


def test_large_allocations_are_announced(caplog):
    with caplog.at_level("INFO", logger="margin_solver"):
        validation.check_memory(validation.ANNOUNCE_BYTES, "a test matrix", "none")
    assert "allocating 256.0 MiB for a test matrix" in caplog.text


def test_available_memory_reads_a_positive_figure():
    assert validation.available_memory() > 0


def test_conflicting_pairs_are_linear_in_n():
    """One repeated token with flipped labels: every pair listed was n^2 / 4 * eta (56 million
    pairs at n = 25,000: the 11.4 GB of the issue). Every conflicting sample is still named."""
    n = 3000
    X = np.ones((n, 1, 3))
    y = np.where(np.arange(n) % 10 == 0, -1, 1)
    pairs = conflicting_pairs(X, y)
    assert len(pairs) == n - 1
    assert {i for pair in pairs for i in pair} == set(range(n))
    assert all(y[i] != y[j] and i < j for i, j in pairs)


def test_check_memory_grows_linearly_in_n():
    peaks = []
    for n in (1000, 4000):
        ds = PaperDistribution(d=20, T=1, snr=0.5, eta=0.1, signal="antipodal").sample(n, seed=0)
        tracemalloc.start()
        try:
            check_conditions(ds)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert peaks[1] < 6 * peaks[0]  # quadratic growth would be 16x


def test_an_unforeseen_memory_error_is_still_one_line_and_exit_2(monkeypatch, files, capsys):
    """The safety net behind the checks: a bare MemoryError from an allocation."""
    import margin_solver.theory

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 11.4 GiB for an array")

    # the verb imports check_conditions when it runs, so the package attribute is the one used
    monkeypatch.setattr(margin_solver.theory, "check_conditions", exhausted)
    assert main(["check", str(files["good"])]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "margin-solver check: error: out of memory (Unable to allocate 11.4 GiB for an "
        "array); use a smaller input"
    ]


def test_kappa_of_an_extreme_snr_is_inf_not_an_overflow_error():
    """``snr**2`` raised OverflowError for snr above 1.3e154 (the sweep's --snr 1e300 crash)."""
    assert Dataset(GOOD.X, GOOD.y, params={"snr": 1e200}).kappa == math.inf
    assert PaperDistribution(d=5, rho=1e100, sigma=1e-300).kappa(3) == math.inf
    assert Dataset(GOOD.X, GOOD.y, params={"snr": 0.3}).kappa == 6 * 0.3**2  # unchanged
