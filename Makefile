# complexformer: `make run` trains the default tiny ComplexFormer on CPU; `make test` runs the suite.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch. Where the CPU wheel is not on a local find-links path, pass
# TORCH_INDEX=https://download.pytorch.org/whl/cpu so pip does not pull a CUDA build.
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
PIP_TORCH_ARGS := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX),)
# `make run`: about 5 minutes on 2 CPU cores (data preparation is cached after the first run).
RUN_OUT   ?= runs/default
RUN_STEPS ?= 400
RUN_ARGS  ?=
PYTEST_ARGS ?=

.PHONY: venv run test test-slow bench bench-docs lint clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(PIP_TORCH_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet $(PIP_TORCH_ARGS) -e ".[dev]" "$(TORCH_SPEC)"
	touch $@

run: venv
	$(VENV)/bin/complexformer train --preset tiny --data stdlib --out $(RUN_OUT) --overwrite \
		--max-steps $(RUN_STEPS) --batch-size 16 --eval-every 100 --save-every 100 $(RUN_ARGS)

test: venv
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-slow: venv
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

# `make bench` measures and writes benchmarks/results/*.json; `make bench-docs` renders them
# into the tables of docs/benchmarks.md (with the targets' PASS/FAIL verdicts).
bench: venv
	$(PY) -m benchmarks.attention --threads 1
	$(PY) -m benchmarks.train --threads 1
	$(PY) -m benchmarks.complex_attention --threads 1
	$(PY) -m benchmarks.cbert --threads 1

bench-docs: venv
	$(PY) -m benchmarks.render

lint: venv
	$(VENV)/bin/ruff check complexformer tests benchmarks examples
	$(VENV)/bin/ruff format --check complexformer tests benchmarks examples

clean:
	rm -rf $(VENV) runs .pytest_cache
