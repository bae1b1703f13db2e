"""BLAS threading for loops of many small dense problems.

The min-norm solver and the branch-and-bound solve hundreds to thousands of n x n problems
(eigendecompositions, NNLS). For such sizes a multi-threaded BLAS only adds synchronisation,
and on a shared machine it is much worse: measured here, ``numpy.linalg.eigh`` of a 50 x 50
matrix took 38 ms with 2 OpenBLAS threads under load versus 0.7 ms with one
(docs/decisions.md, "Single-threaded BLAS for the many small problems"). The one large
product (the token Gram matrix) is computed outside this context and keeps every thread.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager

from threadpoolctl import ThreadpoolController

__all__ = ["blas_threads", "single_threaded_blas"]

#: The loaded thread pools, and how many modules had been imported when they were listed.
_pools: tuple[int, ThreadpoolController] | None = None


def single_threaded_blas() -> AbstractContextManager:
    """Context manager limiting BLAS/LAPACK to one thread (OpenMP pools are left alone).

    Limits the BLAS libraries loaded when it is entered, as ``threadpoolctl.threadpool_limits``
    does; the list of libraries is kept between calls (listing them took 1.5 ms, more than
    many of the solves run inside) and made again after new modules were imported, since
    loading an extension module is what loads a new BLAS.
    """
    return _controller().limit(limits=1, user_api="blas")


def blas_threads() -> int:
    """The most threads a loaded BLAS library may use now (0 when none is loaded)."""
    return max(
        (pool["num_threads"] for pool in _controller().info() if pool["user_api"] == "blas"),
        default=0,
    )


def _controller() -> ThreadpoolController:
    global _pools
    if _pools is None or _pools[0] != len(sys.modules):
        _pools = (len(sys.modules), ThreadpoolController())
    return _pools[1]
