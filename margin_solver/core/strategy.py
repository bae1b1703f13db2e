"""The strategy table: every gate, budget and tuning number of the P_R solve in one place.

:class:`Strategy` is a frozen dataclass; :data:`DEFAULT_STRATEGY` holds the defaults that
:func:`margin_solver.minnorm.solve.solve_min_norm` uses. Its ``options=`` mapping may change
any field (:func:`strategy_from`: unknown keys and bad values raise
:class:`~margin_solver.core.validation.InvalidInputError`); the validated, frozen object is then
passed down to the descent, the search and the polish, which read their numbers from it and
not from module globals. Each field's comment names the entry of docs/decisions.md ("The
strategy table") that chose its value, with the measurement.

It lives in ``core`` because the layers that read it (``descent``, ``minnorm``) sit above each
other and the lower one must not import the upper (docs/architecture.md). Rounding-level
tolerances that are not tuning choices stay next to the numerics
(:mod:`margin_solver.core.tolerances`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from margin_solver.core.validation import InvalidInputError

__all__ = ["DEFAULT_STRATEGY", "FAMILIES", "FIRST_STARTS", "Strategy", "strategy_from"]

#: Every family of further starts the search knows (``"screen"``: a final stage, not a turn).
FAMILIES = ("selection", "realisable", "continuation", "random", "screen")

#: The deterministic first starts of the solve that a caller may leave out (``first_starts``;
#: ``"lb_selection"`` and ``"p0"`` run whenever their point exists).
FIRST_STARTS = ("zero", "first_step", "hard_selection")

#: v-step engines the descent may start from (the Gram engines; "primal" needs the features).
DESCENT_ENGINES = ("ldp", "active", "ecos", "clarabel")

# Options accepted before and since removed with their mechanism: a DeprecationWarning, ignored.
_REMOVED = {
    "newton": "Newton steps in the score space were removed (docs/decisions.md, "
    '"Newton steps removed"); options["newton"] is ignored.'
}


def _count(low: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
        return None if ok else f"an integer >= {low}"

    return check


def _real(low: float, high: float = math.inf) -> Callable[[Any], str | None]:
    """A finite number in the open interval (low, high)."""

    def check(value: Any) -> str | None:
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and low < value < high
        )
        return None if ok else f"a finite number in ({low:g}, {high:g})"

    return check


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "True or False"


def _choice(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"one of {list(choices)}"

    return check


def _names(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    """A tuple of distinct names of ``choices``."""

    def check(value: Any) -> str | None:
        ok = (
            isinstance(value, tuple)
            and all(isinstance(v, str) and v in choices for v in value)
            and len(set(value)) == len(value)
        )
        return None if ok else f"a tuple of distinct names of {list(choices)}"

    return check


def _some_names(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    """A non-empty tuple of distinct names of ``choices``."""
    names = _names(choices)

    def check(value: Any) -> str | None:
        ok = names(value) is None and len(value) > 0
        return None if ok else f"a non-empty tuple of distinct names of {list(choices)}"

    return check


def _weights(length: int | None) -> Callable[[Any], str | None]:
    """A non-empty tuple of positive finite numbers (of ``length`` when given)."""

    def check(value: Any) -> str | None:
        ok = (
            isinstance(value, tuple)
            and len(value) > 0
            and (length is None or len(value) == length)
            and all(_real(0.0)(v) is None for v in value)
        )
        size = "a non-empty tuple" if length is None else f"a tuple of {length}"
        return None if ok else f"{size} of positive finite numbers"

    return check


def _entry(default: Any, check: Callable[[Any], str | None]) -> Any:
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True)
class Strategy:
    """Every gate, budget and tuning number of :func:`~margin_solver.minnorm.solve.solve_min_norm`.

    Build one with :func:`strategy_from` (or ``dataclasses.replace(DEFAULT_STRATEGY, ...)``);
    every value is checked at construction. The comments name the docs/decisions.md entry
    behind each value.
    """

    # -- the descent from one start (margin_solver.descent.alternating.descend)
    # "Quasi-Newton descent": L-BFGS pairs kept (0: projected-gradient directions only)
    memory: int = _entry(30, _count(0))
    # "Quasi-Newton descent": Barzilai-Borwein trial lengths of projected-gradient steps
    use_bb: bool = _entry(True, _flag)
    # "Quasi-Newton descent": accepted steps over which the rtol test measures phi's decrease
    window: int = _entry(10, _count(1))
    # "The v-step engine" and "The active engine by default": the engine tried first (the
    # others stand in when it fails), for the descent's v-steps, the attention SVMs and the
    # search's selection SVMs
    vstep_solver: str = _entry("active", _choice(DESCENT_ENGINES))
    # "Support-aware SQP after 250 quasi-Newton steps": SQP steps on
    sqp: bool = _entry(True, _flag)
    # "Support-aware SQP after 250 quasi-Newton steps": quasi-Newton steps before them
    sqp_after: int = _entry(250, _count(0))
    # "Support-aware SQP after 250 quasi-Newton steps": trials of one SQP step
    sqp_trials: int = _entry(40, _count(1))

    # -- the first starts (margin_solver.minnorm.solve)
    # "The first starts": the deterministic starts descended first; a selection start costs
    # an attention SVM with n (T - 1) constraints
    first_starts: tuple[str, ...] = _entry(FIRST_STARTS, _some_names(FIRST_STARTS))

    # -- when the search runs (margin_solver.minnorm.solve)
    # "When the search runs": first starts' finite norms further apart than this trigger it
    spread_rtol: float = _entry(0.05, _real(0.0))
    # "When the search runs": turns of the families when it runs (search_starts=None)
    auto_search_starts: int = _entry(8, _count(0))
    # "When the search runs": relative gap to LB at which the search stops
    search_gap_rtol: float = _entry(1e-9, _real(0.0, 1.0))
    # "The search's guide by count": SVMs of LB's branch-and-bound before an uncertified search
    search_bound_nodes: int = _entry(3000, _count(0))
    # "The search's guide by count": its SVMs per first-start v-step solve above the size gate
    search_bound_nodes_per_eval: float = _entry(0.25, _real(0.0))
    # "The search's guide by count": samples up to which the guide keeps its full budget
    screen_min_samples: int = _entry(32, _count(0))

    # -- the families of further starts (margin_solver.minnorm.search)
    # "Search families": the families taken in turn, then the screen
    search_ideas: tuple[str, ...] = _entry(
        ("selection", "realisable", "continuation", "random", "screen"), _names(FAMILIES)
    )
    # "Retiring a family": a family ending feasible this far above the best is retired
    retire_rtol: float = _entry(0.3, _real(0.0))
    # "Retiring a family": families that are never retired
    never_retired: tuple[str, ...] = _entry(("selection", "random"), _names(FAMILIES))
    # "The selection family": value vectors in a row without a new selection before it stops
    selection_misses: int = _entry(20, _count(0))
    # "The selection family": the same when attention is nearly hard
    hard_selection_misses: int = _entry(5, _count(0))
    # "The selection family": ridge (relative) of the nearest-realisable-selection SVM
    nearest_ridge: float = _entry(1e-3, _real(0.0))
    # "The realisable family": realisability problems plus SVMs of its branch-and-bound
    realisable_work: int = _entry(10000, _count(1))
    # "The realisable family": samples above which it is skipped
    realisable_max_samples: int = _entry(32, _count(0))
    # "Continuation in R": radius growth factor between stages
    continuation_radius_factor: float = _entry(10.0, _real(1.0))
    # "Continuation in R": p-steps per radius before the last
    continuation_stage_iter: int = _entry(50, _count(1))
    # "Continuation in R": first and last penalty weight (relative to the mean squared token norm)
    continuation_eps: tuple[float, ...] = _entry((1e-2, 1e-6), _weights(2))
    # "Continuation in R": penalty weights tried in turn when the exact descent cannot start
    rescue_eps: tuple[float, ...] = _entry((1e-2, 1e-4, 1e-6), _weights(None))

    # -- what would help when no start interpolates (margin_solver.minnorm.radius)
    # "Radius continuation": start directions the continuation in R tries
    radius_directions: int = _entry(6, _count(1))
    # "Radius continuation": doublings of R (the largest radius tried is 2^k R)
    radius_doublings: int = _entry(12, _count(0))
    # "Radius continuation": geometric bisections between the last two radii
    radius_bisections: int = _entry(8, _count(0))

    # -- the screen (margin_solver.minnorm.search, screen_k)
    # "The screen": best realisable selections whose realisations it tries
    screen_selections: int = _entry(48, _count(0))
    # "The screen": random starts it tries
    screen_random: int = _entry(32, _count(0))
    # "The screen": p-steps of each screened start before the ranking
    screen_iter: int = _entry(40, _count(1))
    # "The screen": screened starts descended to the end
    screen_top: int = _entry(4, _count(0))
    # "The screen": realisability problems plus SVMs of its branch-and-bound
    screen_work: int = _entry(2000, _count(1))
    # "The screen": samples above which it is skipped
    screen_max_samples: int = _entry(48, _count(0))

    # -- nearly hard attention (margin_solver.minnorm.search, hard_polish)
    # "Nearly hard attention": attention a sample may leave off its top token
    hard_leak: float = _entry(1e-3, _real(0.0, 1.0))
    # "Nearly hard attention": a point this close (relative) to its selection's SVM norm is settled
    hard_rtol: float = _entry(1e-4, _real(0.0, 1.0))
    # "Nearly hard attention": dual bound share of the best norm above which the SVM is solved
    hard_svm_ratio: float = _entry(0.8, _real(0.0, 1.0))
    # "Nearly hard attention": trust-region contractions in a row before the polish stops
    polish_max_fails: int = _entry(6, _count(1))
    # "Nearly hard attention": first step weight of the polish, relative to ||v||^2 / R^2
    polish_lam0: float = _entry(0.1, _real(0.0))

    # -- the lower bound's budgets, in SVMs (margin_solver.bounds.lower.global_lower_bound)
    # "LB": SVMs of the hard-selection branch-and-bound up to lb_full_samples samples
    lb_nodes: int = _entry(20_000, _count(1))
    # "LB": samples above which LB's budget shrinks as 1 / n
    lb_full_samples: int = _entry(100, _count(1))
    # "LB's aggregated lift": projected-gradient steps on the weights of the aggregated lift
    # at each node (any weights give a valid bound; more steps a slightly larger one)
    lb_lift_iterations: int = _entry(5, _count(1))
    # "Score boxes": SVMs of the finite-R search over score boxes up to score_box_full_samples
    score_box_nodes: int = _entry(30_000, _count(1))
    # "Score boxes": samples above which the score-box budget shrinks as 1 / n
    score_box_full_samples: int = _entry(20, _count(1))
    # "Boxes of p": SVMs of the finite-R search over boxes of p (scores of rank <= 3)
    p_box_nodes: int = _entry(20_000, _count(1))
    # "Score boxes": SVMs without a rise of the proven bound after which a box search stops
    bound_stall_nodes: int = _entry(2000, _count(1))
    # "Boxes of p": largest rank of the reachable scores for which the finite-R bound searches
    # boxes of p itself
    p_box_max_rank: int = _entry(3, _count(0))

    # -- the finite-R bound's relaxations (margin_solver.bounds.lower, _finite_r_stages)
    # "The linearised bound": tokens n T up to which it runs (each of its steps
    # eigen-decomposes (nT)-square matrices)
    linearised_max_tokens: int = _entry(400, _count(0))
    # "The Lagrangian SDP": samples up to which it runs (T = 2; at most sdpbound.MAX_SAMPLES,
    # the largest n it is set up for)
    lagrangian_max_samples: int = _entry(60, _count(0))
    # "The Lagrangian bound by SCS above n = 30": samples up to which Clarabel solves it, SCS
    # above
    lagrangian_clarabel_max_samples: int = _entry(30, _count(0))
    # "The Lagrangian SDP": iterations of SCS (ADMM; Clarabel keeps its own 200
    # interior-point iterations)
    lagrangian_scs_iters: int = _entry(2500, _count(1))
    # "Finite-R certificate: the Lagrangian and linearised stages": tangent lines of h per
    # sample and spacing
    lagrangian_tangents: int = _entry(12, _count(1))
    # "The Lagrangian stage's cap": SVMs of the search for a point of its relaxation that
    # shows it cannot raise the bound (then it is not run)
    lagrangian_cap_svms: int = _entry(100, _count(1))
    # "The Lagrangian stage under a time limit": the SDP solver's set-up (SCS's factorisation,
    # which nothing interrupts) predicted at this many times cvxpy's compilation in the same
    # call (measured 0.97-3.97 at n = 30-60). A quotient of two times of one call: it only
    # decides when a caller's time limit acts, never what runs without one.
    lagrangian_setup_ratio: float = _entry(4.0, _real(0.0))
    # "The soft-selection stage": score differences n (T - 1) up to which it runs (one cone
    # program of n margins and n (T - 1) tangent sets per leaf)
    soft_leaf_max_differences: int = _entry(300, _count(0))
    # "The soft-selection stage": leaves (completed nodes LB cannot prune at the target)
    # bounded before the stage gives up
    soft_leaf_max_leaves: int = _entry(4, _count(1))
    # "The soft-selection stage": tangent lines of each sigmoid envelope in the cone program
    # (they choose its multipliers only; the bound uses the envelope itself)
    soft_leaf_tangents: int = _entry(61, _count(2))
    # "The soft-selection stage": projected-gradient steps on the inner minimum (they choose
    # the linearisation point only)
    soft_leaf_inner_steps: int = _entry(300, _count(0))

    def __post_init__(self) -> None:
        for entry in fields(self):
            value = getattr(self, entry.name)
            if isinstance(value, list):  # a JSON round trip gives lists; the table keeps tuples
                value = tuple(value)
                object.__setattr__(self, entry.name, value)
            wanted = entry.metadata["check"](value)
            if wanted is not None:
                raise InvalidInputError(f"options[{entry.name!r}] must be {wanted}, got {value!r}.")
        if self.continuation_eps[0] < self.continuation_eps[1]:
            raise InvalidInputError(
                "options['continuation_eps'] must be (first, last) with first >= last, "
                f"got {self.continuation_eps!r}."
            )

    def descent_options(self) -> dict[str, Any]:
        """The descent's fields, as keywords of
        :func:`margin_solver.descent.alternating.descend`."""
        keys = ("memory", "use_bb", "window", "vstep_solver", "sqp", "sqp_after")
        return {key: getattr(self, key) for key in keys}


#: The defaults of :func:`margin_solver.minnorm.solve.solve_min_norm`.
DEFAULT_STRATEGY = Strategy()


def strategy_from(options: Mapping[str, Any] | None, name: str = "options") -> Strategy:
    """:data:`DEFAULT_STRATEGY` with the fields ``options`` names changed, every value checked.

    A key of an option removed with its mechanism (``"newton"``) warns with a
    DeprecationWarning and is ignored.

    Raises
    ------
    InvalidInputError
        When ``options`` is not a mapping, names a key that is not a field (the message lists
        the valid ones), or gives a bad value (the message says what is expected).

    Examples
    --------
    >>> strategy_from({"screen_top": 2}).screen_top
    2
    """
    if options is None:
        return DEFAULT_STRATEGY
    if not isinstance(options, Mapping):
        raise InvalidInputError(f"{name} must be a mapping (dict), got {type(options).__name__}.")
    valid = [entry.name for entry in fields(Strategy)]
    unknown = sorted(str(k) for k in options if k not in valid and k not in _REMOVED)
    if unknown:
        raise InvalidInputError(f"Unknown {name} key(s) {unknown}; valid keys: {', '.join(valid)}.")
    for key in options:
        if key in _REMOVED:
            warnings.warn(_REMOVED[key], DeprecationWarning, stacklevel=3)
    return replace(DEFAULT_STRATEGY, **{k: v for k, v in options.items() if k in valid})


def deprecated_constants(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that serves the old module constants ``names`` (old
    name -> field of :class:`Strategy`) from :data:`DEFAULT_STRATEGY`, with a DeprecationWarning
    that says which ``options`` key changes it."""

    def __getattr__(attribute: str) -> Any:
        if attribute in names:
            key = names[attribute]
            value = getattr(DEFAULT_STRATEGY, key)
            if callable(value):  # a group of fields, e.g. the descent's
                value, how = value(), f"Strategy().{key}(); options= change its fields"
            else:
                how = f"Strategy().{key}; change it with options={{{key!r}: ...}}"
            warnings.warn(
                f"{module}.{attribute} is deprecated: the value is {how} "
                "(margin_solver.core.strategy).",
                DeprecationWarning,
                stacklevel=2,
            )
            return value
        raise AttributeError(f"module {module!r} has no attribute {attribute!r}")

    return __getattr__


# Solves (pivots: one add or drop of a sample, or one factorisation of the start) the active-set
# v-step engine ("active", margin_solver.svm.vstep._solve_active) may spend per sample before
# it leaves the problem to the LDP. Lawson and Hanson's method needs about one per support
# vector from a cold start; the budget only stops cycling on degenerate input, as the LDP's
# own (50 n iterations of scipy's NNLS) does (docs/decisions.md, "The active-set v-step").
VSTEP_ACTIVE_PIVOTS_PER_SAMPLE = 10
