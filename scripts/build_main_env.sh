#!/usr/bin/env bash
# Build brushrl's own Python env (the driver's, the tests', and every actor's but the vLLM and HPSv3
# ones): `make setup` runs it when pyproject.toml changes.
#
#   scripts/build_main_env.sh [VENV_DIR]      (default: .venv in the repo root)
#
# Installed with uv (pinned, bootstrapped into the env by pip), editable, with the test extras and
# bytecode compiled on all cores: 35 s here with uv's cache warm, where pip took 169 s (issue 23).
# torch==2.13.0 (pyproject) resolves to the CPU build when WHEELS (default /opt/wheels, this
# machine's local wheels) holds it: uv does not read pip's config, so the folder is passed as
# --find-links; elsewhere uv takes torch from PyPI, as pip would.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$(realpath -m "${1:-$ROOT/.venv}")
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-/opt/wheels}
source "$ROOT/scripts/venv_lib.sh"
t0=$(date +%s)
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
uv_bootstrap "$VENV"
LINKS=()
[ -d "$WHEELS" ] && LINKS=(--find-links "$WHEELS")
cd "$ROOT"
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" "${LINKS[@]}" --compile-bytecode -e '.[test]'
"$VENV/bin/python" -c 'import torch, brushrl; print("brushrl env ok: torch", torch.__version__)'
echo "[make] Python env installed in $(( $(date +%s) - t0 )) s"
