"""Numerical constants that several modules share, each declared once.

Rounding-level tolerances and a textbook line-search constant: none is a tuning choice of the
solve (those are the fields of :class:`margin_solver.core.strategy.Strategy`).
"""

__all__ = ["ARMIJO", "EIG_FLOOR", "PRUNE_RTOL", "SAME_TOKEN_RTOL"]

#: Armijo fraction of the predicted decrease a line-search step must achieve (the usual 1e-4,
#: Nocedal and Wright, section 3.1), in the descent on phi and the regularisation path's fits.
ARMIJO = 1e-4
#: Eigenvalues of a score-difference Gram matrix G below this fraction of the largest are
#: raised to it before G's ellipsoid of reachable scores is used: the raised G' >= G holds the
#: computed G's ellipsoid, so rounding cannot cut a reachable score difference off (the
#: Lagrangian and soft-selection finite-R bounds).
EIG_FLOOR = 1e-12
#: A branch-and-bound node is pruned when its bound is within this relative slack of the
#: incumbent (rounding of the node SVMs' norms, far below any gap a user sees).
PRUNE_RTOL = 1e-12
#: Token differences with squared length below this fraction of the mean squared token norm
#: are identical tokens: both get the same score for every p, so the choice between them is
#: irrelevant and the constraint is dropped instead of making an attention SVM infeasible.
SAME_TOKEN_RTOL = 1e-12
