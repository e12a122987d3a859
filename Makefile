# Two commands: `make demo` and `make test` (each sets up .venv first).
# Releasing (docs/install.md): `make dist`, `make image IMAGE=...`, `make components IMAGE=...`.
PYTHON ?= python3
VENV ?= .venv
KFP_VENV ?= .venv-kfp
AIRFLOW_VENV ?= .venv-airflow
BIN = $(VENV)/bin
DIST ?= dist
# The version and the default image have one home, gpu_policy/_version.py, read without installing anything
RELEASE = $(PYTHON) -c 'import runpy, sys; print(runpy.run_path("gpu_policy/_version.py")[sys.argv[1]])'
VERSION = $(shell $(RELEASE) __version__)
IMAGE ?= $(shell $(RELEASE) DEFAULT_IMAGE)
ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)

.PHONY: demo test bench components dist image constraints clean

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,release]'
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

# Regenerate components/ and pipelines/compiled/; IMAGE=registry/gpu-policy:TAG names your image in them
components: $(KFP_VENV)/.installed
	$(KFP_VENV)/bin/python scripts/generate_kfp.py --image '$(IMAGE)'

# The wheel and sdist (the wheel built from the sdist, so the sdist is known complete), checked
dist: $(VENV)/.installed
	rm -f $(DIST)/gpu_policy-*.whl $(DIST)/gpu_policy-*.tar.gz
	$(BIN)/python -m build --outdir $(DIST) .
	$(BIN)/twine check --strict $(DIST)/gpu_policy-$(VERSION)-py3-none-any.whl $(DIST)/gpu_policy-$(VERSION).tar.gz

# The component image: the wheel from `make dist` with the pins of image-constraints.txt
image: dist
	@test -n "$(ENGINE)" || { echo "make image: needs docker or podman, and neither is installed" >&2; exit 2; }
	$(ENGINE) build --tag '$(IMAGE)' .

# Re-resolve the image's pinned dependencies (after a change to setup.py's requirements)
constraints: dist
	$(BIN)/python scripts/constraints.py --write image-constraints.txt $(DIST)/gpu_policy-$(VERSION)-py3-none-any.whl

bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/observe_scale.py
	$(BIN)/python bench/openb_packing.py --plot docs/img/openb-inflation.png
	$(BIN)/python bench/teams.py --plot docs/img/teams.png --skips-days 21,29

clean:
	rm -rf $(VENV) $(KFP_VENV) $(AIRFLOW_VENV) build $(DIST) *.egg-info
