#!/usr/bin/env bash
# Build the separate Python env that runs the HPSv3 scorer actor (brushrl.reward.hpsv3).
#
#   scripts/build_hpsv3_env.sh [VENV_DIR]        (default /work/hpsv3-venv)
#
# hpsv3 1.0.0 pins transformers==4.45.2 (the learner runs transformers 5.x) and imports matplotlib
# and tensorboard without declaring them, so it gets its own virtualenv; Ray starts the actor with
# this env's Python (reward.hpsv3.python -> runtime_env.py_executable). The env needs:
#   * the same Python minor version and the same ray version as the cluster (Ray runs its worker there);
#   * a torch/torchvision pair built together: hpsv3 imports torchvision at module top, and the PyPI
#     torchvision wheel links CUDA torch (libc10_cuda.so), so a CPU-only torch wheel makes
#     `import torchvision` fail ("operator torchvision::nms does not exist"). The CUDA build runs on
#     CPU too. Measured here: ~22 min of pip on a loaded 2-core machine, 6.7 GB.
# On a cluster, bake the same into the node image instead and point reward.hpsv3.python at it.
set -euo pipefail
VENV=${1:-/work/hpsv3-venv}
PY=${PYTHON:-python3.11}
RAY_VERSION=$("$(dirname "$0")/../.venv/bin/python" -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)
CONSTRAINTS=$(mktemp)
cat > "$CONSTRAINTS" <<EOC
torch==2.14.1
torchvision==0.29.1
transformers==4.45.2
ray==$RAY_VERSION
EOC
"$PY" -m venv "$VENV"
nice -n 10 "$VENV/bin/pip" install -q -c "$CONSTRAINTS" torch==2.14.1 torchvision==0.29.1 "ray==$RAY_VERSION"
nice -n 10 "$VENV/bin/pip" install -q -c "$CONSTRAINTS" hpsv3==1.0.0 matplotlib tensorboard
"$VENV/bin/python" -c 'import hpsv3, torchvision, transformers, ray; print("hpsv3 env ok: transformers", transformers.__version__, "ray", ray.__version__)'
rm -f "$CONSTRAINTS"
