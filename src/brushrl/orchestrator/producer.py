"""Group production: prompt sampler -> rollout -> static gate -> render -> runtime gate -> score
(-> critique -> revision -> static gate -> ... for multi-turn revision).

``GroupProducer.produce`` is the pipeline for one GRPO group (G samples of one prompt) as a
coroutine; the training loop runs many at once, on tickets drawn in order by
``GroupProducer.ticket``. Counting invariant per group, asserted before returning::

    completions == static_fail + render_infra + runtime_fail + scored

where every sample (every turn's, with revision) ends in exactly one outcome: a static gate failure
(reward 0), a render that failed for infrastructure reasons (reward None), a runtime gate failure
(reward 0), or a scorer call (reward a float, or None when the scorer failed or timed out).

Multi-turn revision (``rollout.turns`` = K > 1; RRVF, arXiv 2507.20766; ReLook, arXiv 2510.11498):
each of the G members is a :class:`~brushrl.types.Trajectory`. After a turn is gated, rendered and
scored, the critic actor (``reward.critic``, a ``brushrl.reward.critic.Critic``) critiques every
member still going, in one call per group and turn; the rollout engine then revises each of them
(``RolloutEngine.revise``: the same conversation, tokens as sampled, plus the critique's user
turn), and the revisions go through the same gate, render and scorers, against the same
references (the group seed). A member stops after K replies, when the critic says ``done``
(``rollout.revision.stop_on_done``), when its painting passes the gate
(``rollout.revision.stop_on_gate_pass``; no critique is asked), when a turn's reward is None (infrastructure) or when the
critic fails for it (timeout, error: cause ``critic:<cause>``); its reward is then
``brushrl.reward.trajectory.trajectory_reward`` (None for the last two, never 0). With
revision, ``GroupCounts.none`` counts trajectories by their None cause.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import ray

from brushrl.config import POOL_ACTOR, BrushRLConfig
from brushrl.gate import InfraRender, check_runtime, check_static
from brushrl.prompts import sample_prompts
from brushrl.reward import combine, length_score
from brushrl.reward.scorers import ScorerSet
from brushrl.reward.trajectory import trajectory_reward
from brushrl.types import Completion, Critique, GateVerdict, Group, RenderResult, Sample, Trajectory


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
    critic_s: float = 0.0
    """Seconds the group waited for its critiques (revision turns; 0 for a single-turn group)."""
    stops: Counter = field(default_factory=Counter)
    """Why the group's trajectories ended: ``turns``, ``done``, ``none`` (revision only)."""

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
        rollout: a rollout engine actor (``generate.remote(prompts, n) -> list[list[Completion]]``;
            ``revise.remote(requests) -> list[Completion]`` for revision).
        render_pool: a ``brushrl.render.pool.RenderPool`` (``await render(code, seed)``).
        scorers: scorer name -> actor implementing ``GroupScorer.score_group`` (or one actor, taken
            as ``pool_similarity``); the pool scorer actor (``POOL_ACTOR``) gives
            ``reward.pool_components`` in one call. Called concurrently through a ``ScorerSet``.
            They draw their references themselves from the group seed.
        rng: the prompt/seed random generator (the orchestrator owns its state).
        critic: the critic actor (``critique.remote(samples, prompt, seed) -> list[Critique]``,
            ``brushrl.reward.actor.CriticActor``); required for ``rollout.turns`` > 1.
    """

    def __init__(self, cfg: BrushRLConfig, rollout, render_pool, scorers, rng: random.Random, critic=None):
        self.cfg = cfg
        self.rollout = rollout
        self.render_pool = render_pool
        if not isinstance(scorers, dict):
            scorers = {"pool_similarity": scorers}
        self.scorers = ScorerSet(scorers, cfg.reward.scorer_timeout_s, cfg.reward.max_scorer_failures,
                                 components={POOL_ACTOR: cfg.reward.pool_components})
        self.rng = rng
        self.critic = critic
        #: Id of the next ticket (the prompt cursor: tickets drawn so far; checkpointed with ``rng``).
        self.next_group_id = 0

    def ticket(self) -> Ticket:
        """Draw the next group's prompt and render seed (advances ``rng`` and the group id)."""
        (prompt,) = sample_prompts(self.cfg.prompts, 1, self.rng)
        ticket = Ticket(self.next_group_id, prompt, self.rng.randrange(2**31))
        self.next_group_id += 1
        return ticket

    async def produce(self, ticket: Ticket, step: int, turns: int | None = None) -> tuple[Group, GroupCounts]:
        """The pipeline for one group.

        Args:
            ticket: from :meth:`ticket`.
            step: recorded in each ``Sample.step`` (the learner step current at submission).
            turns: replies per member (None: ``rollout.turns``); > 1 makes each member a trajectory.

        Returns:
            The scored group (G samples, or G trajectories and all their turns' samples) and its counts.

        Raises:
            Whatever the rollout actor raised (``ray.exceptions.RayError``): the group failed.
            ValueError: revision asked for without a critic actor.
            Render, scorer and critic failures do not raise; they give None rewards.
        """
        cfg, counts = self.cfg, GroupCounts()
        turns = cfg.rollout.turns if turns is None else turns
        if turns > 1 and self.critic is None:
            raise ValueError("rollout.turns > 1 needs a critic actor (brushrl.reward.actor.CriticActor)")
        t0 = time.perf_counter()
        (members,) = await self.rollout.generate.remote([ticket.prompt], cfg.rollout.group_size, ticket.gen_seed)
        counts.gen_s = time.perf_counter() - t0
        samples = await self._turn(ticket, members, step, counts)
        group = Group(ticket.group_id, ticket.prompt, ticket.seed, samples)
        if turns > 1:
            await self._revise(group, ticket, step, counts, turns)
        self._check(group, counts)
        return group, counts

    async def _turn(self, ticket: Ticket, completions: list[Completion], step: int,
                    counts: GroupCounts) -> list[Sample]:
        """Gate, render, gate and score one turn's completions (all of the same group)."""
        samples = self._gate_static(ticket, completions, step)
        todo = self._count_static(samples, counts)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(self.render_pool.render(s.code, s.seed) for s in todo))
        counts.render_wall_s += time.perf_counter() - t0
        self._apply_renders(todo, list(results), counts)
        t0 = time.perf_counter()
        # The ScorerSet blocks (it waits on every scorer actor): a worker thread keeps the loop free.
        await asyncio.to_thread(self._score, samples, ticket, counts)
        score_s = time.perf_counter() - t0
        counts.score_s += score_s
        self._finish_rest(samples, counts, score_s)
        return samples

    # ------------------------------------------------------------------ revision
    async def _revise(self, group: Group, ticket: Ticket, step: int, counts: GroupCounts, turns: int) -> None:
        """Turns 2..``turns`` of every member (module docstring); fills ``group.trajectories``
        and makes ``group.samples`` every turn's samples, trajectory by trajectory."""
        revision = self.cfg.rollout.revision
        trajectories = [Trajectory(i, [s]) for i, s in enumerate(group.samples)]
        for t in trajectories:
            t.turns[0].turn, t.turns[0].member = 1, t.member
        critic_causes: dict[int, str] = {}
        going = [t for t in trajectories if t.turns[-1].reward is not None]
        for turn in range(2, turns + 1):
            if revision.stop_on_gate_pass:
                for t in going:
                    if t.turns[-1].gate.passed:
                        t.stop = "gate_pass"
                going = [t for t in going if t.stop != "gate_pass"]
            if not going:
                break
            critiques = await self._critique([t.turns[-1] for t in going], ticket, counts)
            revising = []
            for t, critique in zip(going, critiques):
                t.turns[-1].critique = critique
                if not critique.ok:
                    critic_causes[t.member] = critique.cause
                elif critique.done and revision.stop_on_done:
                    t.stop = "done"
                else:
                    revising.append(t)
            if not revising:
                break
            t0 = time.perf_counter()
            # A fixed sampler seed (brushrl eval) fixes every turn: turn k samples with seed + k - 1.
            seed = None if ticket.gen_seed is None else (ticket.gen_seed + turn - 1) % 2**31
            completions = await self.rollout.revise.remote([(t.turns[-1].completion, self._shown(t.turns[-1]))
                                                            for t in revising], seed)
            counts.gen_s += time.perf_counter() - t0
            for t, s in zip(revising, await self._turn(ticket, completions, step, counts)):
                s.turn, s.member = turn, t.member
                t.turns.append(s)
            going = [t for t in revising if t.turns[-1].reward is not None]
        counts.none.clear()  # trajectories, not samples, are what GRPO keeps or leaves out now
        for t in trajectories:
            t.reward, t.none_cause = trajectory_reward([(s.reward, s.none_cause) for s in t.turns], revision,
                                                       critic_causes.get(t.member))
            if t.none_cause is not None:
                t.stop = "none"
                counts.none[t.none_cause] += 1
            counts.stops[t.stop] += 1
        group.trajectories = trajectories
        group.samples = [s for t in trajectories for s in t.turns]

    def _shown(self, sample: Sample) -> Critique:
        """What the policy's next turn is shown of ``sample``: its critique, and with
        ``rollout.revision.show_image`` its painting (``Critique.image``, a copy: the sample's own
        critique keeps no PNG); a sample without a painting gets the text only."""
        if not self.cfg.rollout.revision.show_image:
            return sample.critique
        png = sample.render.png if sample.render is not None else None
        return dataclasses.replace(sample.critique, image=png)

    async def _critique(self, samples: list[Sample], ticket: Ticket, counts: GroupCounts) -> list[Critique]:
        """The critic's critiques of ``samples`` (one call, ``reward.critic.timeout_s``); a timeout
        or failure of the call gives every sample ``Critique(cause=...)`` (``timeout``,
        ``error:<Type>``)."""
        t0 = time.perf_counter()
        ref = self.critic.critique.remote(samples, ticket.prompt, ticket.seed)
        try:
            out = await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.cfg.reward.critic.timeout_s)
            if len(out) != len(samples):
                raise ValueError(f"critic returned {len(out)} critiques for {len(samples)} samples")
        except asyncio.TimeoutError:
            ray.cancel(ref)
            out = [Critique(cause="timeout") for _ in samples]
        except Exception as exc:  # noqa: BLE001 - RayTaskError, ActorDiedError, bad output
            out = [Critique(cause=f"error:{type(getattr(exc, 'cause', None) or exc).__name__}") for _ in samples]
        counts.critic_s += time.perf_counter() - t0
        return out

    # ------------------------------------------------------------------ stages
    def _gate_static(self, ticket: Ticket, members: list[Completion], step: int) -> list[Sample]:
        samples = []
        for c in members:
            code, verdict = check_static(c.text, self.cfg.gate, self.cfg.render.canvas_size,
                                         replay=self.cfg.render.mode == "replay")
            samples.append(Sample(c, code or "", ticket.seed, ticket.group_id, step, verdict))
        return samples

    @staticmethod
    def _count_static(samples: list[Sample], counts: GroupCounts) -> list[Sample]:
        """Count static-gate failures; return the samples to render."""
        for s in samples:
            if not s.gate.passed:
                counts.gate[s.gate.verdict] += 1
                counts.outcome["static_fail"] += 1
        return [s for s in samples if s.gate.passed]

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

    def _score(self, samples: list[Sample], ticket: Ticket, counts: GroupCounts) -> None:
        """Score the samples that passed the runtime gate with every scorer (``ScorerSet``: concurrent,
        a failure or timeout gives None for that component, counted by cause) and combine."""
        cfg = self.cfg.reward
        scored = [s for s in samples if s.gate.passed and s.gate.stage == "runtime"]
        if not scored:
            return
        job = ([s.render.png for s in scored], ticket.prompt, ticket.seed)
        (by_scorer,), wall_s = self.scorers.score_timed([job], deadline=time.monotonic() + cfg.group_deadline_s)
        for name, seconds in wall_s.items():
            counts.scorer_wall_s[name] = counts.scorer_wall_s.get(name, 0.0) + seconds
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

    def _finish_rest(self, samples: list[Sample], counts: GroupCounts, score_s: float) -> None:
        """Rewards of the samples that were not scored (gate failures, render infra); None counts."""
        for s in samples:
            if not s.gate.passed:
                self._finish(s, s.gate, None)
            elif s.render is not None and s.render.status == "infra":
                self._finish(s, None, "render_infra")
        for s in samples:
            if s.reward is None:
                counts.none[s.none_cause or "unknown"] += 1
            s.score_s = score_s

    def _finish(self, s: Sample, gate: GateVerdict | None, cause: str | None) -> None:
        out = combine(gate, s.components, self.cfg.reward.weights, none_cause=cause)
        s.components, s.reward, s.none_cause = out.components, out.total, out.none_cause


async def produce_trajectories(producer: GroupProducer, prompts: list[str], seeds: list[int], turns: int,
                               step: int = 0) -> list[Group]:
    """Run ``turns``-turn trajectories for a list of prompts, concurrently: the hook for evaluation
    (``brushrl eval --turns K``), which needs each turn's samples side by side.

    Args:
        producer: a producer over the run's actors (its critic actor is needed for ``turns`` > 1).
        prompts: user prompts, one group of ``rollout.group_size`` members each.
        seeds: the render seed (and reference draw) of each prompt's group, same length.
        turns: replies per member (1: single-turn groups).
        step: recorded in each sample's ``step``.

    Returns:
        One :class:`~brushrl.types.Group` per prompt, in order (group ids 0, 1, ...). For ``turns``
        > 1, ``group.trajectories[m].turns[k]`` is member m's sample of turn k + 1 (fewer turns when
        it stopped early; ``Trajectory.stop`` says why) and ``Trajectory.reward`` its reward.

    Raises:
        ValueError: ``prompts`` and ``seeds`` differ in length. Whatever ``GroupProducer.produce``
            raises for a group.
    """
    if len(prompts) != len(seeds):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    done = await asyncio.gather(*(producer.produce(Ticket(i, p, s), step, turns)
                                  for i, (p, s) in enumerate(zip(prompts, seeds))))
    return [group for group, _ in done]
