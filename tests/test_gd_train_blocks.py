"""gradient_descent(train=..., v0=...) (issue 14, part 5): frozen blocks stay exactly put."""

import numpy as np
import pytest

from margin_solver.core.data import PaperDistribution
from margin_solver.core.validation import InvalidInputError
from margin_solver.gd.endpoints import gradient_descent


@pytest.fixture(scope="module")
def train():
    return PaperDistribution(d=80, T=3, snr=0.5, eta=0.1).sample(10, seed=1)


@pytest.mark.parametrize("form", ["dense", "kernel"])
@pytest.mark.parametrize("decay", [0.0, 1e-2])
def test_p_only_leaves_v_exactly_at_v0(train, form, decay):
    v0 = np.random.default_rng(2).normal(size=train.d)
    res = gradient_descent(
        train, schedule="constant", steps=30, train=("p",), v0=v0, form=form, weight_decay=decay
    )
    assert np.array_equal(res.v, v0)
    assert np.linalg.norm(res.p) > 0  # p did move
    assert res.trajectory["loss"][-1] < res.trajectory["loss"][0]


@pytest.mark.parametrize("form", ["dense", "kernel"])
def test_v_only_leaves_p_fixed(train, form):
    zero = gradient_descent(train, schedule="constant", steps=30, train=("v",), form=form)
    assert not zero.p.any() and np.linalg.norm(zero.v) > 0
    short = gradient_descent(
        train, schedule="constant", steps=1, train=("v",), init="random", seed=5, form=form
    )
    long = gradient_descent(
        train, schedule="constant", steps=30, train=("v",), init="random", seed=5, form=form
    )
    assert np.array_equal(short.p, long.p) and np.linalg.norm(short.p) > 0
    assert not np.allclose(short.v, long.v)


def test_both_blocks_is_the_default(train):
    a = gradient_descent(train, schedule="constant", steps=10)
    b = gradient_descent(train, schedule="constant", steps=10, train=("p", "v"))
    assert np.array_equal(a.v, b.v) and np.array_equal(a.p, b.p)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"train": ()}, "train"),
        ({"train": ("w",)}, "train"),
        ({"v0": np.ones(3)}, "v0"),
        ({"v0": np.full(80, np.nan)}, "v0"),
    ],
)
def test_bad_train_or_v0(train, kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        gradient_descent(train, schedule="constant", steps=2, **kwargs)


@pytest.mark.parametrize("form", ["dense", "kernel"])
def test_frozen_value_heads_with_several_heads(train, form):
    # the mask covers all H value rows; v0 gives one row per head
    v0 = np.random.default_rng(3).normal(size=(2, train.d))
    res = gradient_descent(
        train,
        schedule="constant",
        steps=20,
        train=("p",),
        v0=v0,
        heads=2,
        init="random",
        seed=4,
        form=form,
    )
    assert np.array_equal(res.v, v0)
    assert np.linalg.norm(res.p) > 0
    with pytest.raises(InvalidInputError, match="shape"):
        gradient_descent(train, steps=2, train=("p",), v0=v0[0], heads=2)
