"""The weight-sync canary (``brushrl.orchestrator.sync_check``) on real parts.

``test_canary_on_real_logprobs``: a real tiny policy in a ``TransformersEngine`` and a real
``GRPOLearner`` in this process (no Ray): the engine's ``score`` equals its own sampled behaviour
log-probs, a healthy sync passes with a gap of numerical noise, and an engine whose adapter had its
keys moved under a wrong prefix (``brushrl.rollout.fault``: it then serves the base) fails both
rules with an error naming the version and the gap.

``test_broken_sync_stops_the_run_within_one_step``: a real run on local Ray with the test-only
fault turned on; the first sync of a moved adapter stops it, and nothing was trained on samples of
that version. The healthy run's ``sync/*`` metrics are checked by
``tests/test_train.py::test_two_step_run_writes_every_artefact``; vLLM's by ``tests/test_vllm_engine.py``
and ``tests/test_vllm_loop.py``.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from brushrl.config import SyncCheckConfig, load_config
from brushrl.orchestrator.sync_check import Probe, SyncCheck, SyncCheckError, measure, verdict
from brushrl.rollout.fault import FAULT_ENV
from test_train import ROOT, small_overrides

#: The tests' learning rate: one step on a memorising tiny policy must move it clearly on the probe.
LR = 5e-2


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """A warm-started tiny policy: its config, system prompt, tokenizer, a learner and a probe."""
    from brushrl.learner.grpo import GRPOLearner
    from brushrl.policy import load_policy, warm_start_policy
    from brushrl.prompts import resolve_system_prompt

    cfg = load_config(ROOT / "configs/local.yaml", small_overrides(tmp_path_factory.mktemp("sync")) | {
        "rollout.max_new_tokens": 32})
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    cfg = warm_start_policy(cfg, system_prompt)
    model, tokenizer = load_policy(cfg.policy)
    learner = GRPOLearner(model, tokenizer, cfg.learner.model_copy(update={"lr": LR, "warmup_steps": 0}), 10,
                          group_size=3, max_completion_length=32)
    probe = Probe.build(tokenizer, system_prompt, cfg.prompts.template, cfg.orchestrator.sync_check.probe_tokens)
    return cfg, system_prompt, tokenizer, learner, probe


def _step_on_varied_sequences(learner, prompt_ids: list[int]) -> None:
    """One learner step on three different token sequences with different rewards (the tiny policy's
    own samples are near-identical: their advantages cancel and the adapter would not move)."""
    import random

    from brushrl.learner.samples import TrainSample

    samples = []
    for seed, reward in enumerate([1.0, 0.0, 0.5]):
        ids = random.Random(seed).sample(range(300, 1000), 32)
        samples.append(TrainSample(prompt_ids, ids, learner.completion_logprobs(prompt_ids, ids), reward, 0))
    stats = learner.step([samples])
    assert stats["groups_accepted"] == 1 and stats["grad_norm"] > 0, stats


def test_canary_on_real_logprobs(parts, monkeypatch):
    from brushrl.rollout.transformers_engine import TransformersEngine

    cfg, system_prompt, _, learner, probe = parts
    check_cfg = cfg.orchestrator.sync_check
    assert len(probe.completion_ids) == check_cfg.probe_tokens
    engine = TransformersEngine(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)
    engine.load_adapter(learner.adapter_state(), 0)
    # score() is the quantity the engine logs while sampling: its own behaviour log-probs, exactly.
    (group,) = engine.generate(["Paint a violet iris in loose watercolour."], 2, seed=3)
    for c in group:
        # float32 noise between the sampler's forward and score()'s: ~1e-6 nats at the most on a
        # memorising policy's peaked logits (a wrong adapter is off by far more than 1e-3)
        assert engine.score(c.prompt_ids, c.completion_ids) == pytest.approx(c.logprobs, rel=1e-5, abs=1e-6)

    def lp(eng, adapter=True):
        return eng.score(probe.prompt_ids, probe.completion_ids, adapter)

    check = SyncCheck(check_cfg, probe)
    check.base = lp(engine, adapter=False)
    v0 = check.judge(0, lp(engine), learner.completion_logprobs(probe.prompt_ids, probe.completion_ids))
    assert v0.gap < 1e-5 and v0.shift < 1e-5 and v0.engine_shift == 0.0, v0

    _step_on_varied_sequences(learner, probe.prompt_ids)
    engine.load_adapter(learner.adapter_state(), 1)
    learner_lp = learner.completion_logprobs(probe.prompt_ids, probe.completion_ids)
    healthy = check.judge(1, lp(engine), learner_lp)
    print(f"\nhealthy v1: {healthy}")
    assert healthy.gap < 1e-5 and healthy.gap_max < 1e-4, healthy
    assert healthy.shift > 100 * check_cfg.min_shift, "the step did not move the learner on the probe"
    assert healthy.engine_shift == pytest.approx(healthy.shift, rel=1e-3)

    monkeypatch.setenv(FAULT_ENV, "key_prefix")
    broken = TransformersEngine(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)
    broken.load_adapter(learner.adapter_state(), 1)  # accepted without a word, as vLLM does
    assert broken.policy_version() == 1 and lp(broken) == lp(broken, adapter=False)  # it serves the base
    gap = measure(1, lp(broken), learner_lp, check.base)
    print(f"wrong key prefix v1: {gap}")
    with pytest.raises(SyncCheckError, match=rf"policy version 1: .* differ from the learner's by {gap.gap:.3g} "
                                             rf"nats/token .*sync_check.tolerance=0.001"):
        check.judge(1, lp(broken), learner_lp)
    # The shift rule alone (a tolerance too loose for this gap) still finds the base-serving engine.
    loose = SyncCheckConfig(tolerance=10.0, min_shift=check_cfg.min_shift)
    assert verdict(healthy, loose) is None
    why = verdict(gap, loose)
    assert why is not None and "policy version 1" in why and "still serves the base policy" in why, why


@pytest.mark.slow
def test_broken_sync_stops_the_run_within_one_step(tmp_path, fresh_ray, monkeypatch):
    from brushrl.orchestrator.trainer import Trainer

    monkeypatch.setenv(FAULT_ENV, "key_prefix")  # forwarded to the rollout actor by make_rollout_actor
    cfg = load_config(ROOT / "configs/local.yaml", small_overrides(tmp_path, steps=4) | {
        "learner.lr": LR, "learner.warmup_steps": 0, "run.checkpoint_every": 100})
    trainer = Trainer(cfg)
    with pytest.raises(SyncCheckError) as err:
        trainer.run()
    message = str(err.value)
    print(f"\n{message}")
    assert "policy version 1:" in message and "nats/token" in message, message
    run = tmp_path / "runs" / "e2e"
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and status["error"].startswith("SyncCheckError: ") \
        and "policy version 1:" in status["error"], status
    # The sync of version 1 failed: no step trained at version 1, no sample of it was written.
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] \
        if (run / "metrics.jsonl").exists() else []
    assert all(m["policy_version"] == 0 for m in metrics), metrics
    assert not any(m.get("groups/accepted") for m in metrics), "a step trained and synced without failing"
    if (run / "rollouts.parquet").exists():
        assert (pd.read_parquet(run / "rollouts.parquet")["policy_version"] == 0).all()
