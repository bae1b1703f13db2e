"""Certified lower bounds on P_R: the relaxations and their branch-and-bounds.

Modules: ``lower`` (:func:`global_lower_bound`: the hard-selection bound LB and the finite-R
bound staged over the others), ``linbound`` (attention linearised at p = 0), ``rbounds``
(boxes of score differences), ``sdpbound`` (the Lagrangian, S-lemma bound for T = 2),
``realisable`` (which token selections some p realises).
"""

from margin_solver._compat import forward


def __getattr__(name: str) -> object:
    # ``margin_solver.bounds`` was the module now at ``margin_solver.bounds.lower``
    return forward("bounds", "lower", name)
