"""The asynchronous loop on the Ray pipeline with injected failures.

Real parts: local Ray, the GroupProducer, the render pool with a headless-Chromium renderer actor, the
pool scorer, the tiny-transformer GRPO learner actor and the actor weight sync. Injected: a rollout
actor whose first call dies and that replays fixed replies (the policy is not what is tested), a
renderer that fails on marked sketches (infrastructure failure -> None), and a scorer whose first
call returns None for every painting.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

import pytest
import ray

from brushrl.config import load_config
from brushrl.learner import GroupFilter, make_learner_actor
from brushrl.orchestrator.actors import ActorLearnerSide
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.loop import GRPOLoop
from brushrl.orchestrator.producer import GroupProducer
from brushrl.render.pool import RenderPool, RendererWorker
from brushrl.reward.actor import PoolScorerActor
from brushrl.types import Completion
from brushrl.ray_setup import start_local_ray

ROOT = Path(__file__).resolve().parents[1]
GOOD = (ROOT / "tests/fixtures/gate/pass_skeleton.js").read_text()


def _reply(code: str) -> str:
    return "```js\n" + code + "\n```"


class ScriptedRollout:
    """Call 0 raises (a dead rollout), call 1 gives [good, good-but-infra], later calls
    [good, syntax error]; completions carry the loaded policy version like a real engine."""

    def __init__(self) -> None:
        self.calls, self.version = 0, 0

    def generate(self, prompts, n, seed=None):
        call, self.calls = self.calls, self.calls + 1
        if call == 0:
            raise RuntimeError("injected rollout failure")
        second = GOOD + "\n// INFRA" if call == 1 else GOOD.replace("noLoop();", "noLoop(;")
        texts = [_reply(GOOD), _reply(second)][:n]
        # Token ids inside the tiny learner's vocabulary; behaviour log-probs are placeholders.
        return [[Completion(p, t, [5, 6, 7], [8 + i, 9, 10], [-5.7, -5.7, -5.7], self.version) for i, t in enumerate(texts)]
                for p in prompts]

    def load_adapter(self, state, version):
        self.version = version

    def policy_version(self):
        return self.version


class FlakyRenderer(RendererWorker):
    def render(self, code, seed):
        if "// INFRA" in code:
            raise RuntimeError("injected renderer failure")
        return super().render(code, seed)


class NoneOnceScorer(PoolScorerActor):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.calls = 0

    def score_many(self, pngs, ref_ids):
        self.calls += 1
        return [None] * len(pngs) if self.calls == 1 else super().score_many(pngs, ref_ids)


def _loader(policy_cfg):
    from test_learner import tiny_model, tiny_tokenizer

    return tiny_model(seed=3), tiny_tokenizer()


@pytest.fixture(scope="module")
def local_ray():
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    start_local_ray(num_cpus=4, runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ledger_invariant_holds_with_injected_failures(local_ray):
    cfg = load_config(ROOT / "configs/local.yaml", {
        "rollout.group_size": 2, "rollout.groups_per_step": 1, "render.num_actors": 1,
        "orchestrator.max_staleness": 1, "learner.warmup_steps": 0,
    })
    rollout = ray.remote(ScriptedRollout).remote()
    renderer_actor = ray.remote(FlakyRenderer).options(num_cpus=0.5).remote(cfg.render)
    scorer = ray.remote(NoneOnceScorer).options(num_cpus=0.25).remote(cfg.reward.pool)
    learner = make_learner_actor(cfg, total_steps=3, policy_loader=_loader)
    producer = GroupProducer(cfg, rollout, RenderPool(cfg.render, actors=[renderer_actor]), scorer, random.Random(0))
    ledger = GroupLedger(cfg.rollout.groups_per_step, cfg.orchestrator.max_staleness)
    reports = []

    async def main():
        loop = GRPOLoop(ledger, GroupFilter.from_config(cfg.learner), producer.ticket, producer.produce,
                        ActorLearnerSide(learner, rollout, sync_timeout_s=120), checkpoint=None)
        await loop.run(1, 3, reports.append)

    asyncio.run(main())
    ended = {e.ticket.group_id: e for r in reports for e in r.ended}
    assert ended[0].status == "failed" and "injected rollout failure" in ended[0].detail
    # Group 1: its marked sketch failed on the renderer twice (None, render_infra) and the scorer
    # returned None for the other: no valid sample left.
    causes = [s.none_cause for s in ended[1].group.samples]
    assert ended[1].status == "too_few_valid" and causes[1] == "render_infra" and causes[0].startswith("pool_similarity:")
    assert all(r.trained for r in reports), "every step trained on a group despite the failures"
    for e in ended.values():
        if e.status == "accepted":
            rewards = [s.reward for s in e.group.samples]
            assert rewards[1] == 0.0 and rewards[0] > 0  # syntax error scores 0, the painting scores
    final = reports[-1].ledger
    assert final["failed"] >= 1 and final["filtered"] >= 1 and final["accepted"] >= 3
    assert final["submitted"] == sum(final[k] for k in ("accepted", "filtered", "failed", "stale", "running"))
    assert [r.version_after for r in reports] == [1, 2, 3]
    assert ray.get(rollout.policy_version.remote()) == 3
    assert max(s for r in reports for s in r.staleness) <= 1
    for actor in (rollout, renderer_actor, scorer, learner):
        ray.kill(actor)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
