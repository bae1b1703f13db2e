"""The paper's distribution, the Dataset container, its file format and input validation."""

import json
import re

import numpy as np
import pytest

from margin_solver.core.data import Dataset, PaperDistribution, load_dataset
from margin_solver.core.validation import InvalidInputError, check_positive


def test_sample_shapes_labels_and_parameters():
    dist = PaperDistribution(d=300, T=3, snr=0.2, eta=0.25, sigma=2.0)
    ds = dist.sample(400, seed=1)
    assert ds.X.shape == (400, 3, 300)
    assert set(np.unique(ds.y)) <= {-1, 1}
    assert ds.params["rho"] == pytest.approx(0.2 * 2.0 * np.sqrt(300))
    assert ds.kappa == pytest.approx(400 * 0.04)
    # label noise rate near eta, flips exactly where y differs from the clean label
    assert abs(ds.flipped.mean() - 0.25) < 0.06
    np.testing.assert_array_equal(ds.flipped, ds.y != ds.clean_y)


def test_signal_token_and_projected_noise():
    dist = PaperDistribution(d=500, T=4, rho=3.0, eta=0.1)
    ds = dist.sample(50, seed=0)
    mu = dist.signal_vectors()
    signal = ds.X[np.arange(50), ds.signal_index]
    np.testing.assert_array_equal(signal, mu[(ds.clean_y < 0).astype(int)])
    noise = ds.X[:, 1:, :]
    np.testing.assert_array_equal(noise[:, :, :2], 0.0)  # projected off span(e1, e2)
    # noise coordinates are N(0, sigma^2)
    assert noise[:, :, 2:].std() == pytest.approx(1.0, rel=0.02)


@pytest.mark.parametrize("signal", ["orthogonal", "antipodal", "random"])
def test_signal_kinds_have_norm_rho_and_noise_orthogonal_to_them(signal):
    dist = PaperDistribution(d=64, T=2, rho=2.5, signal=signal, signal_position="random")
    mu = dist.signal_vectors()
    np.testing.assert_allclose(np.linalg.norm(mu, axis=1), 2.5)
    if signal == "antipodal":
        np.testing.assert_allclose(mu[1], -mu[0])
    else:
        assert abs(mu[0] @ mu[1]) < 1e-12
    ds = dist.sample(30, seed=3)
    noise_mask = np.ones((30, 2), bool)
    noise_mask[np.arange(30), ds.signal_index] = False
    noise = ds.X[noise_mask]
    np.testing.assert_allclose(noise @ mu.T, 0.0, atol=1e-10)


def test_isotropic_noise_is_not_projected():
    ds = PaperDistribution(d=50, T=2, rho=1.0, noise="isotropic").sample(20, seed=0)
    assert np.all(ds.X[:, 1, :2] != 0.0)


def test_random_signal_position_is_recorded_and_varies():
    ds = PaperDistribution(d=20, T=5, rho=4.0, signal_position="random").sample(200, seed=2)
    assert set(np.unique(ds.signal_index)) == set(range(5))
    norms = np.linalg.norm(ds.X[np.arange(200), ds.signal_index], axis=1)
    np.testing.assert_allclose(norms, 4.0)


def test_seeding_is_reproducible_and_train_test_streams_differ():
    dist = PaperDistribution(d=40, T=2, snr=0.5)
    a, b = dist.sample(10, seed=7), dist.sample(10, seed=7)
    np.testing.assert_array_equal(a.X, b.X)
    train, test = dist.sample_train_test(10, 10, seed=7)
    assert not np.array_equal(train.X, test.X)
    train2, _ = dist.sample_train_test(10, 99, seed=7)
    np.testing.assert_array_equal(train.X, train2.X)  # test size does not perturb train


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d": 0, "snr": 1.0}, "d must be an integer >= 1"),
        ({"d": 10, "T": 0, "snr": 1.0}, "T must be an integer >= 1"),
        ({"d": 10}, "exactly one of rho and snr"),
        ({"d": 10, "snr": 1.0, "rho": 1.0}, "exactly one of rho and snr"),
        ({"d": 10, "snr": -1.0}, "snr must be a finite number >= 0"),
        ({"d": 10, "snr": 1.0, "eta": 0.5}, r"eta must lie in \[0, 0.5\)"),
        ({"d": 10, "snr": 1.0, "sigma": 0.0}, "sigma must be a positive finite number"),
        ({"d": 10, "snr": 1.0, "signal": "xor"}, "signal must be one of"),
        ({"d": 1, "snr": 1.0}, "needs d >= 2"),
    ],
)
def test_distribution_validation(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        PaperDistribution(**kwargs)


def test_save_load_roundtrip(tmp_path):
    ds = PaperDistribution(d=30, T=3, snr=0.4, eta=0.2, signal_position="random").sample(12, seed=5)
    path = ds.save(tmp_path / "sub" / "train")
    assert path.name == "train.npz"
    back = load_dataset(path)
    np.testing.assert_array_equal(back.X, ds.X)
    np.testing.assert_array_equal(back.y, ds.y)
    np.testing.assert_array_equal(back.clean_y, ds.clean_y)
    np.testing.assert_array_equal(back.signal_index, ds.signal_index)
    assert back.params == json.loads(json.dumps(ds.params))
    assert back.snr == pytest.approx(0.4)
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]  # no temporary left behind


def test_user_arrays_load_through_the_same_validation(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mine.npz", X=rng.standard_normal((6, 2, 4)), y=np.array([1, -1] * 3))
    ds = Dataset.load(tmp_path / "mine.npz")
    assert (ds.n, ds.T, ds.d) == (6, 2, 4)
    assert ds.clean_y is None and ds.flipped is None and ds.snr is None and ds.params == {}


GOOD_X = np.ones((4, 2, 3))
GOOD_Y = np.array([1, -1, 1, -1])


@pytest.mark.parametrize(
    "X, y, match",
    [
        (
            np.ones((4, 3)),
            GOOD_Y,
            r"Expected X of shape \(n_samples, n_tokens, n_features\), got array of shape \(4, 3\)",
        ),
        (np.ones((4, 0, 3)), GOOD_Y, r"at least one token per sample \(T >= 1\)"),
        (np.ones((4, 2, 0)), GOOD_Y, r"at least one feature"),
        (np.full((4, 2, 3), np.nan), GOOD_Y, "X contains NaN"),
        (np.full((4, 2, 3), np.inf), GOOD_Y, "X contains inf"),
        (
            GOOD_X,
            np.array([0, 1, 2, 1]),
            r"y must hold two labels \(any two distinct values\), got 3: \[0, 1, 2\]\.",
        ),
        (GOOD_X, np.array([1, 2, 1, -1]), r"y must hold two labels .* got 3: \[-1, 1, 2\]"),
        (GOOD_X, np.array([1, -1, 1]), "y has 3 labels but X has 4 samples"),
        (GOOD_X, np.array([1, -1, np.nan, 1]), "y contains NaN"),
        (np.ones((1, 2, 3)), np.array([1]), "at least 2 samples"),
        (np.array([["a"]]), GOOD_Y, "X must be a numeric array"),
    ],
)
def test_dataset_validation_errors(X, y, match):
    with pytest.raises(InvalidInputError, match=match):
        Dataset(X, y)


def test_dataset_metadata_validation():
    with pytest.raises(InvalidInputError, match=r"signal_index must lie in \[0, T\)"):
        Dataset(GOOD_X, GOOD_Y, signal_index=[0, 1, 2, 0])
    with pytest.raises(InvalidInputError, match=r"Expected signal_index of shape \(4,\)"):
        Dataset(GOOD_X, GOOD_Y, signal_index=[0, 1])
    with pytest.raises(InvalidInputError, match=r"clean_y holds \[0\], not one of the labels"):
        Dataset(GOOD_X, GOOD_Y, clean_y=[0, 1, 0, 1])


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(InvalidInputError, match="No dataset file"):
        load_dataset(tmp_path / "nope.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive")
    with pytest.raises(InvalidInputError, match=re.escape("junk.npz is not an .npz archive")):
        load_dataset(tmp_path / "junk.npz")
    np.savez(tmp_path / "noy.npz", X=GOOD_X)
    with pytest.raises(InvalidInputError, match=r"lacks the array\(s\) \['y'\]"):
        load_dataset(tmp_path / "noy.npz")
    np.savez(tmp_path / "obj.npz", X=np.array([object(), 1], dtype=object), y=GOOD_Y)
    with pytest.raises(InvalidInputError, match=re.escape("Cannot read obj.npz")):
        load_dataset(tmp_path / "obj.npz")
    np.savez(tmp_path / "badlabels.npz", X=GOOD_X, y=np.array([0, 1, 2, 1]))
    with pytest.raises(InvalidInputError, match=r"badlabels.npz: y must hold two labels"):
        load_dataset(tmp_path / "badlabels.npz")
    np.savez(tmp_path / "badparams.npz", X=GOOD_X, y=GOOD_Y, params_json=np.array("{oops"))
    with pytest.raises(InvalidInputError, match="params_json is not valid JSON"):
        load_dataset(tmp_path / "badparams.npz")


@pytest.mark.parametrize("bad", [0, -1.0, np.nan, np.inf, "abc", None])
def test_check_positive_rejects(bad):
    with pytest.raises(InvalidInputError, match="R must be a positive"):
        check_positive(bad, "R")
