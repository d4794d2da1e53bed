"""Group production: prompt sampler -> rollout -> static gate -> render -> runtime gate -> score.

One call of ``GroupProducer.produce`` turns ``n`` sampled prompts into ``n`` scored GRPO groups of
G samples each; ``GroupProducer.produce_group`` is the same pipeline for one group as a coroutine
(the asynchronous orchestrator runs many at once, on tickets drawn by ``GroupProducer.ticket``).
Counting invariant per call, asserted before returning::

    completions == static_fail + render_infra + runtime_fail + scored

where every sample ends in exactly one outcome: a static gate failure (reward 0), a render that
failed for infrastructure reasons (reward None), a runtime gate failure (reward 0), or a scorer call
(reward a float, or None when the scorer failed or timed out).
"""

from __future__ import annotations

import asyncio
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
from brushrl.reward.scorers import ScorerSet
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
    scorer_none: Counter = field(default_factory=Counter)
    """``<scorer>:<cause>`` -> samples that scorer could not score (weighted or not)."""
    scorer_wall_s: dict[str, float] = field(default_factory=dict)
    """Per scorer, seconds from launch until its last call of the step finished."""
    scorer_restarts: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {"render": dict(self.render), "gate": dict(self.gate), "none": dict(self.none),
                "scorer_none": dict(self.scorer_none)}

    def merge(self, other: "StepCounts") -> None:
        """Add ``other``'s counts and stage times to these."""
        for name in ("outcome", "render", "gate", "none"):
            getattr(self, name).update(getattr(other, name))
        self.render_wall_s += other.render_wall_s
        self.render_s += other.render_s
        self.gen_s += other.gen_s
        self.score_s += other.score_s


@dataclass(frozen=True)
class Ticket:
    """What a producer needs to make one group: its id, prompt and render seed (drawn in order
    from the orchestrator's random generator, so a resumed run continues the same sequence)."""

    group_id: int
    prompt: str
    seed: int


class GroupProducer:
    """Produces scored groups with the pipeline's actors.

    Args:
        cfg: the run config.
        rollout: a rollout engine actor (``generate.remote(prompts, n) -> list[list[Completion]]``).
        render_pool: a ``RenderPool`` (``render_many(jobs) -> list[RenderResult]``).
        scorers: scorer name -> actor implementing ``GroupScorer.score_group`` (or one actor, taken
            as ``pool_similarity``); called concurrently through a ``ScorerSet``.
        pool: the reference pool (kept for callers; scorers draw their references themselves from
            the group seed).
        rng: the prompt/seed random generator (the orchestrator owns its state).
    """

    def __init__(self, cfg: BrushRLConfig, rollout, render_pool, scorers, pool: ReferencePool, rng: random.Random):
        self.cfg = cfg
        self.rollout = rollout
        self.render_pool = render_pool
        if not isinstance(scorers, dict):
            scorers = {"pool_similarity": scorers}
        self.scorers = ScorerSet(scorers, cfg.reward.scorer_timeout_s, cfg.reward.max_scorer_failures)
        self.pool = pool
        self.rng = rng
        self._next_group_id = 0

    @property
    def next_group_id(self) -> int:
        """Id of the next ticket (the prompt cursor: tickets drawn so far)."""
        return self._next_group_id

    @next_group_id.setter
    def next_group_id(self, value: int) -> None:
        self._next_group_id = value

    def ticket(self) -> Ticket:
        """Draw the next group's prompt and render seed (advances ``rng`` and the group id)."""
        (prompt,) = sample_prompts(self.cfg.prompts, 1, self.rng)
        ticket = Ticket(self._next_group_id, prompt, self.rng.randrange(2**31))
        self._next_group_id += 1
        return ticket

    def produce(self, step: int, n: int) -> tuple[list[Group], StepCounts]:
        """Sample ``n`` prompts and return their scored groups (G samples each) and the counts."""
        cfg, counts = self.cfg, StepCounts()
        tickets = [self.ticket() for _ in range(n)]
        t0 = time.perf_counter()
        prompts = [t.prompt for t in tickets]
        completions: list[list[Completion]] = ray.get(self.rollout.generate.remote(prompts, cfg.rollout.group_size))
        counts.gen_s = time.perf_counter() - t0
        groups = [self._gate_static(t, members, step) for t, members in zip(tickets, completions)]
        todo = self._count_static(groups, counts)
        t0 = time.perf_counter()
        results: list[RenderResult] = self.render_pool.render_many([(s.code, s.seed) for s in todo]) if todo else []
        counts.render_wall_s = time.perf_counter() - t0
        self._apply_renders(todo, results, counts)
        self._score(groups, counts)
        self._check(groups, counts)
        return groups, counts

    async def produce_group(self, ticket: Ticket, step: int, renderer) -> tuple[Group, StepCounts]:
        """The pipeline for one group, as a coroutine (the asynchronous orchestrator's producer).

        Args:
            ticket: from :meth:`ticket`.
            step: recorded in each ``Sample.step`` (the learner step current at submission).
            renderer: a :class:`brushrl.orchestrator.render_dispatch.AsyncRenderer`.

        Returns:
            The scored group (G samples) and its counts.

        Raises:
            Whatever the rollout actor raised (``ray.exceptions.RayError``): the group failed.
            Render and scorer failures do not raise; they give None rewards.
        """
        cfg, counts = self.cfg, StepCounts()
        t0 = time.perf_counter()
        (members,) = await self.rollout.generate.remote([ticket.prompt], cfg.rollout.group_size)
        counts.gen_s = time.perf_counter() - t0
        group = self._gate_static(ticket, members, step)
        todo = self._count_static([group], counts)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(renderer.render(s.code, s.seed) for s in todo))
        counts.render_wall_s = time.perf_counter() - t0
        self._apply_renders(todo, list(results), counts)
        t0 = time.perf_counter()
        # The ScorerSet blocks (it waits on every scorer actor): a worker thread keeps the loop free.
        await asyncio.to_thread(self._score_scored, [group], counts)
        counts.score_s = time.perf_counter() - t0
        self._finish_rest([group], counts)
        self._check([group], counts)
        return group, counts

    # ------------------------------------------------------------------ stages
    def _gate_static(self, ticket: Ticket, members: list[Completion], step: int) -> Group:
        samples = []
        for c in members:
            code, verdict = check_static(c.text, self.cfg.gate, self.cfg.render.canvas_size)
            samples.append(Sample(c, code or "", ticket.seed, ticket.group_id, step, verdict))
        return Group(ticket.group_id, ticket.prompt, ticket.seed, samples)

    @staticmethod
    def _count_static(groups: list[Group], counts: StepCounts) -> list[Sample]:
        """Count static-gate failures; return the samples to render."""
        for g in groups:
            for s in g.samples:
                if not s.gate.passed:
                    counts.gate[s.gate.verdict] += 1
                    counts.outcome["static_fail"] += 1
        return [s for g in groups for s in g.samples if s.gate.passed]

    @staticmethod
    def _check(groups: list[Group], counts: StepCounts) -> None:
        total = sum(len(g.samples) for g in groups)
        assert total == sum(counts.outcome.values()), f"sample accounting broken: {total} vs {counts.outcome}"

    def _apply_renders(self, todo: list[Sample], results: list[RenderResult], counts: StepCounts) -> None:
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

    def _score_scored(self, groups: list[Group], counts: StepCounts) -> None:
        """Score the samples that passed the runtime gate with every scorer (``ScorerSet``: concurrent,
        a failure or timeout gives None for that component, counted by cause) and combine."""
        cfg = self.cfg.reward
        todo = [(g, [s for s in g.samples if s.gate.passed and s.gate.stage == "runtime"]) for g in groups]
        todo = [(g, scored) for g, scored in todo if scored]
        jobs = [([s.render.png for s in scored], g.prompt, g.seed) for g, scored in todo]
        results, wall_s = (self.scorers.score_timed(jobs, deadline=time.monotonic() + cfg.group_deadline_s)
                           if jobs else ([], {}))
        counts.scorer_wall_s = wall_s
        counts.scorer_restarts = dict(self.scorers.restarts)
        for (g, scored), by_scorer in zip(todo, results):
            for i, s in enumerate(scored):
                s.components = {"length": length_score(s.code, cfg.length)}
                causes = {}
                for name, outs in by_scorer.items():
                    out = outs[i]
                    s.components[name] = out.value
                    s.raw.update({f"{name}_{k}": v for k, v in out.raw.items()})
                    if out.value is None:
                        causes[name] = out.cause or "unknown"
                        counts.scorer_none[f"{name}:{causes[name]}"] += 1
                s.component_causes = causes
                weighted = [f"{n}:{causes[n]}" for n in sorted(causes) if cfg.weights.get(n)]
                counts.outcome["scored"] += 1
                self._finish(s, s.gate, ",".join(weighted) or None)

    def _score(self, groups: list[Group], counts: StepCounts) -> None:
        t0 = time.perf_counter()
        self._score_scored(groups, counts)
        counts.score_s = time.perf_counter() - t0
        self._finish_rest(groups, counts)

    def _finish_rest(self, groups: list[Group], counts: StepCounts) -> None:
        """Rewards of the samples that were not scored (gate failures, render infra); None counts."""
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
