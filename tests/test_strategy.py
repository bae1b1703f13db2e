"""The strategy table (margin_solver.core.strategy): one source of defaults, changed through
``solve_min_norm(..., options=...)``, checked at the door."""

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from margin_solver.core.data import PaperDistribution
from margin_solver.core.kernel import TokenGram
from margin_solver.core.results import ConvergenceWarning
from margin_solver.core.strategy import DEFAULT_STRATEGY, Strategy, strategy_from
from margin_solver.core.validation import InvalidInputError
from margin_solver.descent.alternating import DenseForm, descend
from margin_solver.minnorm.search import search_starts
from margin_solver.minnorm.solve import solve_min_norm

# the ConvergenceWarnings of non-optimal statuses are what these tests provoke; a test that
# checks one uses pytest.warns (docs/statuses.md)
pytestmark = pytest.mark.filterwarnings("ignore::margin_solver.core.results.ConvergenceWarning")


def test_the_table_is_frozen_and_descend_has_its_defaults():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_STRATEGY.screen_top = 2
    assert strategy_from(None) is DEFAULT_STRATEGY
    # descend called with no knobs is the solve's descent: SQP after 250 quasi-Newton steps
    ds = PaperDistribution(d=30, T=3, snr=0.5, eta=0.1).sample(8, seed=4)
    X, y = ds.X, ds.y.astype(float)
    form = DenseForm(X)
    own = descend(form, y, form.zeros(), 1.0, max_iter=30)
    spelled = descend(form, y, form.zeros(), 1.0, max_iter=30, **DEFAULT_STRATEGY.descent_options())
    assert (own.norm, own.n_iter, own.n_eval) == (spelled.norm, spelled.n_iter, spelled.n_eval)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"screen_topp": 2}, r"Unknown options key\(s\) \['screen_topp'\]; valid keys: memory"),
        ({"screen_top": -1}, r"options\['screen_top'\] must be an integer >= 0, got -1"),
        ({"screen_iter": 2.5}, r"options\['screen_iter'\] must be an integer >= 1"),
        ({"spread_rtol": math.nan}, r"options\['spread_rtol'\] must be a finite number"),
        ({"hard_leak": 1.0}, r"options\['hard_leak'\] must be a finite number in \(0, 1\)"),
        ({"search_ideas": ("selection", "hop")}, r"options\['search_ideas'\] must be a tuple"),
        ({"rescue_eps": ()}, r"options\['rescue_eps'\] must be a non-empty tuple"),
        ({"continuation_eps": (1e-6, 1e-2)}, r"first >= last"),
        ({"sqp": "yes"}, r"options\['sqp'\] must be True or False"),
    ],
)
def test_unknown_keys_and_bad_values_raise_one_line_messages(options, match):
    X = np.random.default_rng(0).standard_normal((4, 2, 3))
    with pytest.raises(InvalidInputError, match=match) as raised:
        solve_min_norm(X, [1, -1, 1, -1], R=1.0, options=options)
    assert "\n" not in str(raised.value)


def test_first_starts_choose_the_deterministic_starts():
    ds = PaperDistribution(d=40, T=3, snr=0.5, eta=0.0).sample(8, seed=2)
    every = solve_min_norm(ds, R=1.0, search_starts=0, n_random_starts=0)
    assert {"zero", "first_step"} <= set(every.start_norms)
    zero = solve_min_norm(
        ds, R=1.0, search_starts=0, n_random_starts=0, options={"first_starts": ["zero"]}
    )
    assert list(zero.start_norms) == ["zero"]
    assert zero.start_norms["zero"] == every.start_norms["zero"]
    with pytest.raises(InvalidInputError, match=r"first_starts'\] must be a non-empty tuple"):
        solve_min_norm(ds, R=1.0, options={"first_starts": ()})


def test_the_removed_newton_option_warns_and_changes_nothing():
    ds = PaperDistribution(d=40, snr=0.5, eta=0.0).sample(6, seed=1)
    plain = solve_min_norm(ds, R=1.0, search_starts=0)
    with pytest.warns(DeprecationWarning, match="Newton steps"):
        old = solve_min_norm(ds, R=1.0, search_starts=0, options={"newton": True})
    assert old.norm == plain.norm and old.start_norms == plain.start_norms


def test_the_old_module_constants_warn_and_give_the_table_values():
    import margin_solver.minnorm.search as search
    import margin_solver.minnorm.solve as solve

    with pytest.warns(DeprecationWarning, match=r"options=\{'screen_top'"):
        assert DEFAULT_STRATEGY.screen_top == search.SCREEN_TOP
    with pytest.warns(DeprecationWarning, match="spread_rtol"):
        assert DEFAULT_STRATEGY.spread_rtol == solve.SPREAD_RTOL


def _screen_only(strategy: Strategy) -> list:
    """The runs of the screen alone (no family turns) on a small Gaussian instance."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((8, 2, 40))
    y = np.where(rng.standard_normal(8) > 0, 1.0, -1.0)
    return list(
        search_starts(
            DenseForm(X),
            TokenGram(X).H,
            y,
            2,
            1.0,
            None,
            ideas=("screen",),
            options={"max_iter": 30},
            rng=np.random.default_rng(0),
            strategy=strategy,
        )
    )


def test_a_smaller_screen_does_less_work():
    # the screen's work: its final descents (screen_top) and the short descents before them
    default = _screen_only(DEFAULT_STRATEGY)
    smaller = _screen_only(strategy_from({"screen_top": 1, "screen_random": 4}))
    assert len(default) == DEFAULT_STRATEGY.screen_top and len(smaller) == 1
    assert sum(run.n_eval for _, run in smaller) < sum(run.n_eval for _, run in default)


def test_options_reach_the_solve_and_change_its_work():
    # the search's families through options: the screen left out runs none of its starts
    from margin_solver.bench.measure.search_quality import make_instance

    X, y = make_instance("integer", 8, 3, 3, 20261287)
    R = 10 / math.sqrt(3)
    ideas = tuple(i for i in DEFAULT_STRATEGY.search_ideas if i != "screen")
    res = solve_min_norm(X, y, R=R, options={"search_ideas": ideas, "screen_top": 1})
    assert not any(name.startswith("screen_") for name in res.start_norms)
    fewer = solve_min_norm(X, y, R=R, options={"screen_top": 1})
    assert sum(name.startswith("screen_") for name in fewer.start_norms) == 1


def test_the_benchmark_ablates_through_options(tmp_path):
    # search_quality --ablate: one family set per run, through options=, no module patched
    import json

    from margin_solver.bench.measure import search_quality

    rows = [
        {"kind": "gaussian", "n": 6, "T": 2, "d": 3, "seed": 20261130, "R_sqrt_d": 1.0},
        {"kind": "integer", "n": 6, "T": 2, "d": 3, "seed": 20261131, "R_sqrt_d": 10.0},
    ]
    for row in rows:
        X, y = search_quality.make_instance(row["kind"], row["n"], row["T"], row["d"], row["seed"])
        R = row["R_sqrt_d"] / math.sqrt(row["d"])
        row["best_known"] = solve_min_norm(X, y, R=R).norm
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows}))
    table = search_quality.ablate(str(path), 2, [(), ("selection",)])
    assert "none (search off)" in table and "| selection |" in table
    assert DEFAULT_STRATEGY.search_ideas[0] == "selection"  # nothing was overwritten


def test_global_lower_bound_takes_the_same_options():
    from margin_solver.bounds.lower import global_lower_bound

    ds = PaperDistribution(d=40, snr=0.5, eta=0.0).sample(6, seed=1)
    with pytest.raises(InvalidInputError, match=r"Unknown options key\(s\) \['memroy'\]"):
        global_lower_bound(ds.X, ds.y, R=1.0, options={"memroy": 0})
    default = global_lower_bound(ds.X, ds.y, R=1.0)
    same = global_lower_bound(ds.X, ds.y, R=1.0, options={"memory": 30})
    assert same.value == default.value and same.incumbent == default.incumbent


def test_the_bounds_budgets_of_svms_are_fields_of_the_table():
    from margin_solver.bounds.lower import global_lower_bound

    ds = PaperDistribution(d=200, T=2, snr=0.3, eta=0.2).sample(24, seed=0)
    full = global_lower_bound(ds.X, ds.y, method="bnb")
    with pytest.warns(ConvergenceWarning):
        cut = global_lower_bound(ds.X, ds.y, method="bnb", options={"lb_nodes": 2})
    assert full.status == "optimal" and full.nodes > 3
    assert cut.status == "max_iter" and cut.nodes <= 3 and cut.value <= full.value
    # the finite-R box search stops after bound_stall_nodes SVMs without progress, and says so
    ds = PaperDistribution(d=200, T=2, snr=math.sqrt(0.4), eta=0.15).sample(10, seed=0)
    with pytest.warns(ConvergenceWarning):
        stalled = global_lower_bound(
            ds.X, ds.y, R=0.2, options={"bound_stall_nodes": 40, "lagrangian_cap_svms": 1}
        )
    assert stalled.status == "max_iter" and stalled.nodes < 100  # LB's, the cap's and 40 more
    assert "40 SVMs without progress" in stalled.message


def test_the_lagrangian_stage_is_ruled_by_the_table(tmp_path):
    # the size rule and SCS's iterations are fields: lagrangian_max_samples below n skips the
    # stage, and the certificate frontier's rows pass options= through to the bound
    from margin_solver.bench.measure.certificate_frontier import main

    def method(options: str | None, out: Path) -> str:
        argv = ["--study", "finite_r", "--n", "8", "--seeds", "0", "--R-scales", "1"]
        argv += ["--out", str(out)] + ([] if options is None else ["--options", options])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            main(argv)
        return json.loads(out.read_text())["rows"][0]["method"]

    assert "lagrangian" in method(None, tmp_path / "a.json")
    assert "lagrangian" not in method('{"lagrangian_max_samples": 7}', tmp_path / "b.json")
    with pytest.raises(InvalidInputError, match="lagrangian_scs_iters"):
        strategy_from({"lagrangian_scs_iters": 0})


@pytest.mark.parametrize(
    "gate, stage",
    [
        ("linearised_max_tokens", "linearised"),
        ("lagrangian_max_samples", "lagrangian"),
        ("p_box_max_rank", "p-boxes"),
    ],
)
def test_the_finite_r_stages_are_gated_by_the_table(gate, stage):
    # d = 2: the scores have rank 2, so every stage runs at the defaults; a gate of 0 skips one
    from margin_solver.bench.measure.search_quality import make_instance
    from margin_solver.bounds.lower import global_lower_bound

    X, y = make_instance("gaussian", 6, 2, 2, 5)
    budget = {"bound_stall_nodes": 50, "p_box_nodes": 200}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        every = global_lower_bound(X, y, R=3.0, gap_tol=1e-9, options=budget)
        gated = global_lower_bound(X, y, R=3.0, gap_tol=1e-9, options={**budget, gate: 0})
    assert stage in every.method.split("+") and stage not in gated.method.split("+")
