"""Fuzzing the dataset loader (issues 7 and 11): ``Dataset.load`` on malformed ``.npz`` files either
returns a valid Dataset or raises InvalidInputError, nothing else, and never unpickles."""

import io
import json
import os
import re
import zipfile

import numpy as np
import pytest
from badfiles import (
    DEEP_JSON,
    HUGE_INT_JSON,
    corrupt_compressed_npz,
    encrypted_flag_npz,
    params_npz,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.validation import InvalidInputError

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALID = PaperDistribution(d=3, T=2, snr=1.0, eta=0.2).sample(4, seed=0)
VALID_MEMBERS = {
    "X": VALID.X,
    "y": VALID.y,
    "clean_y": VALID.clean_y,
    "signal_index": VALID.signal_index,
    "params_json": np.array(json.dumps({"snr": 1.0, "eta": 0.2})),
}
MEMBER_NAMES = (*VALID_MEMBERS, "extra")


def load_or_refuse(path):
    """Load; an InvalidInputError is an allowed answer, a Dataset must be a valid one."""
    try:
        ds = Dataset.load(path)
    except InvalidInputError as exc:
        assert str(exc)  # a message, not an empty error
        return None
    assert isinstance(ds, Dataset)
    assert ds.X.dtype == np.float64 and ds.X.ndim == 3 and np.all(np.isfinite(ds.X))
    assert ds.y.dtype == np.int64 and ds.y.shape == (ds.n,) and set(ds.y.tolist()) <= {-1, 1}
    assert ds.n >= 2 and isinstance(ds.params, dict)
    if ds.signal_index is not None:
        assert ds.signal_index.min() >= 0 and ds.signal_index.max() < ds.T
    return ds


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """One folder for every generated file (module scope: hypothesis reruns the test body)."""
    return tmp_path_factory.mktemp("loader-fuzz")


def _write(members, folder, name="fuzz.npz"):
    path = folder / name
    with open(path, "wb") as fh:
        np.savez(fh, **members)  # object arrays are pickled here, as an attacker would
    return path


dtypes = st.one_of(
    hnp.floating_dtypes(),
    hnp.integer_dtypes(),
    hnp.unsigned_integer_dtypes(),
    hnp.boolean_dtypes(),
    hnp.complex_number_dtypes(),
    hnp.unicode_string_dtypes(max_len=4),
    hnp.byte_string_dtypes(max_len=4),
    hnp.datetime64_dtypes(),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
member_values = st.one_of(
    hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)),
    hnp.arrays(
        np.float64,
        st.sampled_from([(4, 2, 3), (4, 1, 1), (2, 3), (4,)]),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
    ),
    hnp.arrays(np.int64, st.sampled_from([(4,), (3,), (4, 1)]), elements=st.integers(-3, 3)),
    st.just(np.zeros((1,) * 32)),  # many dimensions
    st.text(max_size=20).map(np.array),
    json_values.map(lambda v: np.array(json.dumps(v))),
    st.just(np.array([{"a": 1}, None], dtype=object)),
)


@FUZZ
@given(members=st.dictionaries(st.sampled_from(MEMBER_NAMES), member_values, max_size=6))
def test_random_members_load_or_refuse(members, work):
    load_or_refuse(_write(members, work))


@FUZZ
@given(
    drop=st.sets(st.sampled_from(list(VALID_MEMBERS)), max_size=2),
    replace=st.dictionaries(st.sampled_from(MEMBER_NAMES), member_values, max_size=2),
)
def test_a_valid_file_with_members_dropped_or_replaced_loads_or_refuses(drop, replace, work):
    members = {k: v for k, v in VALID_MEMBERS.items() if k not in drop} | replace
    ds = load_or_refuse(_write(members, work))
    if not drop and not replace:
        assert ds is not None and np.array_equal(ds.X, VALID.X)


def _valid_bytes():
    buf = io.BytesIO()
    np.savez(buf, **VALID_MEMBERS)
    return buf.getvalue()


VALID_BYTES = _valid_bytes()


@FUZZ
@given(
    data=st.one_of(
        st.integers(0, len(VALID_BYTES) - 1).map(lambda k: VALID_BYTES[:k]),  # truncated
        st.tuples(st.integers(0, len(VALID_BYTES) - 1), st.integers(0, 255)).map(
            lambda kb: VALID_BYTES[: kb[0]] + bytes([kb[1]]) + VALID_BYTES[kb[0] + 1 :]
        ),  # one byte changed
        st.binary(max_size=200),  # random bytes
        st.binary(min_size=1, max_size=20).map(lambda junk: junk + VALID_BYTES),  # garbage prefix
    )
)
def test_corrupted_bytes_load_or_refuse(data, work):
    path = work / "bytes.npz"
    path.write_bytes(data)
    load_or_refuse(path)


def _npy_bytes(shape, descr="<f8", payload=b"\0" * 16):
    """A .npy member whose header is written by hand (it may lie about the data)."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + payload


@pytest.mark.parametrize(
    "x_member",
    [
        _npy_bytes("(100000000000,)"),  # declares 745 GiB: MemoryError before the fix
        _npy_bytes("(1000000, 1000000, 1000000)"),
        _npy_bytes("(2, 2, 2)"),  # declares more than it holds
        _npy_bytes("(1, 1, 2)", "|O"),
        _npy_bytes("(1, 1, 2)", "not-a-dtype"),
        b"raw bytes without a .npy header",  # numpy returns these as bytes
    ],
    ids=["huge shape", "huge 3-D shape", "short data", "object dtype", "bad dtype", "not npy"],
)
@pytest.mark.parametrize("member", ["X", "params_json"])
def test_hand_made_headers_are_refused(x_member, member, tmp_path):
    path = tmp_path / "hand.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for key, value in VALID_MEMBERS.items():
            if key != member:
                buf = io.BytesIO()
                np.save(buf, value)
                archive.writestr(f"{key}.npy", buf.getvalue())
        archive.writestr(f"{member}.npy", x_member)
    with pytest.raises(InvalidInputError):
        Dataset.load(path)


def test_other_file_kinds_are_refused(tmp_path):
    npy = tmp_path / "single.npz"
    with open(npy, "wb") as fh:
        np.save(fh, VALID.X)  # a bare .npy under an .npz name
    with pytest.raises(InvalidInputError, match=re.escape("single .npy array")):
        Dataset.load(npy)
    deep = _write(
        VALID_MEMBERS | {"params_json": np.array("[" * 100_000 + "]" * 100_000)}, tmp_path
    )
    with pytest.raises(InvalidInputError, match="params_json"):
        Dataset.load(deep)
    huge_index = _write(
        VALID_MEMBERS | {"signal_index": np.array([1e300, 0.0, 0.0, 1.0])}, tmp_path
    )
    with pytest.raises(InvalidInputError, match=r"signal_index must lie in \[0, T\)"):
        Dataset.load(huge_index)


class _CreatesMarker:
    """Unpickling this object opens (creates) the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("member", ["X", "y", "clean_y", "signal_index", "params_json"])
def test_pickled_content_is_never_executed(member, tmp_path):
    marker = tmp_path / "pwned"
    evil = np.empty(1, dtype=object)
    evil[0] = _CreatesMarker(marker)
    path = tmp_path / "evil.npz"
    np.savez(path, **(VALID_MEMBERS | {member: evil}))

    with pytest.raises(InvalidInputError, match=r"[Oo]bject|pickle"):
        Dataset.load(path)
    assert not marker.exists()

    # The file is a real threat: numpy with allow_pickle=True would run it.
    control = tmp_path / "control"
    evil[0] = _CreatesMarker(control)
    np.savez(path, **(VALID_MEMBERS | {member: evil}))
    with np.load(path, allow_pickle=True) as npz:
        npz[member][0].close()
    assert control.exists()
    os.remove(control)


# Issue 11: archives that passed the checks above but raised from inside zipfile, zlib or json.
ISSUE_11_FILES = {
    "corrupt compressed member": (corrupt_compressed_npz, r"invalid block type"),
    "member flagged encrypted": (encrypted_flag_npz, r"encrypted"),
    "params_json 5000-digit integer": (
        lambda p, ds: params_npz(p, ds, HUGE_INT_JSON),
        r"params_json is not valid JSON.*digits",
    ),
    "params_json nested 100,000 deep": (
        lambda p, ds: params_npz(p, ds, DEEP_JSON),
        r"params_json .*nested too deeply",
    ),
}


@pytest.mark.parametrize("case", ISSUE_11_FILES)
def test_issue_11_archives_are_refused(case, tmp_path):
    make, pattern = ISSUE_11_FILES[case]
    path = make(tmp_path / "bad.npz", VALID)
    with pytest.raises(InvalidInputError, match=pattern):
        Dataset.load(path)
    assert load_or_refuse(path) is None


@FUZZ
@given(data=st.data())
def test_corrupted_compressed_archives_load_or_refuse(data, work):
    """Byte flips inside a compressed archive (the deflate streams zlib decodes on read)."""
    path = work / "compressed.npz"
    np.savez_compressed(path, **VALID_MEMBERS)
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    path.write_bytes(bytes(raw))
    load_or_refuse(path)


# Dataset directories (X.npy memory-mapped beside labels.npz): hostile headers and archives
# gave OverflowError, zlib.error and TypeError tracebacks.
def _labels_npz_as_npy(folder):
    with open(folder / "labels.npz", "wb") as fh:
        np.save(fh, VALID.y)


def _labels_npz_corrupt_deflate(folder):
    corrupt_compressed_npz(folder / "labels.npz", VALID, member="y")


def _x_header(shape):
    def write(folder):
        (folder / "X.npy").write_bytes(_npy_bytes(shape, payload=VALID.X.tobytes()))

    return write


DIRECTORY_CASES = {
    "X.npy negative size": (_x_header("(-4, 2, 3)"), r"every size must be positive"),
    "X.npy 8 EB": (_x_header(f"({2**60}, 2, 3)"), r"but the file holds 192"),
    "X.npy truncated": (_x_header("(5, 2, 3)"), r"declares 240 bytes of data"),
    "labels.npz is a .npy": (_labels_npz_as_npy, r"single \.npy array, not an \.npz archive"),
    "labels.npz corrupt deflate": (_labels_npz_corrupt_deflate, r"invalid block type"),
}


@pytest.mark.parametrize("case", DIRECTORY_CASES)
def test_hostile_dataset_directories_are_refused(case, tmp_path):
    from margin_solver.core.generate import save_on_disk

    make, pattern = DIRECTORY_CASES[case]
    folder = save_on_disk(VALID, tmp_path / "d")
    make(folder)
    with pytest.raises(InvalidInputError, match=pattern):
        Dataset.load(folder)
