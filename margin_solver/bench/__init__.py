"""The experiment framework: sweeps, studies, figures and the demo, built on the library.

Everything here uses the solver library (``margin_solver``) and nothing in the library uses
this package (``tests/test_layers.py`` checks the direction). Modules:

- :mod:`~margin_solver.bench.methods`: the sweep's method registry (``SWEEP_METHODS``);
- :mod:`~margin_solver.bench.resultlog`: the crash-safe, resumable CSV log;
- :mod:`~margin_solver.bench.sweeps`: grids of cells, per-cell seeds, joblib or Dask;
- :mod:`~margin_solver.bench.studies`: the benchmark studies behind ``margin-solver bench``;
- :mod:`~margin_solver.bench.trajectory_study`, :mod:`~margin_solver.bench.speed_report`:
  the GD trajectory study and the solver-speed benchmarks;
- :mod:`~margin_solver.bench.plots`, :mod:`~margin_solver.bench.study_plots`: figures;
- :mod:`~margin_solver.bench.realdata`: digits and local MNIST cut into tokens;
- :mod:`~margin_solver.bench.demo`: the job behind ``make demo``.
"""
