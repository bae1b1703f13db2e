"""Makers of the malformed inputs named in issue 11, shared by the hardening corpora."""

import struct
import zipfile

import numpy as np

#: JSON nested far deeper than Python's recursion limit.
DEEP_JSON = "[" * 100_000 + "]" * 100_000
#: A JSON object holding an integer beyond Python's 4300-digit conversion limit.
HUGE_INT_JSON = '{"snr": ' + "9" * 5000 + "}"


def corrupt_compressed_npz(path, dataset, member="X"):
    """``np.savez_compressed`` of ``dataset`` whose ``member`` (X or y) has a damaged deflate
    stream (its first byte announces the reserved block type 3)."""
    np.savez_compressed(path, X=dataset.X, y=dataset.y)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(f"{member}.npy")
    name_len, extra_len = struct.unpack(
        "<HH", raw[info.header_offset + 26 : info.header_offset + 30]
    )
    raw[info.header_offset + 30 + name_len + extra_len] = 0xFF
    path.write_bytes(bytes(raw))
    return path


def encrypted_flag_npz(path, dataset):
    """An ``.npz`` of ``dataset`` whose members are flagged encrypted (bit 0 of the flags)."""
    np.savez(path, X=dataset.X, y=dataset.y)
    raw = bytearray(path.read_bytes())
    for signature, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(signature)
        while at >= 0:
            raw[at + flag_offset] |= 1
            at = raw.find(signature, at + 4)
    path.write_bytes(bytes(raw))
    return path


def params_npz(path, dataset, params_json):
    """An ``.npz`` of ``dataset`` with the given ``params_json`` text."""
    np.savez(path, X=dataset.X, y=dataset.y, params_json=np.array(params_json))
    return path


def device_node(path):
    """A character device at ``path`` (a clone of /dev/null, when the system lets us make one)
    or else a FIFO: a non-regular file of our own. Tests never name the real /dev/null, which
    code that replaces its output path (as main did) would turn into a regular file."""
    import os
    import stat

    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:  # not privileged: a FIFO is refused the same way
        os.mkfifo(path)
    return path
