"""The ``judge_led`` preset with every scorer real, on CPU: the tiny judge VLM in both judge backends,
the run report, and ``scripts/judge_led_local.sh`` end to end (HPSv3 actor in the hpsv3 env, the
judge through ``OpenAIJudgeBackend`` against a real vLLM server, ``brushrl train --config
configs/judge_led.yaml``). The end-to-end test runs with ``BRUSHRL_SLOW_E2E=1`` (``make test
SLOW_E2E=1``; CI skips it for time) and skips cleanly without the hpsv3 env or the vllm env."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from brushrl.config import JudgeConfig, load_config
from brushrl.pool import ReferencePool
from brushrl.reward.judge import PairwiseJudge, TransformersJudgeBackend
from brushrl.reward.report import summarize_run
from conftest import slow_e2e

ROOT = Path(__file__).resolve().parents[1]
HPSV3_PYTHON = Path(os.environ.get("BRUSHRL_HPSV3_PYTHON", ROOT / ".venv-hpsv3" / "bin" / "python"))
VLLM_PYTHON = Path(os.environ.get("BRUSHRL_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (600, 600), colour).save(buf, "PNG")
    return buf.getvalue()


def _make_tiny_judge():
    spec = importlib.util.spec_from_file_location("make_tiny_judge_vlm", ROOT / "scripts/make_tiny_judge_vlm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_judge_vlm_judges_in_process(tmp_path):
    """The folder the local judge server serves also loads in the in-process backend (Idefics3,
    PIL image processor: no torchvision), with its chat template, and judges on the score grid."""
    path = _make_tiny_judge().build(tmp_path / "judge")
    cfg = JudgeConfig(backend="transformers", model=str(path), refs_per_tier=1, batch_size=4)
    backend = TransformersJudgeBackend.from_pretrained(cfg)
    text = backend._text()
    assert text.count("<image>") == 2 and text.endswith('Assistant:{"winner": "')
    judge = PairwiseJudge(ReferencePool(ROOT / "pools/starter"), backend, cfg)
    out = judge.score_many([_png("#d08070"), _png("#ffffff")], seed=0)
    assert all(o.resolved == 2 and o.score in (0.0, 0.25, 0.5, 0.75, 1.0) for o in out)
    # OpenAI image items render as images too (vLLM passes them through the same template)
    chat = backend.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "image_url", "image_url": {"url": "x"}}]}],
        add_generation_prompt=True, tokenize=False)
    assert chat == "<|im_start|>User: q<image><end_of_utterance>\nAssistant:"


def test_report_names_a_missing_run_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="rollouts.parquet"):
        summarize_run(tmp_path)


def test_judge_led_preset_needs_its_endpoint_and_keeps_the_cpu_default_offline():
    cfg = load_config(ROOT / "configs/judge_led.yaml")
    assert cfg.reward.weights == {"gate": 0.05, "length": 0.05, "hpsv3": 0.30, "judge": 0.60}
    assert cfg.reward.judge.backend == "openai" and cfg.reward.judge.base_url
    local = load_config(ROOT / "configs/local.yaml")
    assert local.reward.scorers == ["pool_similarity"] and local.reward.judge.base_url is None


@slow_e2e("~4 min here, beyond CI's budget; the same scorers run for real in tests/test_hpsv3.py, "
          "test_judge_server.py and test_rehearse.py")
@pytest.mark.skipif(not HPSV3_PYTHON.exists(), reason=f"no hpsv3 env at {HPSV3_PYTHON} (make hpsv3-env)")
@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vllm env at {VLLM_PYTHON} (scripts/build_vllm_env.sh)")
def test_judge_led_local_script_trains_with_every_scorer_real(tmp_path):
    """scripts/judge_led_local.sh: 2 steps of configs/judge_led.yaml with HPSv3 in its own env and the
    judge answered by a real vLLM server through the OpenAI client (guided JSON decoding)."""
    env = {**os.environ, "MAIN_PYTHON": sys.executable, "HPSV3_PYTHON": str(HPSV3_PYTHON),
           "VLLM_PYTHON": str(VLLM_PYTHON), "STEPS": "2", "G": "3", "BENCH": "0"}
    env.pop("JUDGE_URL", None)
    proc = subprocess.run(["bash", str(ROOT / "scripts/judge_led_local.sh"), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    run = tmp_path / "runs" / "judge_led_local"
    resolved = yaml_load(run / "config.yaml")["reward"]
    assert resolved["weights"] == {"gate": 0.05, "length": 0.05, "hpsv3": 0.30, "judge": 0.60}
    assert resolved["judge"]["backend"] == "openai" and resolved["judge"]["base_url"].startswith("http://127.0.0.1:")
    assert resolved["hpsv3"]["device"] == "cpu"
    assert yaml_load(run / "config.yaml")["resources"]["hpsv3"]["num_gpus"] == 0

    rows = pd.read_parquet(run / "rollouts.parquet")
    scored = rows[rows.gate_verdict == "pass"]
    assert len(scored) >= 3, rows.gate_verdict.value_counts()
    raw = [json.loads(r) for r in scored.reward_raw]
    assert scored.reward_hpsv3.notna().all() and all("hpsv3_mu" in r for r in raw)  # the real inferencer ran
    # guided decoding: every answer of the random judge is schema-valid, so comparisons resolve
    assert scored.reward_judge.notna().mean() >= 0.5, scored.reward_causes.tolist()
    assert sum(r.get("judge_resolved", 0) for r in raw) >= len(scored)
    assert ((scored.total - scored[["reward_gate", "reward_length", "reward_hpsv3", "reward_judge"]].mul(
        [0.05, 0.05, 0.30, 0.60]).sum(axis=1)).abs().dropna() < 1e-6).all()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["time/score/judge_s"] > 0 and m["time/score/hpsv3_s"] > 0 for m in metrics)
    report = json.loads((run / "reward_report.json").read_text())
    assert {"gate", "length", "hpsv3", "judge"} <= set(report["components"])
    assert report["judge"]["resolved"] > 0
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in (tmp_path / "vllm.log").read_text()


def yaml_load(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())
