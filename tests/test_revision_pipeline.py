"""Multi-turn revision on the pipeline's real parts (local Ray, Chromium renderers, gate, pool scorer,
the critic actor) with replies fed in by a replay rollout actor: trajectories, their rows and
metrics, the CPU critic's critiques of damaged corpus sketches, and critic failures giving None for
the trajectory by cause, never 0."""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path

import pytest
import ray

from brushrl.artifacts.run_dir import ROLLOUT_COLUMNS, TURN_COLUMNS, sample_row
from brushrl.config import load_config
from brushrl.corpus.build import as_reply, build_corpus
from brushrl.corpus.damage import DAMAGES
from brushrl.learner import GroupFilter
from brushrl.orchestrator.loop import Ended, StepReport
from brushrl.orchestrator.producer import GroupCounts, GroupProducer, produce_trajectories
from brushrl.orchestrator.record import step_record
from brushrl.ray_setup import start_local_ray
from brushrl.render.pool import RenderPool
from brushrl.reward.actor import CriticActor, make_scorer_actor
from brushrl.types import Completion
from test_producer import REPLIES

ROOT = Path(__file__).resolve().parents[1]
#: What a replayed reply is revised into.
REVISED = {"syntax": "good", "blank": "good", "good": "good", "text": "syntax"}


class ReplayRevisingRollout:
    """Replays the given reply texts as a group and revises each into ``revised[previous text]``; a
    critique turn is one token (99) appended to the previous turn's tokens, as
    ``RolloutEngine.revise`` requires. A stand-in for the policy; nothing else changes."""

    def __init__(self, texts: list[str], revised: dict[str, str]):
        self.texts, self.revised = texts, revised
        self.seen: list[str] = []

    def generate(self, prompts, n, seed=None):
        return [[Completion(p, self.texts[i % len(self.texts)], [1, 2], [3, 4], [-0.1, -0.2], 0) for i in range(n)]
                for p in prompts]

    def revise(self, requests, seed=None):
        out = []
        for prev, critique in requests:
            self.seen.append(critique.text)
            out.append(Completion(prev.prompt, self.revised[prev.text], prev.prompt_ids + prev.completion_ids + [99],
                                  [5, 6], [-0.3, -0.4], 1))
        return out

    def critiques(self):
        return self.seen


def replay(kinds: list[str]):
    """A :class:`ReplayRevisingRollout` actor for ``REPLIES`` kinds, revised per ``REVISED``."""
    revised = {REPLIES[k](): REPLIES[v]() for k, v in REVISED.items()}
    return ray.remote(ReplayRevisingRollout).remote([REPLIES[k]() for k in kinds], revised)


class BrokenCritic(CriticActor):
    def critique(self, samples, prompt, seed):
        raise RuntimeError("critic crashed")


class SlowCritic(CriticActor):
    def critique(self, samples, prompt, seed):
        time.sleep(30)
        return super().critique(samples, prompt, seed)


def _config(critic_timeout_s: float):
    return load_config(ROOT / "configs/local.yaml", {"rollout.group_size": 4, "render.num_actors": 2,
                                                   "rollout.turns": 2, "reward.critic": {"timeout_s": critic_timeout_s}})


@pytest.fixture(scope="module")
def parts():
    start_local_ray(num_cpus=4, runtime_env={"env_vars": {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}})
    cfg = _config(critic_timeout_s=120.0)
    pool = RenderPool(cfg.render)
    scorer = make_scorer_actor(cfg.reward.pool)
    yield cfg, pool, scorer
    pool.shutdown()
    ray.shutdown()


def _producer(cfg, pool, scorer, kinds, critic_cls=CriticActor, seed=0):
    """A producer over the fixture's parts, a replay rollout of ``kinds`` and a loaded critic
    actor (as ``RewardActors.wait_loaded`` makes a run wait: a critique's timeout must not count
    the actor's start on a loaded box)."""
    rollout = replay(kinds)
    critic = ray.remote(critic_cls).remote(cfg.reward, cfg.prompts.template, cfg.render.canvas_size)
    ray.get(critic.__ray_ready__.remote())
    return GroupProducer(cfg, rollout, pool, scorer, random.Random(seed), critic), rollout


def test_two_turn_trajectories_revise_with_the_cpu_critique(parts):
    cfg, pool, scorer = parts
    producer, rollout = _producer(cfg, pool, scorer, ["good", "syntax", "blank", "text"])
    group, counts = asyncio.run(producer.produce(producer.ticket(), step=1))
    by_kind = dict(zip(["good", "syntax", "blank", "text"], group.trajectories))
    assert [t.member for t in group.trajectories] == [0, 1, 2, 3]
    assert len(group.samples) == sum(len(t.turns) for t in group.trajectories)
    assert sum(counts.outcome.values()) == len(group.samples)  # every turn's sample has one outcome
    syntax = by_kind["syntax"]
    assert [s.turn for s in syntax.turns] == [1, 2] and syntax.turns[0].reward == 0.0
    assert "syntax_error" in syntax.turns[0].critique.text and syntax.turns[1].gate.passed
    assert syntax.reward == syntax.turns[1].reward > 0  # final-turn reward: the repaired sketch scores
    assert "blank_canvas" in by_kind["blank"].turns[0].critique.text
    assert by_kind["text"].turns[1].gate.verdict == "syntax_error" and by_kind["text"].reward == 0.0
    good = by_kind["good"]
    assert good.turns[0].critique.ok and "of the canvas" in good.turns[0].critique.text
    assert good.stop in ("turns", "done") and len(good.turns) == (1 if good.stop == "done" else 2)
    for t in group.trajectories:  # no reward number is leaked (reward.critic.show_reward is off)
        for s in t.turns[:-1]:
            assert not re.search(r"reward \d", s.critique.text, re.I)
            assert not s.reward or f"{s.reward:.2f}" not in s.critique.text
        assert t.turns[-1].critique is None  # the last painting is not critiqued
    assert counts.critic_s > 0 and counts.stops["turns"] + counts.stops["done"] == 4
    assert set(ray.get(rollout.critiques.remote())) <= {s.critique.text for t in group.trajectories for s in t.turns
                                                         if s.critique is not None}
    assert GroupFilter().verdict(group.rewards) == "accepted"

    ended = Ended(producer.ticket(), group, "accepted", counts, 0)
    report = StepReport(1, 0, 1, [group], [ended], [0], {}, 0.1, 0.1, 0.1, {}, 0)
    step = step_record(report, cfg.reward)
    rec = step.record
    assert rec["turn/1/samples"] == 4 and rec["turn/1/gate_pass_rate"] == 0.25
    assert rec["turn/2/gate_pass_rate"] >= 0.5 and rec["turn/2/reward_mean"] > rec["turn/1/reward_mean"]
    assert 0 < rec["trajectory/improved_share"] <= 1 and rec["time/critic_s"] > 0
    rows = [sample_row(s, i, status, t) for s, i, status, t in step.samples]
    assert len(rows) == len(group.samples) and all(set(TURN_COLUMNS) <= set(r) for r in rows)
    syntax_rows = [r for r in rows if r["trajectory_id"] == f"{group.group_id}-1"]
    assert [r["turn"] for r in syntax_rows] == [1, 2] and "syntax_error" in syntax_rows[0]["critique"]
    assert syntax_rows[1]["critique"] is None and syntax_rows[0]["trajectory_reward"] == syntax.reward


def test_single_turn_groups_have_no_trajectories_and_single_turn_rows(parts):
    """``turns: 1`` is the single-turn pipeline: no critic call, no trajectories, rows without the
    multi-turn columns (the columns of every single-turn run so far)."""
    cfg, pool, scorer = parts
    producer, _ = _producer(cfg, pool, scorer, ["good", "syntax"])
    producer.critic = None  # a single-turn group must not need (or call) a critic
    group, counts = asyncio.run(producer.produce(producer.ticket(), step=1, turns=1))
    assert not group.trajectories and len(group.samples) == 4 and counts.critic_s == 0 and not counts.stops
    assert all(s.turn is None and s.critique is None for s in group.samples)
    rows = [sample_row(s, i, "accepted") for i, s in enumerate(group.samples)]
    assert not set(TURN_COLUMNS) & set(rows[0]) and set(ROLLOUT_COLUMNS) <= set(rows[0])
    assert group.rewards == [s.reward for s in group.samples]
    with pytest.raises(ValueError, match="critic"):
        asyncio.run(producer.produce(producer.ticket(), step=1, turns=2))


def test_stop_on_gate_pass_revises_only_the_broken_paintings(parts):
    """``rollout.revision.stop_on_gate_pass``: a painting that passes the gate ends its trajectory
    (stop ``gate_pass``, no critique asked, its reward kept); the broken ones are critiqued and revised."""
    cfg, pool, scorer = parts
    cfg = load_config(ROOT / "configs/local.yaml", {"rollout.group_size": 4, "render.num_actors": 2, "rollout.turns": 2,
                                                   "rollout.revision.stop_on_gate_pass": True})
    producer, rollout = _producer(cfg, pool, scorer, ["good", "syntax", "blank", "text"])
    group, counts = asyncio.run(producer.produce(producer.ticket(), step=1))
    good, syntax, blank, text = group.trajectories
    assert good.stop == "gate_pass" and len(good.turns) == 1 and good.turns[0].critique is None
    assert good.reward == good.turns[0].reward > 0
    for t in (syntax, blank, text):
        assert t.stop == "turns" and [s.turn for s in t.turns] == [1, 2] and t.turns[0].critique.ok
    assert syntax.turns[1].gate.passed and syntax.reward == syntax.turns[1].reward > 0
    assert len(ray.get(rollout.critiques.remote())) == 3  # the passing painting was never sent to the policy
    assert counts.stops == {"gate_pass": 1, "turns": 3}
    assert sum(counts.outcome.values()) == len(group.samples) == 7


@pytest.mark.parametrize("critic_cls, cause", [(BrokenCritic, "critic:error:RuntimeError"),
                                                (SlowCritic, "critic:timeout")])
def test_a_critic_failure_is_none_for_its_trajectories_never_zero(parts, critic_cls, cause):
    _, pool, scorer = parts
    cfg = _config(critic_timeout_s=5.0)  # SlowCritic sleeps 30 s
    producer, _ = _producer(cfg, pool, scorer, ["good", "syntax"], critic_cls)
    group, counts = asyncio.run(producer.produce(producer.ticket(), step=1))
    assert [t.reward for t in group.trajectories] == [None] * 4
    assert [t.none_cause for t in group.trajectories] == [cause] * 4 and counts.none == {cause: 4}
    assert all(t.stop == "none" and len(t.turns) == 1 for t in group.trajectories)
    assert [t.turns[0].reward for t in group.trajectories][1] == 0.0  # the turn's own reward is kept
    assert GroupFilter().verdict(group.rewards) == "too_few_valid"  # excluded, not trained as 0


def test_eval_hook_runs_trajectories_for_a_list_of_prompts(parts):
    cfg, pool, scorer = parts
    producer, _ = _producer(cfg, pool, scorer, ["syntax"])
    prompts = ["Paint a coral poppy in loose watercolour.", "Paint a violet iris in loose watercolour."]
    groups = asyncio.run(produce_trajectories(producer, prompts, [11, 12], turns=2))
    assert [g.prompt for g in groups] == prompts and [g.seed for g in groups] == [11, 12]
    for g in groups:
        assert len(g.trajectories) == 4
        assert all([s.turn for s in t.turns] == [1, 2] and not t.turns[0].gate.passed and t.turns[1].gate.passed
                   for t in g.trajectories)


# ------------------------------------------------------------------------------ CPU critic
def test_the_cpu_critic_names_what_each_damage_broke(parts):
    """Real renders of damaged corpus sketches through the pipeline's gate, render and scorer; the
    CPU critic's critique names the fault each damage made."""
    cfg, pool, scorer = parts
    item = next(i for i in build_corpus(1) if i.subject == "a peach hibiscus")
    damaged = {name: fn(item.code, random.Random(name)) for name, fn in DAMAGES.items()}
    damaged["original"] = item.code

    kinds = list(damaged)
    rollout = ray.remote(ReplayRevisingRollout).remote([as_reply(damaged[k]) for k in kinds], {})
    critic = ray.remote(CriticActor).remote(cfg.reward, cfg.prompts.template, cfg.render.canvas_size)
    producer = GroupProducer(cfg, rollout, pool, scorer, random.Random(0), critic)
    prompt = "Paint a peach hibiscus in loose watercolour."
    (completions,) = ray.get(rollout.generate.remote([prompt], len(kinds)))
    samples = asyncio.run(producer._turn(producer.ticket(), completions, 1, GroupCounts()))
    texts = dict(zip(kinds, [c.text for c in ray.get(critic.critique.remote(samples, prompt, 0))]))
    assert re.search(r"syntax_error|truncated", texts["break_syntax"])
    assert "empty where the references paint" in texts["drop_petals"] or "Paint more" in texts["drop_petals"]
    assert "off the canvas" in texts["push_off_canvas"]
    assert "far from the palette of a peach hibiscus" in texts["swap_palette"] and "#f8c4a4" in texts["swap_palette"]
    assert "off the canvas" not in texts["original"] and "far from the palette" not in texts["original"]


def test_eval_with_turns_writes_every_turn_and_reports_them_side_by_side(parts, tmp_path):
    """``brushrl eval --turns 2``'s sampling path on the pipeline's parts: one row and PNG per turn,
    and the turn report sees the repaired second turns."""
    import io

    from brushrl.artifacts.eval_report import turn_report, turn_table_lines
    from brushrl.orchestrator.evaluate import Evaluator, PolicySpec, eval_prompts

    cfg, pool, scorer = parts
    producer, _ = _producer(cfg, pool, scorer, ["syntax", "good"])
    prompts = eval_prompts(cfg, held_out=1, training=1)
    evaluator = Evaluator(cfg, tmp_path, prompts, log=io.StringIO(), turns=2)
    rows = asyncio.run(evaluator._score_policy(producer, PolicySpec("base")))
    for r in rows:
        r["policy"] = "base"
    syntax = [r for r in rows if r["sample"] % 2 == 0]  # members 0 and 2 replay the syntax error
    assert sorted((r["prompt_index"], r["sample"], r["turn"]) for r in syntax) == [
        (p, m, t) for p in (0, 1) for m in (0, 2) for t in (1, 2)]
    assert all(set(TURN_COLUMNS) <= set(r) for r in rows)
    assert all((tmp_path / r["png"]).exists() and r["png"].endswith(f"_t{r['turn']}.png") for r in rows if r["png"])
    from brushrl.artifacts.eval_page import write_eval_page
    from brushrl.artifacts.eval_report import build_report

    report = build_report([r for r in rows if r["turn"] == 1], ["base"], evaluator.cfg, prompts)
    report["turns"] = turn_report(rows, ["base"], evaluator.cfg, 2)
    page = write_eval_page(tmp_path, report, rows).read_text()
    assert "t2 <b>" in page and "turn 2 - turn 1" in page
    held = report["turns"]["results"]["base"]["held_out"]
    assert held["by_turn"][1]["gate_pass"]["mean"] == 0.5 and held["by_turn"][2]["gate_pass"]["mean"] == 1.0
    assert held["vs_turn1"][2]["gate_pass"]["diff"] == 0.5
    assert "turn 2 - turn 1" in "\n".join(turn_table_lines(report))


# ------------------------------------------------------------------------ SFT revision examples
def test_revision_examples_are_damaged_corpus_sketches_critiqued_and_repaired(parts, tmp_path):
    """The warm start's revision examples: each damage once over two corpus sketches, put through
    the real static gate, Chromium render, runtime gate, pool scorer and the CPU critic; the answer
    is the original sketch, and only it carries labels, tokenised as a revision turn is."""
    from brushrl.config import load_config
    from brushrl.corpus.build import build_corpus
    from brushrl.policy.revision import RevisionExamples
    from brushrl.policy.sft import IGNORE, encode_revision_examples, tokenizer_texts
    from brushrl.policy.tokenizer import train_tokenizer
    from brushrl.prompts import SYSTEM_PROMPT

    cfg = load_config(ROOT / "configs/local.yaml", {"policy.sft.revision_examples": 4})
    items = build_corpus(1)[:2]
    builder = RevisionExamples(cfg, items)
    plan = builder.plan()
    assert [name for _, name, _ in plan] == list(DAMAGES) and plan == builder.plan()  # every damage, fixed
    examples = builder.build(str(tmp_path / "renders"))
    by_damage = {e.damage: e for e in examples}
    assert set(by_damage) == set(DAMAGES)
    assert re.search(r"syntax_error|truncated", by_damage["break_syntax"].critique)
    for e, (item, _, code) in zip(examples, plan):
        assert e.repaired_reply == as_reply(item.code) and e.damaged_reply == as_reply(code) and e.critique
    assert "off the canvas" in by_damage["push_off_canvas"].critique

    texts = tokenizer_texts([(i.subject, i.code) for i in items], SYSTEM_PROMPT, cfg.prompts.template, examples)
    tok = train_tokenizer(texts, 1024)
    encoded = encode_revision_examples(tok, examples, SYSTEM_PROMPT, cfg.prompts.template)
    for e, x in zip(examples, encoded):
        answer = [t for t, lab in zip(x.input_ids, x.labels) if lab != IGNORE]
        assert tok.decode(answer, skip_special_tokens=True) == e.repaired_reply
        context = tok.decode(x.input_ids[: len(x.input_ids) - len(answer)])
        assert e.critique in context and "Here is a critique" in context
