"""BLAS threading for loops of many small dense problems.

The min-norm solver and the branch-and-bound solve hundreds to thousands of n x n problems
(eigendecompositions, NNLS). For such sizes a multi-threaded BLAS only adds synchronisation,
and on a shared machine it is much worse: measured here, ``numpy.linalg.eigh`` of a 50 x 50
matrix took 38 ms with 2 OpenBLAS threads under load versus 0.7 ms with one
(``docs/benchmarks.md``). The one large product (the token Gram matrix) is computed outside
this context and keeps every thread.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from threadpoolctl import threadpool_limits

__all__ = ["single_threaded_blas"]


def single_threaded_blas() -> AbstractContextManager:
    """Context manager limiting BLAS/LAPACK to one thread (OpenMP pools are left alone)."""
    return threadpool_limits(limits=1, user_api="blas")
