"""One-off measurements behind the numbers in docs/benchmarks.md and docs/decisions.md.

Each module has ``main(argv)`` and runs as ``python -m margin_solver.bench.measure.<name>``.
"""
