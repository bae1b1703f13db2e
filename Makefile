# Both targets build .venv from nothing with the system python3, then do their job.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Stamp files make re-runs skip pip when pyproject.toml has not changed.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed

# The suite reads scikit-learn's bundled digits and can use a Dask cluster (--scheduler).
$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[bench,dask]"
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m margin_solver demo --out results

test: $(VENV)/.installed-test
	$(PY) -m pytest -q

# ruff's checks (the rule set in pyproject.toml) and its formatting, changing nothing.
lint: $(VENV)/.installed-test
	$(PY) -m ruff check margin_solver tests
	$(PY) -m ruff format --check margin_solver tests

# Full benchmark suite (all studies, full grids) into results/; resumes an interrupted run.
bench: $(VENV)/.installed-bench
	$(PY) -m margin_solver bench --out results

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis .ruff_cache
