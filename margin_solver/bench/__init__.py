"""The experiment framework: sweeps, studies, figures and the demo, built on the library.

Everything here uses the solver library (``margin_solver``) and nothing in the library uses
this package (``tests/test_layers.py`` checks the direction). Modules:

- :mod:`~margin_solver.bench.methods`: the sweep's method registry (``SWEEP_METHODS``);
- :mod:`~margin_solver.bench.resultlog`: the crash-safe, resumable CSV log;
- :mod:`~margin_solver.bench.sweeps`: grids of cells, per-cell seeds, joblib or Dask;
- :mod:`~margin_solver.bench.studies`: the benchmark studies behind ``margin-solver bench``;
- :mod:`~margin_solver.bench.trajectory_study`: GD trajectories against the min-norm solution;
- :mod:`~margin_solver.bench.measure.speed_report`: runs the speed benchmarks
  :mod:`~margin_solver.bench.measure.vstep_speed`,
  :mod:`~margin_solver.bench.measure.minnorm_scaling` and
  :mod:`~margin_solver.bench.measure.gd_speed` in-process and gathers their output;
- :mod:`~margin_solver.bench.measure.gd_call`, :mod:`~margin_solver.bench.measure.sweep_speed`: a
  whole short GD call against one torch step; sweep throughput per backend (issue 18);
- :mod:`~margin_solver.bench.measure.check_threshold`,
  :mod:`~margin_solver.bench.measure.gd_defaults`: the measurements behind the checker's kappa band
  and GD's default step sizes;
- :mod:`~margin_solver.bench.measure.search_quality`: the min-norm solver's answer against a patient
  independent search on generated tokens;
- :mod:`~margin_solver.bench.measure.certificate_frontier`: how far the certified lower bound
  reaches (finite R, T >= 3, large n);
- :mod:`~margin_solver.bench.provenance`: the date, commit, machine and library versions every
  measurement records in its results file;
- :mod:`~margin_solver.bench.page`: renders docs/benchmarks.md's tables from those files;
- :mod:`~margin_solver.bench.plots`, :mod:`~margin_solver.bench.study_plots`: figures, all
  written by :func:`~margin_solver.bench.plots.save_figure` in the format of the file suffix;
- :mod:`~margin_solver.bench.style`: their one style (``with figure_style():``);
- :mod:`~margin_solver.bench.realdata`: digits and local MNIST cut into tokens;
- :mod:`~margin_solver.bench.demo`: the job behind ``make demo``.
"""
