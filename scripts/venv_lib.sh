# Steps shared by the env builders (sourced by scripts/build_vllm_env.sh and scripts/build_hpsv3_env.sh).
# Each env is built under a temporary name ($VENV.partial) and moved into place at the end, so a
# half-built env is never taken for a finished one (the tests look for $VENV/bin/python).

# The uv every env is installed with (scripts/build_main_env.sh, build_vllm_env.sh, build_hpsv3_env.sh).
UV_VERSION=${UV_VERSION:-0.13.9}

# uv_bootstrap VENV: pip-install the pinned uv into VENV (pip's "Location ... is ignored" warnings,
# from this machine's pip config, dropped).
uv_bootstrap() {
  nice -n 10 "$1/bin/pip" install -q "uv==$UV_VERSION" 2>&1 | grep -v "^WARNING: Location" || true
}

# venv_begin PYTHON VENV UV_VERSION: a fresh venv at $VENV.partial with uv (pinned) bootstrapped into
# it by pip. Sets TMP (its path), UV (the `uv pip --quiet` command) and UVPY (its --python flag).
venv_begin() {
  local py=$1 venv=$2 uv_version=$3
  TMP="$venv.partial"
  rm -rf "$TMP"
  "$py" -m venv --prompt "$(basename "$venv")" "$TMP"
  UV_VERSION=$uv_version uv_bootstrap "$TMP"
  UV=("$TMP/bin/uv" pip --quiet)
  UVPY=(--python "$TMP/bin/python")
}

# venv_finish VENV: move $VENV.partial into place at VENV; venv scripts hard-code their path: rewrite it.
venv_finish() {
  local venv=$1
  rm -rf "$venv"
  mv "$TMP" "$venv"
  grep -lr --null "$TMP" "$venv/bin" 2>/dev/null | xargs -0 -r sed -i "s|$TMP|$venv|g"
}

# venv_compile SKIP: compile the env's bytecode at build time (a cold import of vllm or transformers
# costs tens of CPU seconds per process, and PYTHONDONTWRITEBYTECODE may be set at run time), leaving
# out the paths matched by the regex SKIP and VENV_SKIP (tools, tests, the Ray libraries no actor loads).
VENV_SKIP='/site-packages/(pip|setuptools|pygments|networkx|google)/|/tests?/'
VENV_SKIP+='|/site-packages/ray/(rllib|tune|train|serve|data|air|dashboard|autoscaler|llm)/'
venv_compile() {
  nice -n 10 "$TMP/bin/python" -m compileall -q -j 0 -x "$VENV_SKIP|$1" "$TMP"/lib/python3.*/site-packages >/dev/null || true
}
