# Two commands: `make demo` and `make test` (each sets up .venv first).
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: demo test bench clean

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/gpu-policy demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scale.py

clean:
	rm -rf $(VENV) build *.egg-info
