"""The min-norm interpolator P_R: the solve, its search for further starts, several heads.

Modules: ``solve`` (:func:`solve_min_norm` and :class:`MinNormResult`), ``search`` (further
starts when the first ones leave a gap), ``multihead`` (H heads).
"""

from margin_solver._compat import forward


def __getattr__(name: str) -> object:
    # ``margin_solver.minnorm`` was the module now at ``margin_solver.minnorm.solve``
    return forward("minnorm", "solve", name)
