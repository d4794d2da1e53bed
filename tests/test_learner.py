"""The learner stage: GRPO advantages, the group filter, the TRL + LoRA learner and its Ray actor.

Everything runs for real: a tiny Qwen3 built from a config, a word-level tokenizer built with
``tokenizers``, TRL's GRPO loss, PEFT LoRA and a local Ray cluster.
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import sys

import pytest
import torch
from peft import LoraConfig as PeftLoraConfig
from peft import PeftModel, get_peft_model, set_peft_model_state_dict
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from trl.trainer.utils import nanstd

from brushrl.config import BrushRLConfig, LearnerConfig
from brushrl.learner import (
    ACCEPTED,
    TOO_FEW_VALID,
    ZERO_VARIANCE,
    GroupFilter,
    TrainSample,
    batch_advantages,
    filter_group,
    group_advantages,
    make_learner_actor,
)
from brushrl.learner.grpo import GRPOLearner
from brushrl.types import Completion, GateVerdict, Sample
from brushrl.ray_setup import start_local_ray

torch.set_num_threads(1)

VOCAB = 300
EOS, PAD = 1, 2


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Word-level tokenizer over ``t0 .. t299`` (ids = numbers); ``t1`` is EOS, ``t2`` padding."""
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="t1", pad_token="t2", unk_token="t0")


def tiny_model(seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    return Qwen3ForCausalLM(cfg)


def make_learner(model=None, total_steps: int = 10, **overrides) -> GRPOLearner:
    kwargs = {k: overrides.pop(k) for k in ("micro_batch_size", "truncated_is_clip") if k in overrides}
    cfg = LearnerConfig(**{"lr": 1e-3, "warmup_steps": 0, **overrides})
    return GRPOLearner(model if model is not None else tiny_model(), tiny_tokenizer(), cfg, total_steps, **kwargs)


def random_ids(gen: torch.Generator, n: int) -> list[int]:
    return torch.randint(3, VOCAB, (n,), generator=gen).tolist()


def make_group(learner: GRPOLearner, rewards, lengths=(20, 25, 15, 30), seed: int = 1) -> list[TrainSample]:
    """One prompt, one random completion per reward, behaviour log-probs from the current policy."""
    gen = torch.Generator().manual_seed(seed)
    prompt = random_ids(gen, 6)
    samples = []
    for reward, n in zip(rewards, lengths):
        completion = random_ids(gen, n)
        samples.append(TrainSample(prompt, completion, learner.completion_logprobs(prompt, completion), reward, 0))
    return samples


def refresh(learner: GRPOLearner, group: list[TrainSample]) -> list[TrainSample]:
    """The same completions with behaviour log-probs of the learner's current weights (on-policy)."""
    return [
        TrainSample(s.prompt_ids, s.completion_ids, learner.completion_logprobs(s.prompt_ids, s.completion_ids),
                    s.reward, learner.policy_version)
        for s in group
    ]


def seq_logprob(learner: GRPOLearner, sample: TrainSample) -> float:
    return sum(learner.completion_logprobs(sample.prompt_ids, sample.completion_ids))


def plain_logprobs(model, prompt_ids: list[int], completion_ids: list[int]) -> torch.Tensor:
    """Completion log-probs from the model's ordinary logits (no TRL fused head)."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logps = model(input_ids=ids).logits.float().log_softmax(-1)[0, :-1]
    targets = ids[0, 1:]
    return logps.gather(-1, targets[:, None])[:, 0][-len(completion_ids):]


def lora_and_base(model) -> tuple[dict, dict]:
    lora, base = {}, {}
    for name, p in model.named_parameters():
        (lora if "lora_" in name else base)[name] = p.detach().clone()
    return lora, base


# --------------------------------------------------------------------------------- advantages
def trl_advantages(rewards: list[list[float | None]], scale_rewards: str) -> list[list[float]]:
    """The lines of TRL 1.16 ``_generate_and_score_completions`` (sum_then_normalize), equal-size groups."""
    g = len(rewards[0])
    r = torch.tensor([[math.nan if x is None else x for x in grp] for grp in rewards], dtype=torch.float64).view(-1)
    mean = torch.nanmean(r.view(-1, g), dim=1).repeat_interleave(g)
    std = nanstd(r.view(-1, g), dim=1).repeat_interleave(g) if scale_rewards != "batch" else nanstd(r).expand_as(r)
    adv = r - mean
    if scale_rewards != "none":
        adv = adv / (std + 1e-4)
    return torch.nan_to_num(adv, nan=0.0).view(-1, g).tolist()


@pytest.mark.parametrize("scale", ["none", "group", "batch"])
def test_advantages_match_trl_on_valid_samples(scale):
    groups = [[0.9, None, 0.1, 0.4], [0.0, 1.0, 0.3, None], [0.2, 0.8, 0.5, 0.6]]
    ours = batch_advantages(groups, scale, tol=1e-6)
    theirs = trl_advantages(groups, scale)
    for g_ours, g_theirs, rewards in zip(ours, theirs, groups):
        for a, b, r in zip(g_ours, g_theirs, rewards):
            if r is None:
                assert a is None  # TRL trains it with advantage 0; we leave it out
            else:
                assert a == pytest.approx(b, rel=1e-6)  # TRL's Bessel factor is float32


def test_identical_rewards_are_zero_variance():
    rewards = [0.42, 0.42, 0.42, 0.42]
    assert GroupFilter(min_valid=2, tol=1e-6).verdict(rewards) == ZERO_VARIANCE
    assert filter_group(rewards, 2, 1e-6) == ZERO_VARIANCE
    assert group_advantages(rewards, "group", tol=1e-6) == [0.0] * 4


def test_spread_below_tol_is_zero_variance():
    rewards = [0.5, 0.5 + 1e-8, 0.5, 0.5]
    assert GroupFilter(min_valid=2, tol=1e-6).verdict(rewards) == ZERO_VARIANCE
    assert group_advantages(rewards, "group", tol=1e-6) == [0.0] * 4
    # the same group passes when the tolerance is below its spread
    assert GroupFilter(min_valid=2, tol=1e-9).verdict(rewards) == ACCEPTED
    assert filter_group(rewards, 2, 1e-9) is None


@pytest.mark.parametrize("scale", ["none", "group"])
def test_none_reward_is_excluded_from_group_statistics(scale):
    with_none = group_advantages([1.0, None, 0.0, 0.5], scale, tol=1e-6)
    without = group_advantages([1.0, 0.0, 0.5], scale, tol=1e-6)
    assert with_none[1] is None
    assert [with_none[0], with_none[2], with_none[3]] == pytest.approx(without)
    # had the unscorable sample been scored (any value), the others' advantages would change
    for would_be in (-3.0, 0.0, 2.0):
        scored = group_advantages([1.0, would_be, 0.0, 0.5], scale, tol=1e-6)
        assert [scored[0], scored[2], scored[3]] != pytest.approx(without)


def test_single_valid_reward_is_too_few_valid():
    rewards = [None, 0.3, None, None]
    assert GroupFilter(min_valid=2, tol=1e-6).verdict(rewards) == TOO_FEW_VALID
    assert filter_group(rewards, 2, 1e-6) == TOO_FEW_VALID
    assert group_advantages(rewards, "none") == [None, 0.0, None, None]
    # too_few_valid takes precedence over zero_variance
    assert GroupFilter(min_valid=3, tol=1e-6).verdict([0.3, 0.3, None, None]) == TOO_FEW_VALID


def test_scale_rewards_none_vs_group():
    rewards = [0.0, 1.0, 2.0, 3.0]
    none = group_advantages(rewards, "none")
    group = group_advantages(rewards, "group")
    assert none == pytest.approx([-1.5, -0.5, 0.5, 1.5])
    std = statistics.stdev(rewards)
    assert group == pytest.approx([a / (std + 1e-4) for a in none])
    # a group with twice the spread: unchanged direction, same advantages under "group" only
    doubled = [2 * r for r in rewards]
    assert group_advantages(doubled, "none") == pytest.approx([2 * a for a in none])
    assert group_advantages(doubled, "group") == pytest.approx(group, rel=1e-4)


def test_batch_scaling_uses_std_of_whole_batch():
    groups = [[0.0, 1.0], [0.0, 3.0, None]]
    out = batch_advantages(groups, "batch")
    std = statistics.stdev([0.0, 1.0, 0.0, 3.0])
    assert out[0] == pytest.approx([-0.5 / (std + 1e-4), 0.5 / (std + 1e-4)])
    assert out[1][:2] == pytest.approx([-1.5 / (std + 1e-4), 1.5 / (std + 1e-4)])
    assert out[1][2] is None
    with pytest.raises(ValueError):
        group_advantages([0.0, 1.0], "batch")
    with pytest.raises(ValueError):
        group_advantages([0.0, 1.0], "mean")


# ------------------------------------------------------------------------------------ learner
def test_step_changes_only_lora_weights_and_bumps_version():
    learner = make_learner()
    group = make_group(learner, [1.0, 0.0, 0.5, 0.0])
    lora0, base0 = lora_and_base(learner.model)
    assert lora0 and base0
    assert learner.policy_version == 0
    metrics = learner.step([group])
    lora1, base1 = lora_and_base(learner.model)
    assert learner.policy_version == 1 and metrics["policy_version"] == 1
    assert any(not torch.equal(lora0[k], lora1[k]) for k in lora0)
    assert all(torch.equal(base0[k], base1[k]) for k in base0)
    assert metrics["n_samples"] == 4 and metrics["n_tokens"] == 20 + 25 + 15 + 30
    assert metrics["grad_norm"] > 0 and metrics["skipped"] == 0
    assert metrics["adv_mean"] == pytest.approx(0.0, abs=1e-9)
    for key in ("loss", "lr", "clip_ratio", "entropy", "step_s", "adv_abs_mean", "staleness_mean"):
        assert math.isfinite(metrics[key]), key


@pytest.mark.parametrize("rewards, sign", [([1.0, 0.0, 0.0, 0.0], 1), ([0.0, 1.0, 1.0, 1.0], -1)])
def test_advantage_sign_moves_completion_logprob(rewards, sign):
    learner = make_learner(lr=3e-3)
    group = make_group(learner, rewards)
    before = seq_logprob(learner, group[0])
    for _ in range(4):
        group = refresh(learner, group)
        learner.step([group])
    after = seq_logprob(learner, group[0])
    # a positive advantage raises the completion's log-prob, a negative one lowers it
    assert sign * (after - before) > 5.0  # measured 13-18 nats over 12 model/data seeds


def test_lr_is_constant_after_warmup():
    learner = make_learner(lr=1e-3, warmup_steps=2, total_steps=6)
    lrs = []
    for step in range(5):
        group = make_group(learner, [1.0, 0.0, 0.5, 0.25], seed=step)
        lrs.append(learner.step([group])["lr"])
    assert lrs == pytest.approx([0.0, 5e-4, 1e-3, 1e-3, 1e-3])
    assert learner.lr == pytest.approx(1e-3)


def test_adapter_state_reproduces_logprobs_on_fresh_copy(tmp_path):
    base = tiny_model(seed=3)
    fresh_base, load_base = copy.deepcopy(base), copy.deepcopy(base)  # before the learner wraps ``base``
    learner = make_learner(base, lr=3e-3)
    group = make_group(learner, [1.0, 0.0, 0.3, 0.0])
    for _ in range(2):
        learner.step([refresh(learner, group)])
    state = learner.adapter_state()
    assert state and all(t.device.type == "cpu" for t in state.values())
    lora = learner.cfg.lora
    fresh = get_peft_model(
        fresh_base,
        PeftLoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                       target_modules=lora.target_modules, task_type="CAUSAL_LM"),
    ).eval()
    sample = group[0]
    before = plain_logprobs(fresh, sample.prompt_ids, sample.completion_ids)
    set_peft_model_state_dict(fresh, state)
    after = plain_logprobs(fresh, sample.prompt_ids, sample.completion_ids)
    ours = torch.tensor(learner.completion_logprobs(sample.prompt_ids, sample.completion_ids))
    assert torch.allclose(after, ours, atol=1e-4)
    assert not torch.allclose(before, ours, atol=1e-3)  # the adapter is what makes them agree

    path = learner.save_adapter(tmp_path / "adapter")
    assert (path / "adapter_model.safetensors").exists()
    loaded = PeftModel.from_pretrained(load_base, str(path)).eval()
    assert torch.allclose(plain_logprobs(loaded, sample.prompt_ids, sample.completion_ids), ours, atol=1e-4)


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo"])
def test_micro_batches_accumulate_to_the_full_batch_gradient(loss_type):
    base = tiny_model(seed=5)
    full = make_learner(copy.deepcopy(base), loss_type=loss_type, micro_batch_size=8)
    micro = make_learner(copy.deepcopy(base), loss_type=loss_type, micro_batch_size=1)
    groups = [make_group(full, [1.0, 0.0, 0.2, 0.0], seed=1), make_group(full, [0.0, 0.7, None, 0.1], seed=2)]
    # two steps: the second has non-zero LoRA B, so every LoRA matrix gets a gradient
    for _ in range(2):
        m_full = full.step([refresh(full, g) for g in groups])
        m_micro = micro.step([refresh(micro, g) for g in groups])
        assert m_micro["n_samples"] == m_full["n_samples"] == 7
        assert m_micro["loss"] == pytest.approx(m_full["loss"], rel=1e-4, abs=1e-7)
        assert m_micro["grad_norm"] == pytest.approx(m_full["grad_norm"], rel=1e-3)


def test_filtered_groups_and_none_samples_are_not_trained():
    learner = make_learner()
    good = make_group(learner, [1.0, 0.0, None, 0.5], seed=1)
    flat = make_group(learner, [0.3, 0.3, 0.3, 0.3], seed=2)
    lonely = make_group(learner, [None, 0.9, None, None], seed=3)
    metrics = learner.step([good, flat, lonely])
    assert metrics["groups_accepted"] == 1
    assert metrics["groups_zero_variance"] == 1 and metrics["groups_too_few_valid"] == 1
    assert metrics["n_samples"] == 3 and metrics["samples_excluded"] == 1
    assert metrics["n_tokens"] == 20 + 25 + 30
    lora0, _ = lora_and_base(learner.model)
    skipped = learner.step([flat, lonely])
    assert skipped["skipped"] == 1 and skipped["n_samples"] == 0
    assert learner.policy_version == 1
    lora1, _ = lora_and_base(learner.model)
    assert all(torch.equal(lora0[k], lora1[k]) for k in lora0)


def _on_policy_dapo_loss(group: list[TrainSample], advantages: list[float]) -> float:
    """DAPO loss at ratio 1: minus the token-weighted mean advantage."""
    tokens = sum(len(s.completion_ids) for s in group)
    return -sum(a * len(s.completion_ids) for s, a in zip(group, advantages)) / tokens


def test_loss_is_trl_dapo_and_truncated_is_weights_it():
    rewards = [1.0, 0.0, 0.5, 0.0]
    advantages = group_advantages(rewards, "none")
    ppo = make_learner()
    group = make_group(ppo, rewards)
    expected = _on_policy_dapo_loss(group, advantages)
    assert ppo.step([group])["loss"] == pytest.approx(expected, rel=1e-4)

    tis = make_learner(truncated_is_clip=2.0)
    group = make_group(tis, rewards)
    # behaviour policy 4x less likely on every token than the learner: ratio 4, truncated to 2
    stale = [TrainSample(s.prompt_ids, s.completion_ids, [lp - math.log(4.0) for lp in s.logprobs], s.reward)
             for s in group]
    metrics = tis.step([stale])
    assert metrics["is_ratio_mean"] == pytest.approx(4.0, rel=1e-3)
    assert metrics["is_truncated_frac"] == 1.0
    assert metrics["loss"] == pytest.approx(2.0 * expected, rel=1e-3)


def test_kl_penalty_against_the_base_model():
    learner = make_learner(lr=3e-3, beta=0.1)
    group = make_group(learner, [1.0, 0.0, 0.0, 0.0])
    first = learner.step([group])
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # LoRA B starts at zero: policy == base
    for _ in range(3):
        last = learner.step([refresh(learner, group)])
    assert last["kl"] > 1e-6


# ---------------------------------------------------------------------------------- Ray actor
def _loader(policy_cfg):
    """Policy loader shipped to the actor (pickled by value, see the fixture)."""
    return tiny_model(seed=7), tiny_tokenizer()


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    previous = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    start_local_ray(num_cpus=4)
    yield ray
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    if previous is None:
        os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    else:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = previous


def _pipeline_sample(prompt, completion, logprobs, reward, group_id) -> Sample:
    c = Completion(prompt="a coral poppy", text="", prompt_ids=prompt, completion_ids=completion,
                   logprobs=logprobs, policy_version=0)
    return Sample(completion=c, code="", seed=0, group_id=group_id, step=1, gate=GateVerdict("pass"), reward=reward)


def test_actor_steps_on_pipeline_samples(ray_cluster):
    ray = ray_cluster
    cfg = BrushRLConfig.model_validate({"learner": {"lr": 3e-3, "warmup_steps": 0}, "rollout": {"group_size": 4}})
    actor = make_learner_actor(cfg, total_steps=3, policy_loader=_loader)
    gen = torch.Generator().manual_seed(11)
    prompt = random_ids(gen, 6)
    completions = [random_ids(gen, n) for n in (18, 22, 16, 20)]
    logprobs = [ray.get(actor.completion_logprobs.remote(prompt, c)) for c in completions]
    rewards = [1.0, 0.0, None, 0.0]
    group = [_pipeline_sample(prompt, c, lp, r, 0) for c, lp, r in zip(completions, logprobs, rewards)]
    metrics = ray.get(actor.step.remote([group]))
    assert metrics["n_samples"] == 3 and metrics["samples_excluded"] == 1
    assert ray.get(actor.policy_version.remote()) == 1
    state = ray.get(actor.adapter_state.remote())
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in state.items())
    after = ray.get(actor.completion_logprobs.remote(prompt, completions[0]))
    assert sum(after) > sum(logprobs[0])
    ray.kill(actor)


def test_activation_checkpointing_is_on_when_asked_and_gives_the_same_gradient():
    """On a GPU the learner checkpoints activations (the plan's memory assumes it); transformers
    switches it on only inside Trainer.train(), which brushrl never calls, so the learner does.
    The H200 smoke ran out of memory without it (docs/perf/gpu_smoke.md). Forced on here on the
    CPU: the model reports it, and one step's LoRA update equals the one without it."""
    plain, ckpt = make_learner(activation_checkpointing=False), make_learner(activation_checkpointing=True)
    assert not plain.model.is_activation_checkpointing and ckpt.model.is_activation_checkpointing
    group = make_group(plain, [1.0, 0.0, 0.5, 0.0])
    plain.step([group])
    ckpt.step([make_group(ckpt, [1.0, 0.0, 0.5, 0.0])])
    a, _ = lora_and_base(plain.model)
    b, _ = lora_and_base(ckpt.model)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------ gate_quality advantages (issue 35)
def test_gate_quality_gives_quality_among_passes_the_gate_s_weight():
    """Two groups of 4: 2 passes (0.40, 0.50) and 2 failures each. Under the total, the worse pass's
    lead over a failure (0.40) is 4x the better pass's lead over it (0.10); under gate_quality both
    channels are z-scored (gate: +-0.866 for g = 1, 1, 0, 0; quality: +-0.707 for the two passes),
    so the better pass's lead (2 x 0.707) exceeds the worse pass's over a failure (2 x 0.866 - 0.707).
    The sum keeps the total's batch spread, and None stays None."""
    from brushrl.learner.advantages import gate_quality_advantages, reward_std

    groups = [[0.40, 0.50, 0.0, 0.0], [0.0, 0.40, None, 0.50]]
    passed = [[True, True, False, False], [False, True, None, True]]
    total = batch_advantages(groups, "none")
    dec = gate_quality_advantages(groups, passed)
    assert dec[1][2] is None
    lead_total = total[0][1] - total[0][0]
    gap_total = total[0][0] - total[0][2]
    assert gap_total / lead_total == pytest.approx(4.0)  # 0.40 vs 0.10
    a = dec[0]
    z_g, z_q = 1 / (2 * math.sqrt(1 / 3)), 0.05 / math.sqrt(0.005)  # 0.866, 0.707
    assert (a[1] - a[0]) / (a[0] - a[2]) == pytest.approx(2 * z_q / (2 * z_g - z_q), rel=1e-2)  # 1.38 (STD_EPS aside)
    assert sum(x for g in dec for x in g if x is not None) == pytest.approx(0.0, abs=1e-9)
    flat = [x for g in dec for x in g if x is not None]
    assert reward_std(flat) == pytest.approx(reward_std([r for g in groups for r in g if r is not None]))
    # one pass: no quality channel, only the gate's; all failed: no signal at all
    one = gate_quality_advantages([[0.5, 0.0, 0.0]], [[True, False, False]])[0]
    assert one[0] > 0 and one[1] == one[2] < 0
    assert gate_quality_advantages([[0.0, 0.0]], [[False, False]]) == [[0.0, 0.0]]
    with pytest.raises(ValueError, match="gate verdict"):
        gate_quality_advantages([[0.5, 0.0]], [[True, None]])


def test_gate_quality_scale_rewards_gives_an_all_pass_batch_the_spread_of_one_with_failures():
    """Under ``none`` a group that all passed keeps quality's raw spread (0.05 here: a step of it
    moves the policy a fraction of a step with a failure); ``batch`` and ``group`` give every batch
    or group unit spread, with the same order and signs as ``none``."""
    from brushrl.learner.advantages import gate_quality_advantages, reward_std

    all_pass = [[0.55, 0.60, 0.65, 0.70]]
    verdicts = [[True] * 4]
    mixed = [[0.0, 0.40, 0.50, 0.0]]
    mixed_v = [[False, True, True, False]]
    none = gate_quality_advantages(all_pass, verdicts, 1e-6)[0]
    assert reward_std(none) == pytest.approx(reward_std(all_pass[0]))  # 0.065: quality's own spread
    for scale in ("batch", "group"):
        unit = gate_quality_advantages(all_pass, verdicts, 1e-6, scale)[0]
        assert reward_std(unit) == pytest.approx(1.0)
        assert [math.copysign(1, a) for a in unit] == [math.copysign(1, a) for a in none]
        assert reward_std(gate_quality_advantages(mixed, mixed_v, 1e-6, scale)[0]) == pytest.approx(1.0)
    # two groups in one batch: "group" scales each to unit spread, "batch" the two together
    both = gate_quality_advantages(all_pass + mixed, verdicts + mixed_v, 1e-6, "group")
    assert [reward_std(g) for g in both] == pytest.approx([1.0, 1.0])
    batch = gate_quality_advantages(all_pass + mixed, verdicts + mixed_v, 1e-6, "batch")
    assert reward_std([a for g in batch for a in g]) == pytest.approx(1.0)
    # nothing to scale: a group without spread stays 0, never divided by it
    assert gate_quality_advantages([[0.5, 0.5]], [[True, True]], 1e-6, "group") == [[0.0, 0.0]]
    with pytest.raises(ValueError, match="scale_rewards"):
        gate_quality_advantages(all_pass, verdicts, 1e-6, "whole")


def test_learner_trains_with_gate_quality_advantages():
    learner = make_learner(advantage="gate_quality")
    group = make_group(learner, [0.4, 0.5, 0.0, 0.0])
    for s, ok in zip(group, (True, True, False, False)):
        s.passed = ok
    metrics = learner.step([group])
    assert metrics["grad_norm"] > 0 and metrics["n_samples"] == 4
    unknown = make_group(learner, [0.4, 0.5, 0.0, 0.0])  # no verdicts: refused, never trained as 0
    with pytest.raises(ValueError, match="gate verdict"):
        learner.step([unknown])
