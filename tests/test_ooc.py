"""Tokens on disk (margin_solver.core.ondisk), written in blocks (margin_solver.core.generate), and
the blocked passes of margin_solver.core.ooc, locally and on a Dask cluster, against the in-memory
path."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from margin_solver.analysis.metrics import evaluate
from margin_solver.cli import main
from margin_solver.core import ooc
from margin_solver.core.data import Dataset, PaperDistribution, load_dataset
from margin_solver.core.generate import save_on_disk, write_paper_dataset
from margin_solver.core.kernel import TokenGram, margins
from margin_solver.core.ondisk import LABELS_FILE, TOKENS_FILE
from margin_solver.core.validation import InvalidInputError
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory import check_conditions

DISTRIBUTIONS = [
    PaperDistribution(d=701, T=3, snr=0.4, eta=0.2),
    PaperDistribution(
        d=701, T=2, snr=0.4, eta=0.3, signal="random", signal_position="random", signal_seed=3
    ),
    PaperDistribution(
        d=702,
        T=4,
        rho=2.0,
        sigma=0.5,
        eta=0.0,
        signal="antipodal",
        noise="isotropic",
        signal_position="random",
    ),
]


def _blocks(n_cols: int, n: int, T: int) -> int:
    """block_bytes giving blocks of ``n_cols`` columns of an (n, T, d) array."""
    return n_cols * n * T * 8


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("block", [1, 4, 29])
def test_written_to_disk_in_blocks_equals_sample_bitwise(tmp_path, dist, block):
    path = write_paper_dataset(tmp_path / "data", dist, 29, seed=11, block=block)
    on_disk, mem = Dataset.load(path), dist.sample(29, seed=11)
    assert isinstance(on_disk.X, np.memmap)
    assert np.array_equal(on_disk.X, mem.X)
    for name in ("y", "clean_y", "signal_index"):
        assert np.array_equal(getattr(on_disk, name), getattr(mem, name))
    assert on_disk.params == json.loads(json.dumps(mem.params))
    assert sorted(p.name for p in path.iterdir()) == sorted([LABELS_FILE, TOKENS_FILE])


def test_seed_sequence_and_train_test_streams_reproduce(tmp_path):
    dist = DISTRIBUTIONS[0]
    train, test = dist.sample_train_test(9, 6, seed=4)
    s_train, s_test = np.random.SeedSequence(4).spawn(2)
    on_disk = Dataset.load(write_paper_dataset(tmp_path / "test", dist, 6, s_test, block=2))
    assert np.array_equal(on_disk.X, test.X) and not np.array_equal(on_disk.X[:6], train.X[:6])


def test_existing_directory_is_refused_and_left_alone(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep")
    with pytest.raises(InvalidInputError, match="already exists"):
        write_paper_dataset(target, DISTRIBUTIONS[0], 5, seed=0)
    assert (target / "notes.txt").read_text() == "keep"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary left behind


def test_failed_write_leaves_nothing(tmp_path):
    data = DISTRIBUTIONS[0].sample(6, seed=0)
    data.params["bad"] = object()  # JSON cannot encode it: fails after the tokens are written
    with pytest.raises(InvalidInputError, match="JSON"):
        save_on_disk(data, tmp_path / "out", block=2)
    assert list(tmp_path.iterdir()) == []


def test_broken_directories_give_one_line_errors(tmp_path):
    path = save_on_disk(DISTRIBUTIONS[0].sample(5, seed=0), tmp_path / "d")
    (path / LABELS_FILE).unlink()
    with pytest.raises(InvalidInputError, match=re.escape("lacks labels.npz")):
        load_dataset(path)
    (path / LABELS_FILE).write_bytes(b"not a zip")
    with pytest.raises(InvalidInputError, match=re.escape("labels.npz")):
        load_dataset(path)
    np.save(path / TOKENS_FILE, np.ones((5, 2, 3), dtype=np.float32))
    with pytest.raises(InvalidInputError, match="float64"):
        load_dataset(path)


def test_sample_too_large_for_memory_fails_before_allocating():
    dist = PaperDistribution(d=10**9, T=2, snr=0.1)
    with pytest.raises(InvalidInputError, match="write_paper_dataset") as info:
        dist.sample(10**6, seed=0)
    assert "\n" not in str(info.value) and "GiB" in str(info.value)  # the shared check_memory unit


def test_dense_form_on_disk_is_refused(tmp_path):
    ds = Dataset.load(save_on_disk(DISTRIBUTIONS[0].sample(6, seed=0), tmp_path / "d"))
    with pytest.raises(InvalidInputError, match="kernel form"):
        solve_min_norm(ds, R=1.0, form="dense")


def test_nan_on_disk_is_caught_by_the_passes(tmp_path):
    data = DISTRIBUTIONS[0].sample(6, seed=0)
    data.X[3, 1, 500] = np.nan  # Dataset checked it already; the file is what the test needs
    path = save_on_disk(data, tmp_path / "d")
    ds = Dataset.load(path)  # only the header is read
    with ooc.execution(block_bytes=_blocks(100, 6, 3)):
        with pytest.raises(
            InvalidInputError, match=r"NaN or infinite values \(columns 500\.\.599\)"
        ):
            solve_min_norm(ds, R=1.0)
        with pytest.raises(InvalidInputError, match=r"samples 3\.\.3"):
            evaluate(np.ones(701), np.zeros(701), ds)
        # the checker refused NaN in memory but exited 0 with a report on a directory
        with pytest.raises(InvalidInputError, match=r"NaN or infinite values \(samples 3\.\.3\)"):
            check_conditions(ds)
        good = Dataset.load(save_on_disk(DISTRIBUTIONS[0].sample(6, seed=0), tmp_path / "g"))
        with pytest.raises(InvalidInputError, match=r"samples 3\.\.3"):
            check_conditions(good, test=ds)


@pytest.mark.parametrize("cols", [None, 1, 64, 700])
def test_blocked_passes_match_memory(tmp_path, cols):
    mem = DISTRIBUTIONS[1].sample(13, seed=5)
    ds = Dataset.load(save_on_disk(mem, tmp_path / "d", block=3))
    rng = np.random.default_rng(0)
    coef, w, w2 = (
        rng.standard_normal((2, 13, 2)),
        rng.standard_normal(701),
        rng.standard_normal(701),
    )
    block_bytes = None if cols is None else _blocks(cols, 13, 2)
    with ooc.execution(block_bytes=block_bytes):
        H, peak = ooc.token_gram(ds.X)
        dense = TokenGram.materialize(ds.X, coef)
        a, u = ooc.project(ds.X, [w, w2])
    H0, dense0 = TokenGram(mem.X).H, np.tensordot(coef, mem.X, axes=2)
    assert peak == np.abs(mem.X).max()
    # projections are the same per-sample products whatever the blocks: bitwise
    assert np.array_equal(a, mem.X @ w) and np.array_equal(u, mem.X @ w2)
    if cols is None:  # one block holds X: the in-memory products, bitwise
        assert np.array_equal(H, H0) and np.array_equal(dense, dense0)
    else:  # other summation orders over d: equal up to rounding
        assert np.allclose(H, H0, rtol=1e-13, atol=1e-12 * np.abs(H0).max())
        assert np.allclose(dense, dense0, rtol=1e-12, atol=1e-13 * np.abs(dense0).max())


def test_solve_and_evaluate_on_disk_match_memory(tmp_path):
    dist = PaperDistribution(d=900, T=2, snr=0.5, eta=0.2)
    mem = dist.sample(24, seed=3)
    ds = Dataset.load(write_paper_dataset(tmp_path / "d", dist, 24, seed=3, block=5))
    r0 = solve_min_norm(mem, R=2.0, certify=True)
    r1 = solve_min_norm(ds, R=2.0, certify=True)  # one block: identical
    assert np.array_equal(r0.v, r1.v) and np.array_equal(r0.p, r1.p)
    assert (r0.norm, r0.lower_bound, r0.min_margin, r0.start) == (
        r1.norm,
        r1.lower_bound,
        r1.min_margin,
        r1.start,
    )
    with ooc.execution(block_bytes=_blocks(50, 24, 2)):  # 18 blocks of columns
        r2 = solve_min_norm(ds, R=2.0, certify=True)
        m2 = evaluate(r2.v, r2.p, ds)
    m0 = evaluate(r0.v, r0.p, mem)
    assert r2.status == r0.status and r2.start == r0.start
    assert np.array_equal(r2.selected_token, r0.selected_token)
    assert r2.norm == pytest.approx(r0.norm, rel=1e-10)
    assert r2.lower_bound == pytest.approx(r0.lower_bound, rel=1e-10)
    assert np.allclose(r2.v, r0.v, rtol=1e-9, atol=1e-12 * np.abs(r0.v).max())
    assert (m2.error, m2.error_clean, m2.attn_signal_noisy is None) == (
        m0.error,
        m0.error_clean,
        m0.attn_signal_noisy is None,
    )
    assert m2.min_margin == pytest.approx(m0.min_margin, rel=1e-9)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    # threads in this process, no sockets at all
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            yield client


def test_dask_passes_match_local(tmp_path, dask_client):
    mem = DISTRIBUTIONS[2].sample(11, seed=8)
    ds = Dataset.load(save_on_disk(mem, tmp_path / "d", block=4))
    rng = np.random.default_rng(1)
    coef, w = rng.standard_normal((2, 11, 4)), rng.standard_normal(702)
    block_bytes = _blocks(100, 11, 4)
    with ooc.execution(block_bytes=block_bytes):
        local = ooc.token_gram(ds.X), ooc.materialize(ds.X, coef), ooc.project(ds.X, [w])[0]
    with ooc.execution(scheduler=dask_client, block_bytes=block_bytes):
        remote = ooc.token_gram(ds.X), ooc.materialize(ds.X, coef), ooc.project(ds.X, [w])[0]
        remote_mem = ooc.project(mem.X, [w])[0]  # an in-memory array goes through from_array
    (H_l, peak_l), dense_l, a_l = local
    (H_r, peak_r), dense_r, a_r = remote
    assert peak_r == peak_l
    assert np.allclose(H_r, H_l, rtol=1e-13, atol=1e-12 * np.abs(H_l).max())
    # the same per-chunk products as the local blocks: bitwise
    assert np.array_equal(dense_r, dense_l) and np.array_equal(a_r, a_l)
    assert np.array_equal(remote_mem, mem.X @ w)


def test_dask_solve_matches_memory(tmp_path, dask_client):
    dist = PaperDistribution(d=900, T=2, snr=0.5, eta=0.2)
    mem = dist.sample(24, seed=3)
    ds = Dataset.load(write_paper_dataset(tmp_path / "d", dist, 24, seed=3))
    r0 = solve_min_norm(mem, R=2.0)
    with ooc.execution(scheduler=dask_client, block_bytes=_blocks(128, 24, 2)):
        r1 = solve_min_norm(ds, R=2.0)
        m1 = margins(ds.X, ds.y, r1.v, r1.p)
    assert r1.status == r0.status and r1.start == r0.start
    assert r1.norm == pytest.approx(r0.norm, rel=1e-10)
    assert np.allclose(r1.v, r0.v, rtol=1e-9, atol=1e-12 * np.abs(r0.v).max())
    assert np.allclose(m1, margins(mem.X, mem.y, r0.v, r0.p), rtol=1e-9)


def test_execution_rejects_bad_block_size():
    with pytest.raises(InvalidInputError, match="block_bytes"):
        with ooc.execution(block_bytes=0):
            pass


@pytest.mark.slow
def test_blocked_gram_of_a_file_larger_than_its_memory_use(tmp_path):
    """A 400 MB token file (sparse: zeros) Gram-reduced in 16 MB blocks by a fresh process."""
    path = tmp_path / "big"
    path.mkdir()
    shape = (100, 2, 250_000)
    with open(path / TOKENS_FILE, "wb") as fh:
        np.lib.format.write_array_header_2_0(
            fh, {"descr": "<f8", "fortran_order": False, "shape": shape}
        )
        fh.truncate(fh.tell() + 8 * int(np.prod(shape)))
    np.savez(path / LABELS_FILE, y=np.resize([1, -1], 100))
    code = (
        "import sys, numpy as np\n"
        "from margin_solver import ooc\nfrom margin_solver.core.data import load_dataset\n"
        "ds = load_dataset(sys.argv[1])\n"
        "with ooc.execution(block_bytes=16 * 2**20):\n"
        "    H, peak = ooc.token_gram(ds.X)\n"
        # VmHWM: this process's own peak (ru_maxrss may keep the forking pytest's size)
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "print(int(hwm.split()[1]) * 1024, float(np.abs(H).max()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    ).stdout.split()
    peak_rss, largest = int(out[0]), float(out[1])
    assert largest == 0.0
    assert peak_rss < 220 * 2**20 < 8 * np.prod(shape) / 1.5, peak_rss  # the file: 400 MB


def test_cli_solves_a_dataset_directory(tmp_path, capsys):
    dist = PaperDistribution(d=600, T=2, snr=0.5, eta=0.1)
    write_paper_dataset(tmp_path / "train", dist, 16, seed=2)
    dist.sample(16, seed=2).save(tmp_path / "train.npz")
    assert main(["solve", str(tmp_path / "train.npz"), "--R", "2", "--no-progress"]) == 0
    from_npz = capsys.readouterr().out
    assert (
        main(["solve", str(tmp_path / "train"), "--R", "2", "--no-progress", "--block-mb", "0.01"])
        == 0
    )
    from_dir = capsys.readouterr().out
    # same summary to the printed digits, apart from the timing-free header
    assert from_npz.splitlines()[1:] == from_dir.splitlines()[1:]


def test_usage_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "usage.md").read_text()
    section = text.split("### Tokens that do not fit in memory", 1)[1]
    code, printed = section.split("```python\n", 1)[1].split("```\n```output\n", 1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "usage.md", "exec"), {})
    assert capsys.readouterr().out == printed.split("```", 1)[0]
