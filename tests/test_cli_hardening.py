"""Hardening (issues 7 and 11) of the command line: every verb fed bad files or bad arguments
exits with status 2 and exactly one line on stderr that names the problem; never a traceback."""

import gzip
import json
import re
import socket

import numpy as np
import pytest
from badfiles import (
    DEEP_JSON,
    HUGE_INT_JSON,
    corrupt_compressed_npz,
    device_node,
    encrypted_flag_npz,
    params_npz,
)

from margin_solver.cli import EXIT_INPUT_ERROR, EXIT_NO_ANSWER, main
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.generate import save_on_disk


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Input files, good and bad, by name; ``blocker`` is a regular file used as a directory."""
    root = tmp_path_factory.mktemp("cli")
    good = PaperDistribution(d=6, T=2, snr=0.8, eta=0.1).sample(6, seed=0)
    X, y = good.X, good.y
    paths = {"dir": root, "missing": root / "missing.npz"}
    paths["good"] = good.save(root / "good.npz")
    paths["other_d"] = PaperDistribution(d=5, snr=0.8).sample(4, seed=1).save(root / "other_d.npz")
    paths["clash"] = Dataset(np.concatenate([X, X[:1]]), np.r_[y, -y[:1]]).save(root / "clash.npz")
    paths["zeros"] = Dataset(np.zeros((4, 2, 3)), [1, -1, 1, -1]).save(root / "zeros.npz")
    paths["huge"] = Dataset(X * 1e200, y).save(root / "huge.npz")
    raw = {
        "nan": {"X": np.where(X[0, 1, 2] == X, np.nan, X), "y": y},
        "y3": {"X": X, "y": np.r_[(y[:-1] + 1) // 2, 2]},  # labels 0, 1 and 2
        "no_X": {"y": y},
        "strings": {"X": X.astype(str), "y": y},
        "objects": {"X": X.astype(object), "y": y},  # pickled by savez; never unpickled on load
        "X2d": {"X": X[:, 0], "y": y},
    }
    for name, arrays in raw.items():
        paths[name] = root / f"{name}.npz"
        np.savez(paths[name], **arrays)
    paths["text"] = root / "text.npz"
    paths["text"].write_text("not a zip archive")
    paths["truncated"] = root / "truncated.npz"
    paths["truncated"].write_bytes(paths["good"].read_bytes()[:300])
    paths["blocker"] = root / "blocker"
    paths["blocker"].write_text("a file, not a directory")
    for name, content in {
        "sol_keys": {"v": [1.0] * 6},
        "sol_nan": {"v": [float("nan")] * 6, "p": [0.0] * 6},
        "sol_short": {"v": [1.0] * 5, "p": [0.0] * 5},
    }.items():
        paths[name] = root / f"{name}.json"
        paths[name].write_text(json.dumps(content))
    paths["sol_bad_json"] = root / "sol_bad_json.json"
    paths["sol_bad_json"].write_text("{not json")
    paths["foreign_csv"] = root / "foreign.csv"
    paths["foreign_csv"].write_text("a,b\n1,2\n")
    # issue 11
    paths["corrupt"] = corrupt_compressed_npz(root / "corrupt.npz", good)
    paths["encrypted"] = encrypted_flag_npz(root / "encrypted.npz", good)
    paths["huge_int"] = params_npz(root / "huge_int.npz", good, HUGE_INT_JSON)
    paths["deep_params"] = params_npz(root / "deep_params.npz", good, DEEP_JSON)
    paths["deep_json"] = root / "deep.json"
    paths["deep_json"].write_text(DEEP_JSON)
    paths["npz_out"] = root / "npz_out.npz"
    np.savez(paths["npz_out"], a=np.arange(3))
    paths["device"] = device_node(root / "device")
    paths["link"] = root / "link.csv"
    paths["link"].symlink_to(paths["blocker"])
    paths["free_port"] = _free_port()
    # issue 43: a dataset directory whose tokens hold inf (the checker exited 0 with a report)
    paths["inf_dir"] = save_on_disk(good, root / "inf_dir")
    tokens = np.load(paths["inf_dir"] / "X.npy", mmap_mode="r+")
    tokens[-1, -1, -1] = np.inf
    tokens.flush()
    del tokens
    # issue 43: hostile dataset directories (tracebacks: OverflowError, zlib.error, TypeError)
    paths["nan_dir"] = save_on_disk(good, root / "nan_dir")
    tokens = np.load(paths["nan_dir"] / "X.npy", mmap_mode="r+")
    tokens[0, 0, 0] = np.nan
    tokens.flush()
    del tokens
    for name, shape in {"negative_dir": "(-6, 2, 6)", "exabyte_dir": f"({2**60}, 2, 6)"}.items():
        paths[name] = save_on_disk(good, root / name)
        header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
        header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
        (paths[name] / "X.npy").write_bytes(
            b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
            + X.tobytes()
        )  # fmt: skip
    paths["labels_npy_dir"] = save_on_disk(good, root / "labels_npy_dir")
    with open(paths["labels_npy_dir"] / "labels.npz", "wb") as fh:
        np.save(fh, y)
    paths["labels_deflate_dir"] = save_on_disk(good, root / "labels_deflate_dir")
    corrupt_compressed_npz(paths["labels_deflate_dir"] / "labels.npz", good, member="y")
    # issue 43: damaged local MNIST copies (BadZipFile, EOFError, ValueError tracebacks)
    images = np.zeros((3, 28, 28), dtype=np.uint8)
    idx = b"\x00\x00\x08\x03" + b"".join(k.to_bytes(4, "big") for k in images.shape)
    whole = gzip.compress(idx + images.tobytes())
    paths["mnist_truncated"] = root / "mnist_gz"
    paths["mnist_truncated"].mkdir()
    (paths["mnist_truncated"] / "train-images-idx3-ubyte.gz").write_bytes(whole[: len(whole) // 2])
    (paths["mnist_truncated"] / "train-labels-idx1-ubyte").write_bytes(
        b"\x00\x00\x08\x01" + bytes(7)
    )
    paths["mnist_pickled"] = root / "mnist_pickled.npz"
    np.savez(paths["mnist_pickled"], x_train=np.array([{"a": 1}], dtype=object), y_train=[1])
    paths["mnist_corrupt"] = root / "mnist_corrupt.npz"
    paths["mnist_corrupt"].write_bytes(b"PK\x03\x04 not really a zip archive")
    return paths


def _free_port() -> int:
    """A loopback port nothing listens on (bound once by the OS, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SWEEP = [
    "sweep",
    "--n",
    "8",
    "--d",
    "20",
    "--methods",
    "uniform-svm",
    "--n-test",
    "10",
    "--jobs",
    "1",
    "--no-progress",
]

# (argv with {placeholders} for the files above, pattern the stderr line must contain)
CASES = {
    # solve
    "solve missing file": (["solve", "{missing}", "--R", "1"], r"No dataset file"),
    "solve directory": (
        ["solve", "{dir}", "--R", "1"],
        r"is not a dataset directory: it lacks X.npy",
    ),
    "solve not a zip": (["solve", "{text}", "--R", "1"], r"text.npz is not an .npz archive"),
    "solve truncated": (
        ["solve", "{truncated}", "--R", "1"],
        r"truncated.npz is a damaged or truncated .npz archive",
    ),
    "solve NaN": (["solve", "{nan}", "--R", "1"], r"X contains NaN"),
    "solve three labels": (["solve", "{y3}", "--R", "1"], r"two labels .* got 3: \[0, 1, 2\]"),
    "solve no X": (["solve", "{no_X}", "--R", "1"], r"lacks the array\(s\) \['X'\]"),
    "solve strings": (["solve", "{strings}", "--R", "1"], r"numeric"),
    "solve objects": (["solve", "{objects}", "--R", "1"], r"[Oo]bject"),
    "solve 2-D X": (["solve", "{X2d}", "--R", "1"], r"shape"),
    "solve huge scale": (["solve", "{huge}", "--R", "1"], r"largest \|entry\|"),
    "solve infeasible": (["solve", "{clash}", "--R", "1"], r"infeasible"),
    "solve R text": (["solve", "{good}", "--R", "abc"], r"invalid float value"),
    "solve R missing": (["solve", "{good}"], r"required: --R"),
    "solve R negative": (["solve", "{good}", "--R", "-1"], r"R must be a positive"),
    "solve R nan": (["solve", "{good}", "--R", "nan"], r"R must be a positive"),
    "solve R inf": (["solve", "{good}", "--R", "inf"], r"R must be a positive finite"),
    "solve random starts": (
        ["solve", "{good}", "--R", "1", "--random-starts", "-1"],
        r"n_random_starts",
    ),
    "solve max iter": (["solve", "{good}", "--R", "1", "--max-iter", "0"], r"max_iter"),
    "solve time limit": (
        ["solve", "{good}", "--R", "1", "--certify", "--time-limit", "-1"],
        r"time_limit",
    ),
    "solve time limit nan": (["solve", "{good}", "--R", "1", "--time-limit", "nan"], r"time_limit"),
    "solve bound time limit": (
        ["solve", "{good}", "--R", "1", "--certify", "--bound-time-limit", "0"],
        r"bound_time_limit",
    ),
    "solve gap tol": (
        ["solve", "{good}", "--R", "1", "--certify", "--gap-tol", "-1"],
        r"gap_tol must be a positive",
    ),
    "solve gap tol text": (
        ["solve", "{good}", "--R", "1", "--gap-tol", "tight"],
        r"invalid float value",
    ),
    "solve p0 missing": (["solve", "{good}", "--R", "1", "--p0", "{missing}"], r"No solution file"),
    "solve p0 JSON": (["solve", "{good}", "--R", "1", "--p0", "{sol_bad_json}"], r"not valid JSON"),
    "solve p0 keys": (
        ["solve", "{good}", "--R", "1", "--p0", "{sol_keys}"],
        r"lacks key\(s\) \['p'\]",
    ),
    "solve p0 length": (["solve", "{good}", "--R", "1", "--p0", "{sol_short}"], r"shape \(6,\)"),
    "solve p0 NaN": (["solve", "{good}", "--R", "1", "--p0", "{sol_nan}"], r"NaN"),
    "solve json unwritable": (
        ["solve", "{good}", "--R", "1", "--json", "{blocker}/r.json"],
        r"blocker",
    ),
    # gd
    "gd NaN": (["gd", "{nan}"], r"X contains NaN"),
    "gd all-zero": (["gd", "{zeros}"], r"All tokens are zero"),
    "gd huge scale": (["gd", "{huge}"], r"largest \|entry\|"),
    "gd steps two-step": (["gd", "{good}", "--steps", "3"], r"--steps does not apply"),
    "gd steps 0": (
        ["gd", "{good}", "--schedule", "constant", "--steps", "0"],
        r"steps must be an integer >= 1",
    ),
    "gd test no X": (["gd", "{good}", "--test", "{no_X}"], r"lacks the array"),
    "gd test other d": (["gd", "{good}", "--test", "{other_d}"], r"test has d=5"),
    "gd beta0": (["gd", "{good}", "--beta0", "-1"], r"beta0 must be a positive"),
    "gd weight decay": (["gd", "{good}", "--weight-decay", "nan"], r"weight_decay"),
    "gd record every": (
        ["gd", "{good}", "--schedule", "constant", "--steps", "3", "--record-every", "0"],
        r"record_every",
    ),
    "gd schedule": (["gd", "{good}", "--schedule", "fast"], r"invalid choice"),
    "gd json unwritable": (["gd", "{good}", "--json", "{blocker}/g.json"], r"blocker"),
    "gd plot unwritable": (["gd", "{good}", "--plot", "{blocker}/g.png"], r"blocker"),
    # check
    "check NaN": (["check", "{nan}"], r"X contains NaN"),
    "check test labels": (["check", "{good}", "--test", "{y3}"], r"two labels .* got 3"),
    "check test other d": (["check", "{good}", "--test", "{other_d}"], r"d=5"),
    "check solution keys": (
        ["check", "{good}", "--solution", "{sol_keys}"],
        r"lacks key\(s\) \['p'\]",
    ),
    "check solution NaN": (["check", "{good}", "--solution", "{sol_nan}"], r"NaN"),
    "check solution length": (["check", "{good}", "--solution", "{sol_short}"], r"shape \(6,\)"),
    "check solution JSON": (["check", "{good}", "--solution", "{sol_bad_json}"], r"not valid JSON"),
    "check solution missing": (["check", "{good}", "--solution", "{missing}"], r"No solution file"),
    "check constant name": (["check", "{good}", "--constant", "bogus=1"], r"NAME=VALUE"),
    "check constant value": (["check", "{good}", "--constant", "kappa_benign=-1"], r"kappa_benign"),
    "check json unwritable": (["check", "{good}", "--json", "{blocker}/c.json"], r"blocker"),
    # sweep (arguments are validated before any cell runs)
    "sweep n 0": (
        [*SWEEP, "--n", "0", "--kappa", "1", "--out", "{dir}/s.csv"],
        r"n must be integers >= 2",
    ),
    "sweep n 1": (
        [*SWEEP, "--n", "1", "--kappa", "1", "--out", "{dir}/s.csv"],
        r"n must be integers >= 2",
    ),
    "sweep n text": (
        [*SWEEP, "--n", "many", "--kappa", "1", "--out", "{dir}/s.csv"],
        r"invalid int value",
    ),
    "sweep kappa negative": (
        [*SWEEP, "--kappa", "-1", "--out", "{dir}/s.csv"],
        r"kappa must be finite numbers >= 0",
    ),
    "sweep kappa nan": (
        [*SWEEP, "--kappa", "nan", "--out", "{dir}/s.csv"],
        r"kappa must be finite",
    ),
    "sweep snr inf": ([*SWEEP, "--snr", "inf", "--out", "{dir}/s.csv"], r"snr must be finite"),
    "sweep T 0": (
        [*SWEEP, "--kappa", "1", "--T", "0", "--out", "{dir}/s.csv"],
        r"T must be integers >= 1",
    ),
    "sweep d 0": (
        [*SWEEP, "--kappa", "1", "--d", "0", "--out", "{dir}/s.csv"],
        r"d must be integers >= 1",
    ),
    "sweep eta": (
        [*SWEEP, "--kappa", "1", "--eta", "0.7", "--out", "{dir}/s.csv"],
        r"eta must be numbers in \[0, 0.5\)",
    ),
    "sweep heads 0": (
        [*SWEEP, "--kappa", "1", "--heads", "1", "0", "--out", "{dir}/s.csv"],
        r"heads must be integers >= 1; got \[0\]",
    ),
    "sweep heads text": (
        [*SWEEP, "--kappa", "1", "--heads", "two", "--out", "{dir}/s.csv"],
        r"argument --heads: invalid int value: 'two'",
    ),
    "sweep seeds 0": (
        [*SWEEP, "--kappa", "1", "--seeds", "0", "--out", "{dir}/s.csv"],
        r"seeds must be >= 1",
    ),
    "sweep sweep seed": (
        [*SWEEP, "--kappa", "1", "--sweep-seed", "-1", "--out", "{dir}/s.csv"],
        r"sweep_seed must be an integer >= 0",
    ),
    "sweep n test": (
        [*SWEEP, "--kappa", "1", "--n-test", "0", "--out", "{dir}/s.csv"],
        r"n_test must be an integer >= 2",
    ),
    "sweep one test sample": (  # a test set holds two samples at least, as a Dataset does
        [*SWEEP, "--kappa", "1", "--n-test", "1", "--out", "{dir}/s.csv"],
        r"n_test must be an integer >= 2",
    ),
    "sweep method": (
        [*SWEEP, "--kappa", "1", "--methods", "nope", "--out", "{dir}/s.csv"],
        r"Unknown method 'nope'",
    ),
    "sweep method options": (
        [*SWEEP, "--kappa", "1", "--method-options", '{"nope": {}}', "--out", "{dir}/s.csv"],
        r"unknown method\(s\) \['nope'\]",
    ),
    "sweep method options list": (
        [
            *SWEEP,
            "--kappa",
            "1",
            "--method-options",
            '{"uniform-svm": [1]}',
            "--out",
            "{dir}/s.csv",
        ],
        r"method_options\['uniform-svm'\] must be a dict",
    ),
    "sweep data options JSON": (
        [*SWEEP, "--kappa", "1", "--data-options", "{bad", "--out", "{dir}/s.csv"],
        r"not valid JSON",
    ),
    "sweep data options list": (
        [*SWEEP, "--kappa", "1", "--data-options", "[1]", "--out", "{dir}/s.csv"],
        r"must be a JSON object",
    ),
    "sweep no strength": ([*SWEEP, "--out", "{dir}/s.csv"], r"give --snr or --kappa"),
    "sweep out directory": ([*SWEEP, "--kappa", "1", "--out", "{dir}"], r"[Ii]s a directory"),
    "sweep out under a file": ([*SWEEP, "--kappa", "1", "--out", "{blocker}/s.csv"], r"blocker"),
    "sweep out foreign csv": (
        [*SWEEP, "--kappa", "1", "--out", "{foreign_csv}"],
        r"has columns \['a', 'b'\]",
    ),
    # bench
    "bench unknown argument": (["bench", "--tiny", "nope"], r"unrecognized arguments: nope"),
    "bench unknown study": (["bench", "--tiny", "--only", "nope"], r"invalid choice: 'nope'"),
    "bench unknown method": (
        ["bench", "--tiny", "--methods", "nope", "--out", "{dir}/bench"],
        r"Unknown method 'nope'",
    ),
    # issue 11: inputs that gave a traceback (or exit 0) on main
    "corrupt compressed member": (
        ["check", "{corrupt}"],
        r"Cannot read corrupt.npz.*invalid block type",
    ),
    "member flagged encrypted": (["check", "{encrypted}"], r"Cannot read encrypted.npz.*encrypted"),
    "params_json 5000-digit integer": (
        ["check", "{huge_int}"],
        r"params_json is not valid JSON.*digits",
    ),
    "params_json nested": (
        ["solve", "{deep_params}", "--R", "1"],
        r"params_json is not valid JSON: nested too deeply",
    ),
    "solution nested": (
        ["check", "{good}", "--solution", "{deep_json}"],
        r"deep.json is not valid JSON: nested too deeply",
    ),
    "data options nested": (
        [*SWEEP, "--kappa", "1", "--data-options", "[" * 5000 + "]" * 5000, "--out", "{dir}/s.csv"],
        r"--data-options is not valid JSON: nested too deeply",
    ),
    "method options nested": (
        [
            *SWEEP,
            "--kappa",
            "1",
            "--method-options",
            "[" * 5000 + "]" * 5000,
            "--out",
            "{dir}/s.csv",
        ],
        r"--method-options is not valid JSON: nested too deeply",
    ),
    "solve R 1e300": (
        ["solve", "{good}", "--R", "1e300"],
        r"R = 1e\+300 is outside \[1e-150, 1e\+150\]",
    ),
    "solve R 1e154": (["solve", "{good}", "--R", "1e154"], r"R = 1e\+154 is outside"),
    "solve R 1e-200": (["solve", "{good}", "--R", "1e-200"], r"R = 1e-200 is outside"),
    "gd R 1e300": (["gd", "{good}", "--R", "1e300"], r"R = 1e\+300 is outside"),
    "check seed -1": (["check", "{good}", "--constant", "seed=-1"], r"Constants.seed must be"),
    "sweep snr 1e300": (
        [*SWEEP, "--snr", "1e300", "--out", "{dir}/s.csv"],
        r"snr must be finite numbers >= 0 and <= 1e\+100",
    ),
    "sweep snr overflowing rho": (
        [*SWEEP, "--snr", "5e99", "--out", "{dir}/s.csv"],
        r"signal norm rho = 2.24e\+100 exceeds",
    ),
    "sweep unknown data option": (
        [*SWEEP, "--kappa", "1", "--data-options", '{"bogus": 1}', "--out", "{dir}/s.csv"],
        r"unexpected keyword argument 'bogus'",
    ),
    "sweep scheduler scheme": (
        [*SWEEP, "--kappa", "1", "--scheduler", "foo://bar", "--out", "{dir}/s.csv"],
        r"'foo://bar' is not a Dask scheduler address",
    ),
    "sweep scheduler port text": (
        [*SWEEP, "--kappa", "1", "--scheduler", "tcp://host:notaport", "--out", "{dir}/s.csv"],
        r"is not a Dask scheduler address",
    ),
    "sweep scheduler no port": (
        [*SWEEP, "--kappa", "1", "--scheduler", "localhost", "--out", "{dir}/s.csv"],
        r"is not a Dask scheduler address.*missing port",
    ),
    "sweep scheduler port range": (
        [*SWEEP, "--kappa", "1", "--scheduler", "tcp://127.0.0.1:99999", "--out", "{dir}/s.csv"],
        r"port 99999 is outside",
    ),
    # issue 43: nothing listens there; the error came after 20-40 s of dask's retries
    "sweep scheduler nothing listening": (
        [
            *SWEEP,
            "--kappa",
            "1",
            "--scheduler",
            "tcp://127.0.0.1:{free_port}",
            "--out",
            "{dir}/s.csv",
        ],
        r"no server accepts connections at 127.0.0.1:\d+",
    ),
    "solve scheduler nothing listening": (
        ["solve", "{good}", "--R", "1", "--scheduler", "tcp://127.0.0.1:{free_port}"],
        r"Cannot reach the Dask scheduler at 'tcp://127.0.0.1:\d+'",
    ),
    "bench scheduler nothing listening": (
        [
            "bench",
            "--tiny",
            "--only",
            "phase",
            "--no-progress",
            "--out",
            "{dir}/bench_dask",
            "--scheduler",
            "tcp://127.0.0.1:{free_port}",
        ],
        r"no server accepts connections",
    ),
    "check inf on disk": (["check", "{inf_dir}"], r"NaN or infinite values \(samples"),
    "solve inf on disk": (["solve", "{inf_dir}", "--R", "1"], r"NaN or infinite values"),
    "solve R 1e400": (["solve", "{good}", "--R", "1e400"], r"R must be a positive finite"),
    "check NaN on disk": (["check", "{nan_dir}"], r"NaN or infinite values \(samples 0\.\."),
    "gd NaN on disk": (["gd", "{nan_dir}"], r"X contains NaN or infinite values"),
    "check X.npy negative size": (["check", "{negative_dir}"], r"every size must be positive"),
    "check X.npy 8 EB": (["check", "{exabyte_dir}"], r"but the file holds"),
    "solve labels.npz a .npy": (
        ["solve", "{labels_npy_dir}", "--R", "1"],
        r"single \.npy array, not an \.npz archive",
    ),
    "gd labels.npz corrupt deflate": (["gd", "{labels_deflate_dir}"], r"invalid block type"),
    "make-data mnist truncated": (
        [
            "make-data",
            "mnist",
            "--mnist",
            "{mnist_truncated}",
            "--n",
            "2",
            "--train",
            "{dir}/m.npz",
        ],
        r"Cannot read the MNIST copy",
    ),
    "make-data mnist pickled": (
        ["make-data", "mnist", "--mnist", "{mnist_pickled}", "--n", "2", "--train", "{dir}/m.npz"],
        r"Cannot read the MNIST copy",
    ),
    "make-data mnist corrupt": (
        ["make-data", "mnist", "--mnist", "{mnist_corrupt}", "--n", "2", "--train", "{dir}/m.npz"],
        r"Cannot read the MNIST copy",
    ),
    "bench mnist missing": (
        [
            "bench",
            "--tiny",
            "--only",
            "digits",
            "--mnist",
            "/nonexistent",
            "--jobs",
            "1",
            "--no-progress",
            "--out",
            "{dir}/bench",
        ],
        r"/nonexistent",
    ),
    # issue 11: outputs that are not regular files, a sidecar that would be the log
    "sweep out json": (
        [*SWEEP, "--kappa", "1", "--out", "{dir}/s.json"],
        r"both the results log and its JSON sidecar",
    ),
    "sweep out npz": ([*SWEEP, "--kappa", "1", "--out", "{npz_out}"], r"is not this results log"),
    "sweep out text": ([*SWEEP, "--kappa", "1", "--out", "{text}"], r"is not this results log"),
    "sweep out symlink": ([*SWEEP, "--kappa", "1", "--out", "{link}"], r"is a symbolic link"),
    "sweep out device": (
        [*SWEEP, "--kappa", "1", "--out", "{device}"],
        r"device is a (character device|FIFO)",
    ),
    "check json device": (
        ["check", "{good}", "--json", "{device}"],
        r"device is a (character device|FIFO)",
    ),
    "check json symlink": (["check", "{good}", "--json", "{link}"], r"is a symbolic link"),
    "solve json symlink": (
        ["solve", "{good}", "--R", "1", "--json", "{link}"],
        r"is a symbolic link",
    ),
    "gd json device": (
        ["gd", "{good}", "--json", "{device}"],
        r"device is a (character device|FIFO)",
    ),
    "gd plot symlink": (["gd", "{good}", "--plot", "{link}"], r"is a symbolic link"),
    # make-data: numpy's seeds are non-negative, a lift has a positive width
    "make-data negative seed": (
        [
            "make-data",
            "paper",
            "--d",
            "6",
            "--n",
            "4",
            "--snr",
            "1",
            "--seed",
            "-1",
            "--train",
            "{dir}/neg.npz",
        ],
        r"--seed must be an integer >= 0, got -1",
    ),
    "make-data negative signal seed": (
        [
            "make-data",
            "paper",
            "--d",
            "6",
            "--n",
            "4",
            "--snr",
            "1",
            "--signal",
            "random",
            "--signal-seed",
            "-3",
            "--train",
            "{dir}/neg.npz",
        ],
        r"--signal-seed must be an integer >= 0, got -3",
    ),
    "make-data negative lift": (
        ["make-data", "digits", "--n", "4", "--lift", "-5", "--train", "{dir}/neg.npz"],
        r"--lift must be an integer >= 1, got -5",
    ),
    "make-data negative lift seed": (
        [
            "make-data",
            "digits",
            "--n",
            "4",
            "--lift",
            "8",
            "--lift-seed",
            "-2",
            "--train",
            "{dir}/neg.npz",
        ],
        r"--lift-seed must be an integer >= 0, got -2",
    ),
}
#: Cases that are well-formed problems without an answer (exit 3), not input errors (exit 2).
NO_ANSWER = {"solve infeasible"}


def _run(argv, capsys):
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse usage errors exit from parse_args
        status = exc.code
    return status, capsys.readouterr()


@pytest.mark.parametrize("case", CASES)
def test_bad_cli_input_is_one_line_and_a_failure_status(case, files, capsys):
    template, pattern = CASES[case]
    argv = [re.sub(r"\{(\w+)\}", lambda m: str(files.get(m[1], m[0])), arg) for arg in template]
    status, captured = _run(argv, capsys)
    lines = captured.err.strip().splitlines()
    assert status == (EXIT_NO_ANSWER if case in NO_ANSWER else EXIT_INPUT_ERROR)
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and "Traceback" not in captured.out
    assert lines[0].startswith("margin-solver")
    assert re.search(pattern, lines[0]), lines[0]


def test_sweep_refusals_leave_no_results_file(files, capsys):
    """Argument errors stop a sweep before it writes anything."""
    out = files["dir"] / "refused.csv"
    status, _ = _run([*SWEEP, "--kappa", "nan", "--out", str(out)], capsys)
    assert status == 2 and not out.exists()
