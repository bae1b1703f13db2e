"""check_magnitude's sum-of-squares screen accepts only what the exact peak accepts: on
either side of both limits, with one outlier among small entries, with tiny entries whose
squares underflow, the verdict and the message equal those of the exact path (a Fortran-ordered
copy, which the screen does not read)."""

import numpy as np
import pytest

from margin_solver.core.validation import (
    MAX_MAGNITUDE,
    MIN_MAGNITUDE,
    InvalidInputError,
    check_magnitude,
)


def _verdict(arr, **limits):
    try:
        check_magnitude(arr, "X", **limits)
    except InvalidInputError as err:
        return str(err)
    return "ok"


def _outlier(base, peak):
    arr = np.full((7, 3, 11), base)
    arr[4, 1, 5] = -peak
    return arr


CASES = {
    "ones": np.ones((5, 2, 9)),
    "zeros": np.zeros((5, 2, 9)),
    **{
        f"scale {c:g}": c * np.random.default_rng(0).standard_normal((5, 2, 9))
        for c in (
            1e-160,
            1e-101,
            MIN_MAGNITUDE,
            2e-100,
            1e-99,
            1e98,
            1e99,
            MAX_MAGNITUDE,
            1.01e100,
            1e101,
            1e160,
            1e200,
        )
    },
    "outlier above": _outlier(1.0, 1.5 * MAX_MAGNITUDE),
    "outlier at the limit": _outlier(1.0, MAX_MAGNITUDE),
    "one entry in range among tiny": _outlier(1e-120, 1e50),
    "lone tiny entry": _outlier(0.0, 0.5 * MIN_MAGNITUDE),
    "subnormal squares": _outlier(1e-170, 2e-100),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("limits", [{}, {"low": 0.0, "high": 1e150}])
def test_screen_agrees_with_the_exact_peak(name, limits):
    arr = CASES[name]
    exact = _verdict(np.asfortranarray(arr), **limits)
    assert not np.asfortranarray(arr).flags.c_contiguous
    assert _verdict(arr, **limits) == exact


def test_rejections_keep_their_message():
    assert _verdict(CASES["scale 1e+101"]).startswith("X has largest |entry| ")
    assert "outside [1e-100, 1e+100]" in _verdict(CASES["lone tiny entry"])


def test_screen_vouches_for_ordinary_data_and_not_beyond():
    from margin_solver.core.validation import _sum_of_squares_vouches as vouches

    lim = (MIN_MAGNITUDE, MAX_MAGNITUDE)
    assert vouches(CASES["ones"], *lim) and vouches(CASES["scale 1e+98"], *lim)
    assert vouches(CASES["one entry in range among tiny"], *lim)
    for name in ("zeros", "scale 1e-160", "scale 1e-99", "scale 1e+200", "outlier at the limit"):
        assert not vouches(CASES[name], *lim), name
