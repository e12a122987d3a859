# Two commands: `make demo` and `make test` (each sets up .venv first).
PYTHON ?= python3
VENV ?= .venv
KFP_VENV ?= .venv-kfp
AIRFLOW_VENV ?= .venv-airflow
BIN = $(VENV)/bin

.PHONY: demo test bench components clean

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# kfp 2.17 pins kubernetes<31 while the Airflow provider needs >=36: each extra has its own venv
$(KFP_VENV)/.installed: setup.py
	$(PYTHON) -m venv $(KFP_VENV)
	$(KFP_VENV)/bin/pip install -q --upgrade pip
	$(KFP_VENV)/bin/pip install -q -e '.[kfp,dev]'
	touch $@

$(AIRFLOW_VENV)/.installed: setup.py
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install -q -e '.[airflow,dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/gpu-policy demo

# tests/kubernetes run in all three: the core's client (.venv), kubernetes 30.x (kfp), 36.x (Airflow)
test: $(VENV)/.installed $(KFP_VENV)/.installed $(AIRFLOW_VENV)/.installed
	$(BIN)/python -m pytest -q --ignore=tests/kfp --ignore=tests/airflow
	$(KFP_VENV)/bin/python -m pytest -q tests/kfp tests/kubernetes
	$(AIRFLOW_VENV)/bin/python -m pytest -q tests/airflow tests/kubernetes

components: $(KFP_VENV)/.installed
	$(KFP_VENV)/bin/python scripts/generate_kfp.py

bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/observe_scale.py
	$(BIN)/python bench/openb_packing.py --plot docs/img/openb-inflation.png

clean:
	rm -rf $(VENV) $(KFP_VENV) $(AIRFLOW_VENV) build *.egg-info
