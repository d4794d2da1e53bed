"""Group production on real parts (local Ray, Chromium renderers, gate, pool scorer) with replies
fed in by a replay rollout actor, and failure semantics: sketch faults score 0, infrastructure
failures give None and are excluded from the group's statistics."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest
import ray

from brushrl.config import load_config
from brushrl.learner import filter_group, group_advantages
from brushrl.orchestrator.producer import GroupProducer
from brushrl.render.pool import RenderPool
from brushrl.reward.actor import PoolScorerActor, make_scorer_actor
from brushrl.types import Completion
from brushrl.ray_setup import start_local_ray

ROOT = Path(__file__).resolve().parents[1]
GOOD = (ROOT / "tests/fixtures/gate/pass_skeleton.js")


def _good_code() -> str:
    return GOOD.read_text()


REPLIES = {
    "good": lambda: "```js\n" + _good_code() + "\n```",
    "syntax": lambda: "```js\n" + _good_code().replace("noLoop();", "noLoop(;") + "\n```",
    "text": lambda: "```js\n" + _good_code().replace("noLoop();", "noLoop(); text('hi', 10, 10);") + "\n```",
    "blank": lambda: "```js\n" + _good_code().split("function draw")[0]
    + 'function draw() { translate(-width / 2, -height / 2); background("#fdf8ee"); brush.noStroke(); '
    + "brush.fill('#fdf8ee', 0); brush.circle(-100, -100, 1); }\n```",
}


class ReplayRollout:
    """Returns the given replies as a group; a stand-in for the policy, nothing else changes."""

    def __init__(self, kinds: list[str]):
        self.kinds = kinds

    def generate(self, prompts: list[str], n: int, seed=None) -> list[list[Completion]]:
        return [
            [Completion(p, REPLIES[self.kinds[i % len(self.kinds)]](), [1, 2], [3, 4], [-0.1, -0.2], 0) for i in range(n)]
            for p in prompts
        ]


class SlowScorer(PoolScorerActor):
    def score_many(self, pngs, ref_ids):
        time.sleep(30)
        return super().score_many(pngs, ref_ids)


@pytest.fixture(scope="module")
def local_ray():
    # Workers import this module's actor classes by name: put tests/ (and this tree's src/) on their path.
    start_local_ray(num_cpus=4, runtime_env={"env_vars": {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def parts(local_ray):
    cfg = load_config(ROOT / "configs/local.yaml", {"rollout.group_size": 4, "render.num_actors": 2})
    pool = RenderPool(cfg.render)
    yield cfg, pool
    pool.shutdown()


def _produce(cfg, render_pool, kinds, scorer, seed=0):
    rollout = ray.remote(ReplayRollout).remote(kinds)
    producer = GroupProducer(cfg, rollout, render_pool, scorer, random.Random(seed))
    return asyncio.run(producer.produce(producer.ticket(), step=1))


def test_sketch_faults_score_zero_and_a_good_sketch_scores(parts):
    cfg, render_pool = parts
    group, counts = _produce(cfg, render_pool, ["good", "syntax", "text", "blank"], make_scorer_actor(cfg.reward.pool))
    by_kind = dict(zip(["good", "syntax", "text", "blank"], group.samples))
    assert by_kind["syntax"].gate.verdict == "syntax_error" and by_kind["syntax"].reward == 0.0
    assert by_kind["text"].gate.verdict == "text_label" and by_kind["text"].reward == 0.0
    assert by_kind["blank"].gate.verdict == "blank_canvas" and by_kind["blank"].reward == 0.0
    good = by_kind["good"]
    assert good.gate.passed and good.gate.stage == "runtime"
    assert 0.05 < good.reward <= 1.0 and good.components["pool_similarity"] > 0
    assert counts.outcome == {"static_fail": 2, "runtime_fail": 1, "scored": 1}
    assert counts.gate["pass"] == 1 and counts.render["ok"] == 2


def test_scorer_timeout_is_none_and_excluded_from_group_statistics(parts):
    cfg, render_pool = parts
    cfg = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={"scorer_timeout_s": 5.0})})
    slow = ray.remote(SlowScorer).remote(cfg.reward.pool)
    group, counts = _produce(cfg, render_pool, ["good", "syntax"], slow)
    rewards = [s.reward for s in group.samples]
    assert rewards[0] is None and rewards[2] is None, "scorer timeout must give None, not 0"
    assert group.samples[0].none_cause == "pool_similarity:scorer_timeout"
    assert rewards[1] == 0.0 and rewards[3] == 0.0
    assert counts.none["pool_similarity:scorer_timeout"] == 2 and counts.scorer_none["pool_similarity:scorer_timeout"] == 2
    # Two valid samples remain, both 0: no signal, the group is filtered rather than trained on.
    assert filter_group(rewards, 2, 1e-6) == "zero_variance"
    advantages = group_advantages(rewards, "none", 1e-6)
    assert advantages[0] is None and advantages[2] is None
    ray.kill(slow)


def test_repeated_completions_of_a_group_are_rendered_once(parts):
    """GRPO groups repeat completions (same sketch, same group seed): the render path renders the
    sketch once and answers the repeats from it (render cache), which the step's
    ``render/cache_hit_rate`` counts."""
    cfg, render_pool = parts
    before = render_pool.cache.stats()
    # another ticket seed than the other tests': their renders of "good" are in the cache too
    group, counts = _produce(cfg, render_pool, ["good", "good", "good", "syntax"], make_scorer_actor(cfg.reward.pool),
                             seed=7)
    renders = [s.render for s in group.samples if s.render is not None]
    assert [r.cache_hit for r in renders] == [False, True, True]
    assert len(counts.render_s) == 1 and counts.render["ok"] == 3  # one render ran, three answers
    assert len({s.reward for s in group.samples[:3]}) == 1 and group.samples[0].reward > 0
    after = render_pool.cache.stats()
    assert after["hits"] - before["hits"] == 2 and after["misses"] - before["misses"] == 1
