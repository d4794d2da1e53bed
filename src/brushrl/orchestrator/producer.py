"""Group production: prompt sampler -> rollout -> static gate -> render -> runtime gate -> score.

``GroupProducer.produce`` is the pipeline for one GRPO group (G samples of one prompt) as a
coroutine; the training loop runs many at once, on tickets drawn in order by
``GroupProducer.ticket``. Counting invariant per group, asserted before returning::

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

from brushrl.config import BrushRLConfig
from brushrl.gate import InfraRender, check_runtime, check_static
from brushrl.prompts import sample_prompts
from brushrl.reward import combine, length_score
from brushrl.reward.scorers import ScorerSet
from brushrl.types import Completion, GateVerdict, Group, RenderResult, Sample


@dataclass
class GroupCounts:
    """Outcome counts and stage seconds of one group (``GroupProducer.produce``; published as Ray metrics)."""

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


@dataclass(frozen=True)
class Ticket:
    """What a producer needs to make one group: its id, prompt and render seed (drawn in order
    from the orchestrator's random generator, so a resumed run continues the same sequence), and
    optionally the sampler's seed (``brushrl eval`` fixes it; training continues the engine's
    random stream, None)."""

    group_id: int
    prompt: str
    seed: int
    gen_seed: int | None = None


class GroupProducer:
    """Produces scored groups with the pipeline's actors.

    Args:
        cfg: the run config.
        rollout: a rollout engine actor (``generate.remote(prompts, n) -> list[list[Completion]]``).
        render_pool: a ``brushrl.render.pool.RenderPool`` (``await render(code, seed)``).
        scorers: scorer name -> actor implementing ``GroupScorer.score_group`` (or one actor, taken
            as ``pool_similarity``); called concurrently through a ``ScorerSet``. They draw their
            references themselves from the group seed.
        rng: the prompt/seed random generator (the orchestrator owns its state).
    """

    def __init__(self, cfg: BrushRLConfig, rollout, render_pool, scorers, rng: random.Random):
        self.cfg = cfg
        self.rollout = rollout
        self.render_pool = render_pool
        if not isinstance(scorers, dict):
            scorers = {"pool_similarity": scorers}
        self.scorers = ScorerSet(scorers, cfg.reward.scorer_timeout_s, cfg.reward.max_scorer_failures)
        self.rng = rng
        #: Id of the next ticket (the prompt cursor: tickets drawn so far; checkpointed with ``rng``).
        self.next_group_id = 0

    def ticket(self) -> Ticket:
        """Draw the next group's prompt and render seed (advances ``rng`` and the group id)."""
        (prompt,) = sample_prompts(self.cfg.prompts, 1, self.rng)
        ticket = Ticket(self.next_group_id, prompt, self.rng.randrange(2**31))
        self.next_group_id += 1
        return ticket

    async def produce(self, ticket: Ticket, step: int) -> tuple[Group, GroupCounts]:
        """The pipeline for one group.

        Args:
            ticket: from :meth:`ticket`.
            step: recorded in each ``Sample.step`` (the learner step current at submission).

        Returns:
            The scored group (G samples) and its counts.

        Raises:
            Whatever the rollout actor raised (``ray.exceptions.RayError``): the group failed.
            Render and scorer failures do not raise; they give None rewards.
        """
        cfg, counts = self.cfg, GroupCounts()
        t0 = time.perf_counter()
        (members,) = await self.rollout.generate.remote([ticket.prompt], cfg.rollout.group_size, ticket.gen_seed)
        counts.gen_s = time.perf_counter() - t0
        group = self._gate_static(ticket, members, step)
        todo = self._count_static(group, counts)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(self.render_pool.render(s.code, s.seed) for s in todo))
        counts.render_wall_s = time.perf_counter() - t0
        self._apply_renders(todo, list(results), counts)
        t0 = time.perf_counter()
        # The ScorerSet blocks (it waits on every scorer actor): a worker thread keeps the loop free.
        await asyncio.to_thread(self._score, group, counts)
        counts.score_s = time.perf_counter() - t0
        self._finish_rest(group, counts)
        self._check(group, counts)
        return group, counts

    # ------------------------------------------------------------------ stages
    def _gate_static(self, ticket: Ticket, members: list[Completion], step: int) -> Group:
        samples = []
        for c in members:
            code, verdict = check_static(c.text, self.cfg.gate, self.cfg.render.canvas_size)
            samples.append(Sample(c, code or "", ticket.seed, ticket.group_id, step, verdict))
        return Group(ticket.group_id, ticket.prompt, ticket.seed, samples)

    @staticmethod
    def _count_static(group: Group, counts: GroupCounts) -> list[Sample]:
        """Count static-gate failures; return the samples to render."""
        for s in group.samples:
            if not s.gate.passed:
                counts.gate[s.gate.verdict] += 1
                counts.outcome["static_fail"] += 1
        return [s for s in group.samples if s.gate.passed]

    @staticmethod
    def _check(group: Group, counts: GroupCounts) -> None:
        total = len(group.samples)
        assert total == sum(counts.outcome.values()), f"sample accounting broken: {total} vs {counts.outcome}"

    def _apply_renders(self, todo: list[Sample], results: list[RenderResult], counts: GroupCounts) -> None:
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

    def _score(self, group: Group, counts: GroupCounts) -> None:
        """Score the samples that passed the runtime gate with every scorer (``ScorerSet``: concurrent,
        a failure or timeout gives None for that component, counted by cause) and combine."""
        cfg = self.cfg.reward
        scored = [s for s in group.samples if s.gate.passed and s.gate.stage == "runtime"]
        if not scored:
            return
        job = ([s.render.png for s in scored], group.prompt, group.seed)
        (by_scorer,), wall_s = self.scorers.score_timed([job], deadline=time.monotonic() + cfg.group_deadline_s)
        counts.scorer_wall_s = wall_s
        counts.scorer_restarts = dict(self.scorers.restarts)
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

    def _finish_rest(self, group: Group, counts: GroupCounts) -> None:
        """Rewards of the samples that were not scored (gate failures, render infra); None counts."""
        for s in group.samples:
            if not s.gate.passed:
                self._finish(s, s.gate, None)
            elif s.render is not None and s.render.status == "infra":
                self._finish(s, None, "render_infra")
        for s in group.samples:
            if s.reward is None:
                counts.none[s.none_cause or "unknown"] += 1
            s.score_s = counts.score_s

    def _finish(self, s: Sample, gate: GateVerdict | None, cause: str | None) -> None:
        out = combine(gate, s.components, self.cfg.reward.weights, none_cause=cause)
        s.components, s.reward, s.none_cause = out.components, out.total, out.none_cause
