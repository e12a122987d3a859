# Two commands: `make demo` and `make test` (each sets up its environments first).
# Releasing (docs/install.md): `make dist`, `make image IMAGE=...`, `make components IMAGE=...`.
# Dependencies (docs/contributing.md): `make lock` re-resolves requirements/*.lock, with which
# every environment here is built; `make fresh-test` runs `make test` in a fresh clone.
SHELL = /bin/bash
PYTHON ?= python3
VENV ?= .venv
KFP_VENV ?= .venv-kfp
AIRFLOW_VENV ?= .venv-airflow
TRAINERS_VENV ?= .venv-trainers
BIN = $(VENV)/bin
DIST ?= dist
# The version and the default image have one home, gpu_policy/_version.py, read without installing anything
RELEASE = $(PYTHON) -c 'import runpy, sys; print(runpy.run_path("gpu_policy/_version.py")[sys.argv[1]])'
VERSION = $(shell $(RELEASE) __version__)
IMAGE ?= $(shell $(RELEASE) DEFAULT_IMAGE)
ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)

# Each test environment: its extras and its lock (kfp 2.17 pins kubernetes<31 while the
# Airflow provider needs >=36, so each integration has its own venv)
EXTRAS_core = dev,release,prometheus
EXTRAS_kfp = kfp,dev,prometheus
EXTRAS_airflow = airflow,dev,prometheus
# the trainer callbacks against the real Hugging Face Trainer and Lightning, on the CPU build of
# torch this machine keeps on disk (pip takes it from there; any other torch is a CUDA download of GBs)
EXTRAS_trainers = hf,lightning,dev
REQUIRE_trainers = --require torch==2.13.0
ENVS = core kfp airflow trainers
LOCKS = $(ENVS:%=requirements/%.lock)

# One venv, built with its lock: $(call venv,FOLDER,ENV); a changed setup.py or lock rebuilds it
define venv
	rm -rf $(1)
	$(PYTHON) -m venv $(1)
	$(1)/bin/pip install -q --upgrade pip
	$(1)/bin/pip install -q -c requirements/$(2).lock -e '.[$(EXTRAS_$(2))]'
	touch $(1)/.installed
endef

# The suites: tests/kubernetes run with both sides of the client range the core supports,
# kubernetes 30.x (kfp-kubernetes) and 36.x (airflow), not a third time with the core's newest.
# They run at once, so the long ones are split: the planner's tests (all solver time) from the
# core's, tests/kubernetes from tests/kfp (its wheel test waits minutes on pip) (docs/contributing.md)
PLANNER_TESTS = tests/planner tests/test_stability.py tests/test_scenarios.py tests/test_determinism.py
TRAINER_TESTS = tests/checkpoint/trainers
SUITE_core = $(BIN)/python -m pytest -q --ignore=tests/kfp --ignore=tests/airflow --ignore=tests/kubernetes \
	--ignore=$(TRAINER_TESTS) $(PLANNER_TESTS:%=--ignore=%)
SUITE_planner = $(BIN)/python -m pytest -q $(PLANNER_TESTS)
SUITE_kfp = $(KFP_VENV)/bin/python -m pytest -q tests/kfp
SUITE_kfp-kubernetes = $(KFP_VENV)/bin/python -m pytest -q tests/kubernetes
SUITE_airflow = $(AIRFLOW_VENV)/bin/python -m pytest -q tests/airflow tests/kubernetes
SUITE_trainers = $(TRAINERS_VENV)/bin/python -m pytest -q $(TRAINER_TESTS) tests/checkpoint/test_torch.py
SUITES = core planner kfp kfp-kubernetes airflow trainers
REPORTS ?= build

.PHONY: demo test fresh-test lock bench components dist image constraints clean

$(VENV)/.installed: setup.py requirements/core.lock
	$(call venv,$(VENV),core)

$(KFP_VENV)/.installed: setup.py requirements/kfp.lock
	$(call venv,$(KFP_VENV),kfp)

$(AIRFLOW_VENV)/.installed: setup.py requirements/airflow.lock
	$(call venv,$(AIRFLOW_VENV),airflow)

$(TRAINERS_VENV)/.installed: setup.py requirements/trainers.lock
	$(call venv,$(TRAINERS_VENV),trainers)

# Re-resolve every environment's lock from setup.py, each in a throwaway venv (after a change
# to setup.py's requirements, or to take newer releases); commit the locks with the change
lock:
	$(foreach env,$(ENVS),$(PYTHON) scripts/constraints.py --lock $(env) --extras $(EXTRAS_$(env)) \
	  $(REQUIRE_$(env)) --write requirements/$(env).lock . &&) true

demo: $(VENV)/.installed
	$(BIN)/gpu-policy demo

# Every suite runs, each one's result is reported, and any failure (pytest's 5, no tests, too) fails make.
# The suites run at once, each into its own log (much of their time is spent waiting on sockets,
# child processes and pip, so two cores serve five); each log is shown whole, in the order of
# SUITES, once that suite and the ones before it have ended
test: $(VENV)/.installed $(KFP_VENV)/.installed $(AIRFLOW_VENV)/.installed $(TRAINERS_VENV)/.installed
	@mkdir -p $(REPORTS); rm -f $(REPORTS)/test-summary.new; failed=; \
	$(foreach s,$(SUITES),echo "== $(s) suite started: $(SUITE_$(s))"; \
	  $(SUITE_$(s)) > $(REPORTS)/test-$(s).log 2>&1 & pid_$(subst -,_,$(s))=$$!;) \
	$(foreach s,$(SUITES),wait $$pid_$(subst -,_,$(s)); rc=$$?; \
	  echo "== $(s) suite: $(SUITE_$(s))"; cat $(REPORTS)/test-$(s).log; \
	  echo "$(s): $$(tail -n 1 $(REPORTS)/test-$(s).log | tr -d =) (exit $$rc)" >> $(REPORTS)/test-summary.new; \
	  [ $$rc -eq 0 ] || failed="$$failed $(s)";) \
	mv $(REPORTS)/test-summary.new $(REPORTS)/test-summary.txt; echo "== suites"; cat $(REPORTS)/test-summary.txt; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

# `make test` as a new machine runs it: a clone of the committed HEAD in a new temporary folder,
# every venv built from nothing with no pip cache; the clone is removed if every suite passed
fresh-test:
	@dir=$$(mktemp -d /tmp/gpu-policy-fresh-XXXXXX); echo "== fresh clone in $$dir"; \
	git clone -q . $$dir && cd $$dir && time PIP_NO_CACHE_DIR=1 $(MAKE) --no-print-directory test PYTHON=$(PYTHON) \
	  && { cd /; rm -rf $$dir; } || { echo "kept for inspection: $$dir"; exit 1; }

# Regenerate components/ and pipelines/compiled/; IMAGE=registry/gpu-policy:TAG names your image in them
components: $(KFP_VENV)/.installed
	$(KFP_VENV)/bin/python scripts/generate_kfp.py --image '$(IMAGE)'

# The wheel and sdist (the wheel built from the sdist, so the sdist is known complete), checked
dist: $(VENV)/.installed
	rm -f $(DIST)/gpu_policy-*.whl $(DIST)/gpu_policy-*.tar.gz
	$(BIN)/python -m build --outdir $(DIST) .
	$(BIN)/twine check --strict $(DIST)/gpu_policy-$(VERSION)-py3-none-any.whl $(DIST)/gpu_policy-$(VERSION).tar.gz

# The component image: the wheel from `make dist` with the pins of image-constraints.txt;
# IMAGE_EXTRAS=kfp,s3 installs more of its extras (the Dockerfile's EXTRAS, kfp when unset)
image: dist
	@test -n "$(ENGINE)" || { echo "make image: needs docker or podman, and neither is installed" >&2; exit 2; }
	$(ENGINE) build $(if $(IMAGE_EXTRAS),--build-arg EXTRAS='$(IMAGE_EXTRAS)' )--tag '$(IMAGE)' .

# Re-resolve the image's pinned dependencies (after a change to setup.py's requirements);
# IMAGE_EXTRAS=kfp,s3 resolves them for that set of extras
constraints: dist
	$(BIN)/python scripts/constraints.py $(if $(IMAGE_EXTRAS),--extras '$(IMAGE_EXTRAS)' )--write image-constraints.txt \
	  $(DIST)/gpu_policy-$(VERSION)-py3-none-any.whl

bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/observe_scale.py
	$(BIN)/python bench/openb_packing.py --plot docs/img/openb-inflation.png
	$(BIN)/python bench/teams.py --plot docs/img/teams.png --skips-days 21,29
	$(BIN)/python bench/teams_preemption.py --plot docs/img/teams-preemption.png

clean:
	rm -rf $(VENV) $(KFP_VENV) $(AIRFLOW_VENV) $(TRAINERS_VENV) build $(DIST) *.egg-info
