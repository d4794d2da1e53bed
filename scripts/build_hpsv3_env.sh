#!/usr/bin/env bash
# Build the separate Python env that runs the HPSv3 scorer actor (brushrl.reward.hpsv3).
#
#   scripts/build_hpsv3_env.sh [VENV_DIR]      (default: .venv-hpsv3 in the repo root; `make hpsv3-env`)
#
# hpsv3 1.0.0 pins transformers==4.45.2 (the learner runs transformers 5.x), so it gets its own
# virtualenv; Ray starts the actor with this env's Python (reward.hpsv3.python ->
# runtime_env.py_executable) and brushrl's source on its PYTHONPATH. The env needs:
#   * the same Python minor version and the same ray version as the driver (Ray runs its worker there);
#   * a torch/torchvision pair built together: hpsv3 imports torchvision at module top, and the PyPI
#     torchvision wheel links CUDA torch (libc10_cuda.so), so a CPU-only torch wheel makes
#     `import torchvision` fail ("operator torchvision::nms does not exist"). The CUDA build
#     (torch 2.14.1 + torchvision 0.29.1) runs on CPU too;
#   * what `from hpsv3 import HPSv3RewardInferencer` imports, and nothing more: hpsv3 is installed
#     --no-deps, because its declared deps include deepspeed (an sdist whose isolated build pulls a
#     second CUDA torch), diffusers, opencv, timm, einops, qwen-vl-utils, which only its training and
#     CoHP scripts use. The import list below was read off hpsv3 1.0.0's inference.py, train.py,
#     utils/parser.py, dataset/*.py and model/qwen2vl_trainer.py (matplotlib and tensorboard are
#     imported there without being declared, and trl 0.11's trainer imports rich); trl/peft/accelerate
#     are pinned to the releases of transformers 4.45.2's month (Oct 2024), which import against it.
# Installed with uv (pinned, bootstrapped into the env itself): the pip build took ~22 min here; uv
# builds it in 102 s with its cache warm, 140 s cold (torch & co. from the local index; install 66 s,
# bytecode 47 s), 6.1 GB.
# torch, torchvision and their nvidia-* wheels come from this machine's local wheel index when it
# exists (LOCAL_INDEX, file:///opt/pypi-more/simple: uv does not read pip's config), else from PyPI
# (~3 GB of downloads). Bytecode is compiled at build time (the actor imports transformers cold).
# The same script builds the GPU image's env (cluster/docker/Dockerfile, GPU_ENVS=1): the CUDA torch
# pair above is what a GPU node runs; reward.hpsv3.python points there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/.venv-hpsv3}
VENV=$(realpath -m "$VENV")
MAIN_PY=${MAIN_PYTHON:-$ROOT/.venv/bin/python}
PY=${PYTHON:-python3.11}
RAY_VERSION=$("$MAIN_PY" -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)
LOCAL_INDEX=${LOCAL_INDEX:-/opt/pypi-more/simple}
source "$ROOT/scripts/venv_lib.sh"
CONSTRAINTS="$VENV.partial.constraints.txt"
trap 'rm -f "$CONSTRAINTS"' EXIT
t0=$(date +%s)
venv_begin "$PY" "$VENV" "$UV_VERSION"
cat > "$CONSTRAINTS" <<EOC
torch==2.14.1
torchvision==0.29.1
transformers==4.45.2
trl==0.11.4
peft==0.13.2
accelerate==1.0.1
ray==$RAY_VERSION
EOC
INDEX=()
if [ -d "${LOCAL_INDEX#file://}" ]; then
  # the local index first for the packages it holds (torch & co.), PyPI for the rest
  INDEX=(--extra-index-url "file://${LOCAL_INDEX#file://}" --index-strategy unsafe-first-match)
fi
nice -n 10 "${UV[@]}" install "${UVPY[@]}" -c "$CONSTRAINTS" "${INDEX[@]}" \
  torch torchvision transformers trl peft accelerate "ray==$RAY_VERSION" \
  huggingface_hub safetensors omegaconf fire pyyaml requests packaging pillow numpy pandas datasets rich \
  matplotlib tensorboard
"${UV[@]}" install "${UVPY[@]}" --no-deps hpsv3==1.0.0
t1=$(date +%s)
venv_compile '/site-packages/(sympy|mpmath)/|/site-packages/transformers/models/(?!(auto|qwen2|qwen2_vl|llama)/)[^/]+/|/hpsv3/cohp/'
t2=$(date +%s)
# The import the actor does, checked before the env is moved into place.
PYTHONPATH=$ROOT/src "$TMP/bin/python" -c 'import hpsv3, torchvision, transformers, ray, brushrl.reward.hpsv3; print("hpsv3 env ok: transformers", transformers.__version__, "torch", __import__("torch").__version__, "ray", ray.__version__)'
venv_finish "$VENV"
echo "hpsv3 env built in $(( $(date +%s) - t0 )) s (install $(( t1 - t0 )) s, bytecode $(( t2 - t1 )) s): $(du -sh "$VENV" | cut -f1) at $VENV"
