"""``margin-solver sweep``: run a user-defined grid with the sweep engine."""

from __future__ import annotations

import argparse

from margin_solver.cli import EXIT_CAVEAT, EXIT_OK, CLIError

NAME = "sweep"
HELP = "run a grid over n, SNR or kappa, d, T, eta, seeds, methods and heads; resumable CSV output"
EXAMPLE = (
    "margin-solver sweep --n 20 40 --kappa 0.5 4 --d 2000 --eta 0.1 --seeds 3 "
    "--methods min-norm gd-two-step --out results/sweep.csv"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Grid axes, shared settings and the execution backend."""
    from margin_solver.bench.methods import SWEEP_METHODS
    from margin_solver.bench.sweeps import DATA_SOURCES

    parser.add_argument("--n", type=int, nargs="+", required=True, help="training sample sizes")
    strength = parser.add_mutually_exclusive_group()
    strength.add_argument("--snr", type=float, nargs="+", help="SNR values rho / (sigma sqrt(d))")
    strength.add_argument(
        "--kappa", type=float, nargs="+", help="kappa = n SNR^2 values (SNR = sqrt(kappa / n))"
    )
    parser.add_argument(
        "--d", type=int, nargs="+", help="token dimensions (image data: from --data-options)"
    )
    parser.add_argument(
        "--T",
        type=int,
        nargs="+",
        help="tokens per sample (default 2; image data: from --data-options)",
    )
    parser.add_argument(
        "--eta", type=float, nargs="+", default=[0.1], help="label-flip rates (default 0.1)"
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="repetitions per grid point (default 1)"
    )
    parser.add_argument(
        "--heads",
        type=int,
        nargs="+",
        default=[1],
        help="attention heads H of the fitted model (default 1); cells differing only in H "
        "see the same samples; uniform-svm takes H = 1 only",
    )
    parser.add_argument(
        "--methods", nargs="+", required=True, help=f"methods: {', '.join(sorted(SWEEP_METHODS))}"
    )
    parser.add_argument(
        "--data",
        default="paper",
        metavar="SOURCE",
        help=f"data source: {', '.join(sorted(DATA_SOURCES))} (default paper), or a dataset "
        "file (.npz) or directory: each cell draws n of its samples with its seed, flips "
        "labels with rate eta and tests on the rest",
    )
    parser.add_argument(
        "--data-options",
        default="{}",
        metavar="JSON",
        help="data-source options as JSON, e.g. '{\"sigma\": 2.0}' or digits patching",
    )
    parser.add_argument(
        "--method-options",
        default="{}",
        metavar="JSON",
        help='per-method options as JSON, e.g. \'{"gd-long": {"steps": 300}}\'',
    )
    parser.add_argument(
        "--n-test", type=int, default=1000, help="test samples per cell, >= 2 (default 1000)"
    )
    parser.add_argument(
        "--sweep-seed", type=int, default=0, help="root seed of every random stream (default 0)"
    )
    parser.add_argument(
        "--out", required=True, help="results CSV (resumed if it exists; JSON sidecar beside it)"
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="run again the grid's cells whose row in --out failed (their rows are replaced)",
    )
    add_backend_arguments(parser)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--jobs``, ``--scheduler`` and ``--no-progress``, shared with ``bench``."""
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="local processes: this one and jobs - 1 workers (default: all cores)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="run on this Dask distributed scheduler (needs margin-solver[dask])",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _json_option(text: str, name: str) -> dict:
    from margin_solver.core.validation import parse_json_object

    return parse_json_object(text, name)


def run(args: argparse.Namespace) -> int:
    """Build the grid, check the data options, run it and print one summary line.

    SIGTERM (``kill``) stops the sweep as Ctrl-C does: the rows written stay, the workers
    end, the sidecar records the run as interrupted and a summary goes to stderr.
    """
    import signal
    import threading

    from margin_solver.bench.sweeps import SweepConfig, SweepGrid, run_sweep

    config = SweepConfig(
        sweep_seed=args.sweep_seed,
        n_test=args.n_test,
        method_options=_json_option(args.method_options, "--method-options"),
        data_options=_json_option(args.data_options, "--data-options"),
    )
    T, d = _token_shape(args, config.data_options)
    grid = SweepGrid(
        n=args.n,
        d=d,
        methods=args.methods,
        snr=args.snr,
        kappa=args.kappa,
        T=T,
        eta=args.eta,
        seeds=args.seeds,
        data=args.data,
        heads=args.heads,
    )
    started = _now()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        result = run_sweep(
            grid,
            args.out,
            config,
            jobs=args.jobs,
            scheduler=args.scheduler,
            progress=not args.no_progress,
            retry_failed=args.retry_failed,
        )
    except KeyboardInterrupt:
        _print_interrupted(args.out, started)
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    print(f"{result.path}: {result.message} ({result.seconds:.1f} s)")
    return EXIT_OK if result.success else EXIT_CAVEAT  # some cells failed: rows say which


def _token_shape(args: argparse.Namespace, options: dict) -> tuple[list[int], list[int]]:
    """``(T, d)`` axes: as given, else 2 tokens for paper data, else the image options' shape."""
    if args.data == "paper":
        if args.snr is None and args.kappa is None:
            raise CLIError("give --snr or --kappa for synthetic data")
        if args.d is None:
            raise CLIError("give --d for synthetic data")
        return args.T or [2], args.d
    if args.snr is not None or args.kappa is not None:
        raise CLIError(f"--snr and --kappa are for synthetic data, not --data {args.data}")
    from margin_solver.bench import realdata
    from margin_solver.bench.sweeps import DATA_SOURCES, data_source, file_shape

    if args.data not in DATA_SOURCES:
        data_source(args.data)  # an unknown name: one line, exit 2
        _, T, d = file_shape(args.data)
        if options:
            raise CLIError(f"--data-options are for digits and mnist, not the file {args.data}")
        if (args.T and args.T != [T]) or (args.d and args.d != [d]):
            raise CLIError(f"{args.data} holds T={T}, d={d}; leave out --T and --d")
        return [T], [d]

    try:
        T, d = getattr(realdata, f"{args.data}_shape")(**options)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise CLIError(f"--data-options do not give a token shape for {args.data}: {exc}") from None
    return args.T or [T], args.d or [d]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _print_interrupted(out: str, started: str) -> None:
    """One line on stderr with what the interrupted run (started at ``started`` or later)
    did, from its record in the sidecar."""
    import json
    import sys

    from margin_solver.bench.sweeps import sidecar_path

    try:
        runs = json.loads(sidecar_path(out).read_text(encoding="utf-8"))["runs"]
        last = runs[-1]
        if last["state"] != "interrupted" or last["started"] < started:
            return  # interrupted before this run was recorded
        print(
            f"{out}: interrupted after {last['n_run']} cells run ({last['n_failed']} failed), "
            f"{last['n_skipped']} already done ({last['seconds']:.1f} s); every finished row "
            "is in the file: run the same command again to resume",
            file=sys.stderr,
        )
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        pass  # interrupted before the sidecar recorded the run: nothing to summarise
