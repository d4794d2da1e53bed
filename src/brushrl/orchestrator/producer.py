"""Group production: prompt sampler -> rollout -> static gate -> render -> runtime gate -> score.

One call of ``GroupProducer.produce`` turns ``n`` sampled prompts into ``n`` scored GRPO groups of
G samples each. Counting invariant per call, asserted before returning::

    completions == static_fail + render_infra + runtime_fail + scored

where every sample ends in exactly one outcome: a static gate failure (reward 0), a render that
failed for infrastructure reasons (reward None), a runtime gate failure (reward 0), or a scorer call
(reward a float, or None when the scorer failed or timed out).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

import ray

from brushrl.config import BrushRLConfig
from brushrl.gate import InfraRender, check_runtime, check_static
from brushrl.pool import ReferencePool
from brushrl.prompts import sample_prompts
from brushrl.reward import combine, length_score
from brushrl.types import Completion, GateVerdict, Group, RenderResult, Sample


@dataclass
class StepCounts:
    """Outcome counts of one ``produce`` call (published as Ray metrics)."""

    outcome: Counter = field(default_factory=Counter)
    """static_fail / render_infra / runtime_fail / scored: each sample lands in exactly one."""
    render: Counter = field(default_factory=Counter)
    gate: Counter = field(default_factory=Counter)
    none: Counter = field(default_factory=Counter)
    render_wall_s: float = 0.0
    render_s: list[float] = field(default_factory=list)
    gen_s: float = 0.0
    score_s: float = 0.0

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {"render": dict(self.render), "gate": dict(self.gate), "none": dict(self.none)}


class GroupProducer:
    """Produces scored groups with the pipeline's actors.

    Args:
        cfg: the run config.
        rollout: a rollout engine actor (``generate.remote(prompts, n) -> list[list[Completion]]``).
        render_pool: a ``RenderPool`` (``render_many(jobs) -> list[RenderResult]``).
        scorer: a scorer actor (``score_many.remote(pngs, ref_ids) -> list[float | None]``).
        pool: the reference pool the scorer uses (references are drawn here, per group).
        rng: the prompt/seed random generator (the orchestrator owns its state).
    """

    def __init__(self, cfg: BrushRLConfig, rollout, render_pool, scorer, pool: ReferencePool, rng: random.Random):
        self.cfg = cfg
        self.rollout = rollout
        self.render_pool = render_pool
        self.scorer = scorer
        self.pool = pool
        self.rng = rng
        self._next_group_id = 0

    def produce(self, step: int, n: int) -> tuple[list[Group], StepCounts]:
        """Sample ``n`` prompts and return their scored groups (G samples each) and the counts."""
        cfg, counts = self.cfg, StepCounts()
        prompts = sample_prompts(cfg.prompts, n, self.rng)
        seeds = [self.rng.randrange(2**31) for _ in prompts]
        t0 = time.perf_counter()
        completions: list[list[Completion]] = ray.get(self.rollout.generate.remote(prompts, cfg.rollout.group_size))
        counts.gen_s = time.perf_counter() - t0

        groups: list[Group] = []
        for prompt, seed, members in zip(prompts, seeds, completions):
            samples = []
            for c in members:
                code, verdict = check_static(c.text, cfg.gate, cfg.render.canvas_size)
                samples.append(Sample(c, code or "", seed, self._next_group_id, step, verdict))
            groups.append(Group(self._next_group_id, prompt, seed, samples))
            self._next_group_id += 1

        self._render(groups, counts)
        self._score(groups, counts)
        total = sum(len(g.samples) for g in groups)
        assert total == sum(counts.outcome.values()), f"sample accounting broken: {total} vs {counts.outcome}"
        return groups, counts

    def _render(self, groups: list[Group], counts: StepCounts) -> None:
        todo = [s for g in groups for s in g.samples if s.gate.passed]
        for g in groups:
            for s in g.samples:
                if not s.gate.passed:
                    counts.gate[s.gate.verdict] += 1
                    counts.outcome["static_fail"] += 1
        t0 = time.perf_counter()
        results: list[RenderResult] = self.render_pool.render_many([(s.code, s.seed) for s in todo]) if todo else []
        counts.render_wall_s = time.perf_counter() - t0
        for s, r in zip(todo, results):
            s.render = r
            counts.render[r.status] += 1
            if not r.cache_hit:  # a cache hit took no render time; render/cache_hit_rate counts it
                counts.render_s.append(r.wall_s)
            try:
                s.gate = check_runtime(r, self.cfg.gate, self.cfg.render.canvas_size)
            except InfraRender as exc:  # status infra, or an "ok" render without a readable PNG
                r.status, r.detail = "infra", r.detail or str(exc)
                counts.outcome["render_infra"] += 1
                continue
            counts.gate[s.gate.verdict] += 1
            if not s.gate.passed:
                counts.outcome["runtime_fail"] += 1

    def _score(self, groups: list[Group], counts: StepCounts) -> None:
        cfg = self.cfg.reward
        t0 = time.perf_counter()
        pending = []
        for g in groups:
            scored = [s for s in g.samples if s.gate.passed and s.gate.stage == "runtime"]
            if scored:
                refs = self.pool.sample(list(cfg.pool.tiers), cfg.pool.refs_per_tier, g.seed)
                ref = self.scorer.score_many.remote([s.render.png for s in scored], [e.id for e in refs])
                pending.append((scored, ref))
        for scored, ref in pending:
            try:
                values: list[float | None] = ray.get(ref, timeout=cfg.scorer_timeout_s)
                cause = None
            except ray.exceptions.GetTimeoutError:
                values, cause = [None] * len(scored), "scorer_timeout"
            except ray.exceptions.RayError as exc:
                values, cause = [None] * len(scored), f"scorer_error:{type(exc).__name__}"
            for s, v in zip(scored, values):
                s.components = {"length": length_score(s.code, cfg.length), "pool_similarity": v}
                counts.outcome["scored"] += 1
                self._finish(s, s.gate, cause)
        counts.score_s = time.perf_counter() - t0
        for g in groups:
            for s in g.samples:
                if not s.gate.passed:
                    self._finish(s, s.gate, None)
                elif s.render is not None and s.render.status == "infra":
                    self._finish(s, None, "render_infra")
            for s in g.samples:
                if s.reward is None:
                    counts.none[s.none_cause or "unknown"] += 1
        for s in (s for g in groups for s in g.samples):
            s.score_s = counts.score_s

    def _finish(self, s: Sample, gate: GateVerdict | None, cause: str | None) -> None:
        out = combine(gate, s.components, self.cfg.reward.weights, none_cause=cause)
        s.components, s.reward, s.none_cause = out.components, out.total, out.none_cause
