"""Command-line interface: ``margin-solver VERB ...``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``margin-solver`` command line and return its exit status."""
    parser = argparse.ArgumentParser(prog="margin-solver")
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
