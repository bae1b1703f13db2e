"""single_threaded_blas limits every loaded BLAS to one thread, restores it, and lists the
libraries again after new modules were imported."""

import sys

from margin_solver.core import blas
from margin_solver.core.blas import blas_threads, single_threaded_blas


def test_the_limit_holds_inside_and_is_restored_after():
    before = blas_threads()
    with single_threaded_blas():
        assert blas_threads() == 1
        with single_threaded_blas():
            assert blas_threads() == 1
        assert blas_threads() == 1
    assert blas_threads() == before >= 1


def test_libraries_are_listed_again_after_an_import(monkeypatch):
    with single_threaded_blas():
        pass
    listed = blas._pools
    with single_threaded_blas():
        pass
    assert blas._pools is listed  # nothing imported: the same list
    monkeypatch.setitem(sys.modules, "margin_solver_test_new_module", object())
    with single_threaded_blas():
        assert blas_threads() == 1
    assert blas._pools is not listed
