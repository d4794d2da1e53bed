"""Multi-turn revision (``rollout.turns`` > 1): trajectories through TRL's loss with critique tokens
masked, staleness by the oldest turn, the rollout engine's revision turns, the critics, and K=1
staying exactly single-turn GRPO.

Real parts throughout: tiny Qwen3 models built from configs, TRL's GRPO loss with PEFT LoRA, the
brushrl tokenizer and chat template; the producer tests in ``tests/test_revision_pipeline.py`` add
local Ray, Chromium and the scorers.
"""

from __future__ import annotations

import asyncio
import copy
import math

import pytest
import torch

from brushrl.config import BrushRLConfig, RevisionConfig
from brushrl.learner import GroupFilter, TrainSample
from brushrl.learner.batch import collate
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.loop import GRPOLoop
from brushrl.orchestrator.producer import GroupCounts, Ticket
from brushrl.reward.trajectory import trajectory_reward
from brushrl.types import Completion, Critique, GateVerdict, Group, Sample, Trajectory
from test_async import Engine, TimedLearner, make_draw, run_loop
from test_learner import EOS, make_learner, random_ids, tiny_model

torch.set_num_threads(1)


def _sample(prompt_ids, completion_ids, logprobs, version=0, reward=None, turn=None, member=None, group_id=0):
    c = Completion("a coral poppy", "", list(prompt_ids), list(completion_ids), list(logprobs), version)
    return Sample(c, "", 0, group_id, 1, GateVerdict("pass"), reward=reward, turn=turn, member=member)


def two_turn(learner, gen, reward, versions=(0, 0), critique_len=7, lengths=(12, 9)) -> Trajectory:
    """A trajectory of two turns on random tokens: prompt P -> reply R1 (ends EOS) -> critique C ->
    reply R2, each turn's behaviour log-probs from the learner's current policy in its own context."""
    prompt = random_ids(gen, 6)
    r1 = random_ids(gen, lengths[0] - 1) + [EOS]
    critique = random_ids(gen, critique_len)
    r2 = random_ids(gen, lengths[1] - 1) + [EOS]
    ctx2 = prompt + r1 + critique
    t1 = _sample(prompt, r1, learner.completion_logprobs(prompt, r1), versions[0], reward, 1, 0)
    t2 = _sample(ctx2, r2, learner.completion_logprobs(ctx2, r2), versions[1], reward, 2, 0)
    t1.critique = Critique("text")
    return Trajectory(0, [t1, t2], reward)


def _grads(learner, samples: list[TrainSample], advantages: list[float]) -> tuple[float, dict[str, torch.Tensor]]:
    """The learner's TRL loss on one batch with the given advantages, and the LoRA gradients."""
    learner.model.train()
    learner.trainer.optimizer.zero_grad(set_to_none=True)
    n_tokens = sum(s.n_policy_tokens for s in samples)
    stats = {"is_ratio_sum": 0.0, "is_ratio_max": 0.0, "is_truncated": 0.0}
    batch = collate(samples, advantages, learner.pad_token_id, learner.device)
    inputs = learner._loss_inputs(batch, n_tokens, stats)
    with learner.trainer.compute_loss_context_manager():
        loss = learner.trainer.compute_loss(learner.model, inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in learner.model.named_parameters() if p.grad is not None}
    learner.trainer.optimizer.zero_grad(set_to_none=True)
    return float(loss.detach()), grads


# ------------------------------------------------------------------------------------ K = 1
def test_single_turn_members_are_the_samples_themselves_and_train_the_same():
    """K=1: a group's members are its samples, their training sequences are exactly the single-turn
    ones (no mask in the batch), and a learner step on them gives the same loss and weights."""
    reference = make_learner(model=tiny_model(seed=3))
    gen = torch.Generator().manual_seed(5)
    prompt = random_ids(gen, 6)
    samples = []
    for i, (reward, n) in enumerate(zip([1.0, 0.0, 0.5, None], (14, 9, 11, 8))):
        completion = random_ids(gen, n)
        samples.append(_sample(prompt, completion, reference.completion_logprobs(prompt, completion), 0, reward))
    group = Group(0, "a coral poppy", 0, samples)
    assert [t.turns for t in group.members] == [[s] for s in samples] and group.rewards == [1.0, 0.0, 0.5, None]
    old = [TrainSample.from_sample(s) for s in samples]
    new = [TrainSample.from_trajectory(t) for t in group.members]
    assert new == old and all(t.loss_mask is None for t in new)
    assert "tool_mask" not in collate(new[:3], [0.1, 0.2, 0.3], 2)

    a, b = make_learner(model=tiny_model(seed=3)), make_learner(model=tiny_model(seed=3))
    ma, mb = a.step([old]), b.step([new])
    assert ma["loss"] == mb["loss"] and ma["n_tokens"] == mb["n_tokens"] == 14 + 9 + 11
    for (na, pa), (nb, pb) in zip(a.model.named_parameters(), b.model.named_parameters()):
        assert na == nb and torch.equal(pa, pb)


# ------------------------------------------------------------------------------------ K = 2
def test_a_trajectory_is_one_sequence_with_its_critique_tokens_masked():
    learner = make_learner()
    gen = torch.Generator().manual_seed(1)
    traj = two_turn(learner, gen, 1.0, critique_len=7, lengths=(12, 9))
    t = TrainSample.from_trajectory(traj)
    first, second = traj.turns[0].completion, traj.turns[1].completion
    assert t.prompt_ids == first.prompt_ids
    assert t.completion_ids == first.completion_ids + second.prompt_ids[len(first.prompt_ids) + 12:] + second.completion_ids
    assert t.loss_mask == [1] * 12 + [0] * 7 + [1] * 9 and t.n_policy_tokens == 21
    assert t.logprobs[12:19] == [0.0] * 7 and t.logprobs[19:] == second.logprobs
    batch = collate([t, TrainSample(first.prompt_ids, first.completion_ids, first.logprobs, 0.0)], [1.0, -1.0], 2)
    assert batch["tool_mask"][0].tolist() == t.loss_mask
    assert batch["tool_mask"][1].tolist() == [1] * 28 and batch["completion_mask"][0].sum() == 28  # attended

    broken = copy.deepcopy(traj)
    broken.turns[1].completion.prompt_ids[3] += 1  # a re-tokenised context: the invariant is gone
    with pytest.raises(ValueError, match="does not extend"):
        TrainSample.from_trajectory(broken)


def test_critique_tokens_carry_no_gradient():
    """TRL's loss on the one-sequence trajectory equals, in value and in every LoRA gradient, the loss
    on its two turns as separate samples (turn 2's prompt holding the critique) with the same
    advantage: the critique tokens are attended to but carry no loss. Changing their (unused)
    log-probs changes nothing; dropping the mask does."""
    learner = make_learner(lr=3e-3)
    learner.step([[TrainSample([3, 4], [5, 6, EOS], [-1.0] * 3, r) for r in (1.0, 0.0)]])  # LoRA B != 0
    gen = torch.Generator().manual_seed(2)
    traj = two_turn(learner, gen, 1.0)
    whole = TrainSample.from_trajectory(traj)
    split = [TrainSample.from_sample(s) for s in traj.turns]
    loss_whole, g_whole = _grads(learner, [whole], [0.7])
    loss_split, g_split = _grads(learner, split, [0.7, 0.7])
    assert loss_whole == pytest.approx(loss_split, rel=1e-5)
    assert g_whole.keys() == g_split.keys() and g_whole
    for name in g_whole:
        assert torch.allclose(g_whole[name], g_split[name], atol=1e-6, rtol=1e-4), name

    noisy = copy.deepcopy(whole)
    noisy.logprobs[12:19] = [-5.0] * 7  # behaviour log-probs at critique positions: never read
    loss_noisy, g_noisy = _grads(learner, [noisy], [0.7])
    assert loss_noisy == loss_whole and all(torch.equal(g_noisy[n], g_whole[n]) for n in g_whole)
    unmasked = TrainSample(whole.prompt_ids, whole.completion_ids, noisy.logprobs, 1.0)
    loss_unmasked, _ = _grads(learner, [unmasked], [0.7])
    assert abs(loss_unmasked - loss_whole) > 1e-4


def test_learner_steps_on_trajectories_and_counts_policy_tokens_only():
    learner = make_learner(lr=3e-3)
    gen = torch.Generator().manual_seed(4)
    group = [two_turn(learner, gen, r) for r in (1.0, 0.0, 0.25)]
    before = [sum(learner.completion_logprobs(t.turns[1].completion.prompt_ids, t.turns[1].completion.completion_ids))
              for t in group]
    metrics = learner.step([group])
    assert metrics["n_samples"] == 3 and metrics["n_tokens"] == 3 * 21
    after = [sum(learner.completion_logprobs(t.turns[1].completion.prompt_ids, t.turns[1].completion.completion_ids))
             for t in group]
    assert after[0] > before[0] and after[1] < before[1]  # the best trajectory's revision became likelier


def test_trajectory_staleness_is_its_oldest_turn():
    learner = make_learner()
    traj = two_turn(learner, torch.Generator().manual_seed(3), 1.0, versions=(3, 4))
    assert traj.policy_version == 3 and TrainSample.from_trajectory(traj).policy_version == 3

    # In the loop: group 0's first turn is sampled at version 0, its revision only once the learner
    # is at version 2. Its newest turn is within max_staleness = 1, its oldest is not: dropped.
    engine = Engine()
    timed = TimedLearner(engine, learn_s=0.01)

    async def produce(ticket: Ticket, step: int):
        first = engine.version
        if ticket.group_id == 0:
            while engine.version < 2:
                await asyncio.sleep(0.005)
        else:
            await asyncio.sleep(0.01)
        trajectories = []
        for m, r in enumerate((0.2, 0.9)):
            t1 = _sample([1], [2], [-0.5], first, r, 1, m, ticket.group_id)
            t2 = _sample([1, 2, 9], [3], [-0.5], engine.version, r, 2, m, ticket.group_id)
            trajectories.append(Trajectory(m, [t1, t2], r))
        group = Group(ticket.group_id, "p", 0, [s for t in trajectories for s in t.turns], trajectories)
        counts = GroupCounts()
        counts.outcome["scored"] += 4
        return group, counts

    loop = GRPOLoop(GroupLedger(groups_per_step=1, max_staleness=1), GroupFilter(), make_draw(), produce, timed)
    reports = run_loop(loop, 5)
    ended = {e.ticket.group_id: e for r in reports for e in r.ended}
    assert ended[0].status == "stale" and ended[0].generated_by == 0
    assert 0 not in [g for batch in timed.trained for g in batch]
    assert max(s for r in reports for s in r.staleness) <= 1


# -------------------------------------------------------------------------- trajectory reward
def test_trajectory_reward_final_improvement_and_none_by_cause():
    final, improvement = RevisionConfig(), RevisionConfig(trajectory_reward="improvement", improvement_bonus=0.5)
    assert trajectory_reward([(0.2, None), (0.6, None)], final) == (0.6, None)
    assert trajectory_reward([(0.2, None), (0.6, None)], improvement) == (pytest.approx(0.8), None)
    assert trajectory_reward([(0.6, None), (0.2, None)], improvement) == (0.2, None)  # no bonus for getting worse
    assert trajectory_reward([(0.0, None), (0.0, None)], final) == (0.0, None)  # two gate failures: a fault, 0
    assert trajectory_reward([(0.3, None), (None, "render_infra")], final) == (None, "turn2:render_infra")
    assert trajectory_reward([(0.3, None)], final, critic_cause="timeout") == (None, "critic:timeout")
    assert BrushRLConfig().rollout.turns == 1 and not math.isnan(final.improvement_bonus)


# ------------------------------------------------------------------------------ rollout engine
@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    """A tiny Qwen3 policy with brushrl's corpus-trained tokenizer and ChatML template, saved like a
    checkpoint (untrained: it samples noise, which is all the token bookkeeping needs)."""
    from brushrl.config import TinyModelConfig
    from brushrl.corpus.build import as_reply, build_corpus
    from brushrl.policy.model import build_tiny_model
    from brushrl.policy.tokenizer import train_tokenizer
    from brushrl.prompts import SYSTEM_PROMPT, revision_prompt

    texts = [SYSTEM_PROMPT, revision_prompt("The top left of the canvas is empty.")]
    texts += [as_reply(item.code) for item in build_corpus(1)[:3]]
    tok = train_tokenizer(texts, 600)
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                             num_key_value_heads=2, intermediate_size=128), tok)
    path = tmp_path_factory.mktemp("tiny_policy")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_next_context_extends_the_previous_turn_token_for_token(tiny_policy):
    from transformers import AutoTokenizer

    from brushrl.prompts import SYSTEM_PROMPT, chat_messages, revision_prompt
    from brushrl.conversation import critique_turn_ids, next_context

    tok = AutoTokenizer.from_pretrained(tiny_policy)
    user, reply, critique = "Paint a coral poppy in loose watercolour.", "```js\nbrush.noStroke();\n```", "Paint more."
    prompt_ids = tok.apply_chat_template(chat_messages(SYSTEM_PROMPT, user), add_generation_prompt=True, tokenize=True)
    prompt_ids = list(prompt_ids["input_ids"] if hasattr(prompt_ids, "keys") else prompt_ids)
    ended = Completion(user, reply, prompt_ids, tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
                       [0.0] * 0, 0)
    ended.logprobs = [0.0] * len(ended.completion_ids)
    ctx = next_context(tok, SYSTEM_PROMPT, ended, critique)
    assert ctx[: len(prompt_ids) + len(ended.completion_ids)] == prompt_ids + ended.completion_ids
    whole = tok.apply_chat_template([*chat_messages(SYSTEM_PROMPT, user), {"role": "assistant", "content": reply},
                                     {"role": "user", "content": revision_prompt(critique)}],
                                    add_generation_prompt=True, tokenize=False)
    assert tok.decode(ctx) == whole  # the same conversation the template writes, tokens as sampled
    cut = copy.deepcopy(ended)
    cut.completion_ids, cut.truncated = cut.completion_ids[:-1], True  # stopped at max_new_tokens
    delta = critique_turn_ids(tok, SYSTEM_PROMPT, cut, critique)
    assert delta[0] == tok.eos_token_id and tok.decode(next_context(tok, SYSTEM_PROMPT, cut, critique)) == whole


def test_engine_revises_each_member_in_its_own_conversation(tiny_policy):
    from brushrl.config import LoraConfig, PolicyConfig, RolloutConfig
    from brushrl.prompts import SYSTEM_PROMPT
    from brushrl.rollout.transformers_engine import TransformersEngine

    engine = TransformersEngine(PolicyConfig(model=str(tiny_policy)), RolloutConfig(max_new_tokens=24), SYSTEM_PROMPT,
                                LoraConfig(r=4, alpha=8))
    (first,) = engine.generate(["Paint a coral poppy in loose watercolour."], 3, seed=0)
    critiques = [Critique("Paint more."), Critique("The top of the canvas is empty where the references paint."),
                 Critique("Nothing to fix.")]
    revised = engine.revise(list(zip(first, critiques)), seed=1)
    assert len(revised) == 3
    model = engine.model
    for prev, crit, new in zip(first, critiques, revised):
        seen = prev.prompt_ids + prev.completion_ids
        assert new.prompt_ids[: len(seen)] == seen and new.prompt == prev.prompt and new.policy_version == 0
        assert "Here is a critique" in engine.tokenizer.decode(new.prompt_ids[len(seen):]) and crit.text in \
            engine.tokenizer.decode(new.prompt_ids[len(seen):])
        # behaviour log-probs of the left-padded batch = the model's on the unpadded sequence
        ids = torch.tensor([new.prompt_ids + new.completion_ids])
        with torch.no_grad():
            logps = model(input_ids=ids).logits.float().log_softmax(-1)[0, len(new.prompt_ids) - 1 : -1]
        expected = logps.gather(-1, torch.tensor(new.completion_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(new.logprobs), expected, atol=2e-4)
    trajectory = Trajectory(0, [_sample(first[0].prompt_ids, first[0].completion_ids, first[0].logprobs, turn=1),
                                _sample(revised[0].prompt_ids, revised[0].completion_ids, revised[0].logprobs, turn=2)])
    assert TrainSample.from_trajectory(trajectory).n_policy_tokens == len(first[0].completion_ids) + len(
        revised[0].completion_ids)


def test_a_revision_turn_never_outgrows_the_model_positions(tiny_policy):
    from brushrl.config import LoraConfig, PolicyConfig, RolloutConfig
    from brushrl.conversation import next_context
    from brushrl.prompts import SYSTEM_PROMPT
    from brushrl.rollout.transformers_engine import TransformersEngine

    engine = TransformersEngine(PolicyConfig(model=str(tiny_policy)), RolloutConfig(max_new_tokens=40), SYSTEM_PROMPT,
                                LoraConfig(r=4, alpha=8))
    (first,) = engine.generate(["Paint a coral poppy in loose watercolour."], 1, seed=0)
    context = next_context(engine.tokenizer, SYSTEM_PROMPT, first[0], "Paint more.")
    engine.model.config.max_position_embeddings = len(context) + 5
    (revised,) = engine.revise([(first[0], Critique("Paint more."))], seed=1)
    assert len(revised.prompt_ids) == len(context) and len(revised.completion_ids) <= 5
