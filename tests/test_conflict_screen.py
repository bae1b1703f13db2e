"""kernel.conflicting_pairs: the token-Gram screen (issue 12, part 4: with the Gram matrix
given, only the samples it cannot tell apart from a sample of the other label are read, and the
pairs found are exactly those of reading every sample), and its integer keys (issue 44: the
same pairs as the sha256 of every token's bytes it replaced)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.generate import save_on_disk
from margin_solver.core.kernel import TokenGram, _twin_candidates, conflicting_pairs
from margin_solver.core.results import ConvergenceWarning
from margin_solver.minnorm.solve import solve_min_norm


def _screened(X, y):
    H = TokenGram(X).H
    return conflicting_pairs(X, y, H), _twin_candidates(H, y, X.shape)


def test_paper_data_hashes_nothing():
    ds = PaperDistribution(d=3000, T=4, snr=0.5, eta=0.2).sample(40, seed=1)
    pairs, candidates = _screened(ds.X, ds.y)
    assert pairs == conflicting_pairs(ds.X, ds.y) == []
    assert candidates == []  # the signal tokens repeat, the noise tokens tell samples apart


def test_permuted_twins_are_found_as_by_hashing():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((9, 3, 500)) * 1e3
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0, -1.0])
    X[4] = X[1][[2, 0, 1]]  # same multiset, both labels -1: no conflict between them
    X[6] = X[1][[1, 2, 0]]  # label +1: 1 and 4 each conflict with it
    X[8] = X[3][::-1]  # same label as 3: no conflict
    pairs, candidates = _screened(X, y)
    assert pairs == conflicting_pairs(X, y) == [(1, 6), (4, 6)]
    assert candidates == [1, 4, 6]


def test_near_duplicates_that_differ_are_screened_in_and_not_paired():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 2, 20000))
    X[1] = X[0]
    X[1, 0, 7] = np.nextafter(X[0, 0, 7], np.inf)  # one ulp: below the Gram's rounding
    X[3] = X[2]
    X[3, 1, 3] += 1e-3  # far above it: told apart by the Gram alone
    y = np.array([1.0, -1.0, 1.0, -1.0])
    pairs, candidates = _screened(X, y)
    assert candidates == [0, 1]
    assert pairs == conflicting_pairs(X, y) == []


def test_equal_tokens_stay_candidates_under_any_rounding_of_the_gram():
    """A Gram matrix summed in another order differs from X X^T in the last digits; the screen's
    tolerance covers every order (each entry within d eps ||x_a|| ||x_b||)."""
    rng = np.random.default_rng(2)
    n, T, d = 6, 3, 4000
    X = rng.standard_normal((n, T, d)) * rng.uniform(1e-3, 1e3, size=(n, T, 1))
    X[5] = X[0][[1, 2, 0]]
    y = np.array([1.0, 1.0, -1.0, 1.0, -1.0, -1.0])
    H = TokenGram(X).H
    eps = np.finfo(np.float64).eps
    scale = np.sqrt(np.outer(np.diag(H), np.diag(H)))
    for seed in range(20):
        wiggle = np.random.default_rng(seed).uniform(-1, 1, H.shape) * d * eps * scale
        tied = H + (wiggle + wiggle.T) / 2
        assert conflicting_pairs(X, y, tied) == [(0, 5)]
    # a worst case at the edge: the pair's cross product rounded down by the whole gamma_d
    edge = H.copy()
    a, b = 0 * T + 1, 5 * T + 0  # X[0, 1] is X[5, 0]
    edge[a, b] = edge[b, a] = H[a, b] * (1 - d * eps)
    assert conflicting_pairs(X, y, edge) == [(0, 5)]


def test_non_finite_gram_entries_count_as_near():
    X = np.arange(12.0).reshape(2, 2, 3)
    H = TokenGram(X).H
    H[0, 2] = H[2, 0] = np.inf
    H[1, 3] = H[3, 1] = np.nan
    assert _twin_candidates(H, np.array([1, -1]), X.shape) == [0, 1]


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_hashing_on_small_token_pools(seed):
    """Tokens drawn from a pool of three: many repeated tokens and twins of both labels."""
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((3, 50))
    X = pool[rng.integers(0, 3, size=(40, 2))]
    y = rng.choice([-1.0, 1.0], size=40)
    pairs, _ = _screened(X, y)
    assert pairs == conflicting_pairs(X, y)
    assert pairs  # 6 multisets among 40 samples: some have both labels


def test_screen_blocks_agree_with_one_block(monkeypatch):
    rng = np.random.default_rng(3)
    pool = rng.standard_normal((4, 30))
    X = pool[rng.integers(0, 4, size=(30, 3))]
    y = rng.choice([-1.0, 1.0], size=30)
    H = TokenGram(X).H
    whole = _twin_candidates(H, y, X.shape)
    monkeypatch.setattr("margin_solver.core.kernel._SCREEN_BYTES", 1)  # one sample per block
    assert _twin_candidates(H, y, X.shape) == whole and whole


def test_on_disk_conflicts_are_proven_infeasible(tmp_path):
    ds = PaperDistribution(d=300, T=3, snr=0.5, eta=0.0).sample(8, seed=4)
    X, y = ds.X.copy(), ds.y.copy()
    X[7], y[7] = X[2][[2, 1, 0]], -y[2]
    on_disk = Dataset.load(save_on_disk(Dataset(X, y), tmp_path / "d"))
    with pytest.warns(ConvergenceWarning, match="'infeasible'"):
        res = solve_min_norm(on_disk, R=1.0)
    assert res.status == "infeasible" and res.certified
    assert "samples 2 and 7 have the same tokens" in res.message


def _sha256_pairs(X, y):
    """The implementation before issue 44, kept as the reference: a sha256 of each token's
    bytes, samples grouped by their sorted digests, each paired with its group's first sample
    of the other label."""
    groups = {}
    for i in range(len(y)):
        sample = np.ascontiguousarray(X[i], dtype=np.float64)
        key = b"".join(sorted(hashlib.sha256(token.tobytes()).digest() for token in sample))
        groups.setdefault(key, []).append(i)
    pairs = []
    for members in groups.values():
        first = {}
        for i in members:
            first.setdefault(y[i], i)
        if len(first) < 2:
            continue
        for i in members:
            j = next(first[label] for label in first if label != y[i])
            pairs.append((min(i, j), max(i, j)))
    return sorted(set(pairs))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 14),
    T=st.integers(1, 3),
    d=st.integers(1, 5),
    pool=st.integers(1, 4),
    plants=st.lists(st.tuples(st.integers(0, 13), st.integers(0, 13), st.booleans()), max_size=5),
    seed=st.integers(0, 2**16),
)
def test_integer_keys_give_the_pairs_of_sha256(n, T, d, pool, plants, seed):
    """Tokens from a small pool holding 0.0 and -0.0 (equal numbers, other bytes: not the same
    token), planted twins (the tokens of another sample, permuted, with either label); with
    and without the Gram screen."""
    rng = np.random.default_rng(seed)
    values = np.concatenate([[0.0, -0.0, 1.0], rng.standard_normal(pool)])
    tokens = values[rng.integers(0, len(values), size=(pool + 1, d))]
    X = tokens[rng.integers(0, len(tokens), size=(n, T))]
    y = rng.choice([-1.0, 1.0], size=n)
    for src, dst, flip in plants:
        src, dst = src % n, dst % n
        if src != dst:
            X[dst] = X[src][rng.permutation(T)]
            y[dst] = -y[src] if flip else y[src]
    expected = _sha256_pairs(X, y)
    assert conflicting_pairs(X, y) == expected
    assert conflicting_pairs(X, y, TokenGram(X).H) == expected


def test_key_collisions_are_told_apart_by_the_bytes(monkeypatch):
    """With every sample past the sum screen and every token given the same key (the worst
    case of both), samples are still grouped by their exact bytes."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((8, 2, 6))
    X[5] = X[1][::-1]
    y = np.array([1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0])
    monkeypatch.setattr(
        "margin_solver.core.kernel._shared_across_labels", lambda keys, y: np.ones(len(y), bool)
    )
    monkeypatch.setattr(
        "margin_solver.core.kernel._key_multipliers", lambda d: np.zeros(d, np.uint64)
    )
    assert conflicting_pairs(X, y) == _sha256_pairs(X, y) == [(1, 5)]


def test_key_blocks_agree_with_one_block(monkeypatch):
    rng = np.random.default_rng(6)
    pool = rng.standard_normal((3, 7))
    X = pool[rng.integers(0, 3, size=(25, 2))]
    y = rng.choice([-1.0, 1.0], size=25)
    whole = conflicting_pairs(X, y)
    monkeypatch.setattr("margin_solver.core.kernel._SCREEN_BYTES", 1)  # one sample per block
    assert conflicting_pairs(X, y) == whole == _sha256_pairs(X, y) and whole
