#!/usr/bin/env bash
# Download the wheels the single-process GPU smoke (brushrl.rehearse.gpu_smoke) needs on the lent
# GPU machine (Python 3.12, torch 2.11, transformers 5.17, peft, accelerate, pyarrow, pandas, pyyaml;
# no TRL, datasets or pydantic):
#   * trl, datasets (+ dill, multiprocess): GRPOLearner's loss and GRPOTrainer's constructor;
#   * pydantic (+ pydantic-core, annotated-types, typing-inspection, typing-extensions): brushrl.config;
#   * transformers 5.24.0 and peft 0.21.2, this repo's pins (pyproject.toml): transformers 5.17's
#     TrainingArguments has no `activation_checkpointing`, which GRPOLearner passes to GRPOConfig;
#   * flash-linear-attention 0.6.0 (+ fla-core, einops: pure Python, Triton comes with CUDA torch): the
#     Gated DeltaNet kernel the GPU image installs (brushrl.learner.kernels), ~1.5 MiB, so the smoke
#     times the learner the image runs rather than transformers' PyTorch fallback;
#   * tree-sitter 0.26.1 (cp312 manylinux x86-64) and tree-sitter-javascript 0.25.0 (abi3): brushrl.config's
#     validator imports brushrl.render.calllog -> brushrl.gate -> brushrl.gate.extract, which needs them (the
#     first H200 call, 2026-12-04, stopped there with ModuleNotFoundError: tree_sitter_javascript).
# 20.4 MiB in all (21,377,085 bytes, measured 2026-12-04), under the 64 MiB that travels with the tree.
#
#   scripts/gpu_smoke_wheels.sh [DIR]      (default: .whl in the repo root, ignored by git)
#
# Pure-Python wheels plus pydantic-core for CPython 3.12 on x86-64 manylinux. Install them there with
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site DIR/*.whl
# and run with PYTHONPATH=/tmp/site:src (docs/perf/gpu_smoke.md, "Single-process smoke").
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.whl}"
mkdir -p "$dir"
python="${PYTHON:-.venv/bin/python}"
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir" \
  trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 \
  transformers==5.24.0 peft==0.21.2 \
  flash-linear-attention==0.6.0 fla-core==0.6.0 einops==0.8.1 \
  tree-sitter==0.26.1 tree-sitter-javascript==0.25.0
ls -l "$dir"/*.whl
du -cb "$dir"/*.whl | awk 'END {printf "total %.1f MiB\n", $1 / 1048576}'
