"""The GRPO training loop: producers and the learner run concurrently on one asyncio event loop,
with bounded staleness (``max_staleness = 0`` is synchronous GRPO on the same code).

Every admitted group is an asyncio task that awaits Ray actor calls (rollout -> gate -> render ->
score, ``GroupProducer.produce``); the learner coroutine awaits the learner actor's step and
the weight sync while those tasks keep running. Nothing here blocks the event loop: stage work
happens in Ray actors, the driver only awaits ``ObjectRef``s.

Admission and group end states follow :class:`brushrl.orchestrator.capacity.GroupLedger`:

* a group is submitted whenever ``ledger.free(version) > 0`` (checked after every state change);
* when it finishes it is ``failed`` (its producer raised), ``stale`` (``version - generated_by >
  max_staleness``), ``filtered`` (``zero_variance`` / ``too_few_valid``) or ``accepted`` into the
  ready buffer; each non-accepted end frees its slot at once;
* a learner step takes up to ``groups_per_step`` ready groups, oldest policy version first; ready
  groups that became too stale after a weight sync expire (``accepted`` -> ``stale``);
* a step goes ahead short when ``max_rejected`` groups ended without being accepted since the last
  step (three batches' worth of production); with no group at all it is
  skipped (no optimizer update, no new policy version);
* after ``max_failed_steps`` skipped steps in a row whose every group *failed* (a producer raised:
  a dead actor, a lost node) the loop raises :class:`GroupsFailing` with the last failure, instead
  of counting on through empty steps.

*Staleness* of a trained group = the learner's policy version when it trains on it minus the
version that sampled it (``Completion.policy_version``): its oldest sample's, and with multi-turn
revision its oldest turn's (a trajectory whose turns straddle a weight sync is as stale as its
first turn; each turn still keeps its own version and behaviour log-probs for the loss). It is at most ``max_staleness`` for every
trained group (enforced by dropping), and the capacity rule keeps drops rare by not admitting more
than ``max_staleness + 1`` learner batches of groups at a time. With ``max_staleness = 0`` the loop
is synchronous GRPO: a batch of groups is sampled by version v, the learner steps, the new adapter
is synced, and only then is the next batch admitted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from brushrl.learner.advantages import ACCEPTED, GroupFilter
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.producer import GroupCounts, Ticket
from brushrl.types import Group


class LearnerSide(Protocol):
    """The learner as the loop sees it (``brushrl.orchestrator.actors.ActorLearnerSide`` wraps the
    Ray learner and rollout actors)."""

    async def train(self, groups: list[Group]) -> dict[str, float]:
        """One optimizer step on ``groups`` (1..groups_per_step); returns the learner's metrics."""
        ...

    async def sync(self) -> Synced:
        """Push the new weights to the rollout engine; returns the version it now serves and the
        sync's metrics (the canary's ``sync/*``, ``brushrl.orchestrator.sync_check``). Raising stops
        the run before the next learner step."""
        ...


@dataclass
class Synced:
    """The outcome of one weight sync.

    Attributes:
        version: the policy version the rollout engine serves now.
        metrics: the sync canary's ``sync/*`` values, nats/token ({}: not checked).
    """

    version: int
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class Ended:
    """A group that reached a terminal state.

    Attributes:
        ticket: its ticket. group: the produced group (None when it failed).
        status: ``accepted`` (trained this step), ``zero_variance``, ``too_few_valid``, ``failed``
            or ``stale`` (the ledger's ``filtered`` covers the two filter verdicts).
        counts: the producer's counts (None when it failed).
        generated_by: policy version that sampled it (None when it failed).
        detail: why it failed.
    """

    ticket: Ticket
    group: Group | None
    status: str
    counts: GroupCounts | None = None
    generated_by: int | None = None
    detail: str = ""


@dataclass
class StepReport:
    """What happened between the previous learner step and this one (inclusive).

    Attributes:
        step: learner step number (1-based, continues across resumes).
        version_before: policy version the step trained at (the one serving rollouts meanwhile).
        version_after: policy version served after the step's weight sync.
        trained: groups trained on (each also in ``ended`` with status ``accepted``).
        ended: every group that ended in this window (trained, filtered, failed, stale).
        staleness: per trained group, ``version_before - generated_by``.
        stats: the learner's metrics ({} for a skipped step).
        wait_s: seconds the learner waited for groups; learn_s: the optimizer step; sync_s: the
            weight sync; all wall seconds.
        ledger: the ledger's counters after the step. ready: accepted groups still waiting.
        sync: the weight sync's metrics (``Synced.metrics``; {} for a skipped step or no check).
        checkpoint: what the ``checkpoint`` callback returned for this step, or None.
        step_s: wall seconds from the end of the previous step (or the start of ``run``) to the
            end of this one's weight sync.
    """

    step: int
    version_before: int
    version_after: int
    trained: list[Group]
    ended: list[Ended]
    staleness: list[int]
    stats: dict[str, float]
    wait_s: float
    learn_s: float
    sync_s: float
    ledger: dict[str, int]
    ready: int
    sync: dict[str, float] = field(default_factory=dict)
    checkpoint: object | None = None
    step_s: float = 0.0


class GroupsFailing(RuntimeError):
    """Every group of ``GRPOLoop.max_failed_steps`` learner steps in a row failed: the run cannot
    train (its message names the count and the last group's error)."""


class GRPOLoop:
    """Runs learner steps while producer tasks fill the ready buffer (module docstring).

    Args:
        ledger: the group ledger (``groups_per_step`` and ``max_staleness`` live there); restored
            from a checkpoint on resume.
        group_filter: the learner's group filter (``GroupFilter.from_config(cfg.learner)``).
        draw: returns the next :class:`Ticket` (``GroupProducer.ticket``).
        produce: ``(ticket, step) -> awaitable (Group, GroupCounts)`` (``GroupProducer.produce``);
            raising marks the group failed.
        learner: a :class:`LearnerSide`.
        version: policy version the rollout engine serves at the start.
        max_rejected: a step goes ahead short after this many non-accepted groups since the last
            step (default: 3 x groups_per_step: three batches' worth of production; the trainer
            passes ``orchestrator.max_rejected_batches`` x groups_per_step).
        checkpoint: ``(step) -> awaitable | None``, called right after a step's weight sync and
            before the next learner call is issued (so it sees exactly that step's state).
        max_failed_steps: raise :class:`GroupsFailing` after this many skipped steps in a row
            whose every ended group failed (``orchestrator.max_failed_steps``; None: never).
    """

    def __init__(
        self,
        ledger: GroupLedger,
        group_filter: GroupFilter,
        draw: Callable[[], Ticket],
        produce: Callable[[Ticket, int], Awaitable[tuple[Group, GroupCounts]]],
        learner: LearnerSide,
        *,
        version: int = 0,
        max_rejected: int | None = None,
        checkpoint: Callable[[int], object | None] | None = None,
        max_failed_steps: int | None = None,
    ) -> None:
        self.ledger = ledger
        self.group_filter = group_filter
        self.draw = draw
        self.produce = produce
        self.learner = learner
        self.version = version
        self.gps = ledger.groups_per_step
        self.max_rejected = max_rejected if max_rejected is not None else 3 * self.gps
        self.checkpoint = checkpoint or (lambda step: None)
        self.ready: list[tuple[int, Group, GroupCounts, Ticket]] = []
        self.ended: list[Ended] = []
        self.rejected = 0  # non-accepted ends since the last step
        self.max_failed_steps = max_failed_steps
        self.failed_steps = 0  # skipped steps in a row whose every group failed
        self.step = 0  # the learner step being prepared (groups submitted now record it)
        self._tasks: set[asyncio.Task] = set()
        self._cond: asyncio.Condition | None = None

    # ------------------------------------------------------------------ producers
    def _admit(self) -> None:
        while self.ledger.free(self.version) > 0:
            ticket = self.draw()
            self.ledger.submit()
            task = asyncio.get_running_loop().create_task(self._run_group(ticket, self.step))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run_group(self, ticket: Ticket, step: int) -> None:
        try:
            group, counts = await self.produce(ticket, step)
        except asyncio.CancelledError:
            raise  # run ending: the group stays "running" (a resume counts it as failed)
        except Exception as exc:  # noqa: BLE001 - any producer failure ends the group as failed
            self._end(Ended(ticket, None, "failed", detail=f"{type(exc).__name__}: {exc}"[:500]))
        else:
            generated_by = min(s.completion.policy_version for s in group.samples)
            if self.ledger.is_stale(generated_by, self.version):
                self._end(Ended(ticket, group, "stale", counts, generated_by))
            else:
                verdict = self.group_filter.verdict(group.rewards)
                if verdict == ACCEPTED:
                    self.ledger.finish("accepted")
                    self.ready.append((generated_by, group, counts, ticket))
                else:
                    self._end(Ended(ticket, group, verdict, counts, generated_by))
        self._admit()
        async with self._cond:
            self._cond.notify_all()

    def _end(self, ended: Ended) -> None:
        """Record a non-accepted end (frees the group's slot)."""
        state = "filtered" if ended.status not in ("failed", "stale") else ended.status
        self.ledger.finish(state)
        self.ended.append(ended)
        self.rejected += 1

    def _expire(self) -> None:
        """Move ready groups that are now too stale to ``stale``."""
        keep = []
        for item in self.ready:
            generated_by, group, counts, ticket = item
            if self.ledger.is_stale(generated_by, self.version):
                self.ledger.expire()
                self.ended.append(Ended(ticket, group, "stale", counts, generated_by))
                self.rejected += 1
            else:
                keep.append(item)
        self.ready = keep

    def _batch_ready(self) -> bool:
        return len(self.ready) >= self.gps or self.rejected >= self.max_rejected

    def _take_batch(self) -> list[tuple[int, Group, GroupCounts, Ticket]]:
        self.ready.sort(key=lambda item: (item[0], item[1].group_id))  # oldest policy first
        batch, self.ready = self.ready[: self.gps], self.ready[self.gps :]
        return batch

    # ------------------------------------------------------------------ learner
    async def run(self, first_step: int, last_step: int,
                  on_step: Callable[[StepReport], Awaitable[None] | None]) -> None:
        """Run learner steps ``first_step..last_step`` (inclusive).

        ``on_step(report)`` is called after each step; a coroutine result is awaited before the
        next step's report (reports stay in order) but the loop does not wait for it before
        collecting the next batch. On return (or cancellation) every producer task is cancelled;
        their groups stay ``running`` in the ledger.
        """
        self._cond = asyncio.Condition()
        self.step = first_step
        pending_report: asyncio.Task | None = None
        try:
            self._admit()
            t_prev = time.perf_counter()
            for step in range(first_step, last_step + 1):
                self.step = step
                t0 = time.perf_counter()
                async with self._cond:
                    await self._cond.wait_for(self._batch_ready)
                wait_s = time.perf_counter() - t0
                batch = self._take_batch()
                groups = [g for _, g, _, _ in batch]
                version_before = self.version
                t1 = time.perf_counter()
                stats = await self.learner.train(groups) if groups else {}
                learn_s = time.perf_counter() - t1
                t2 = time.perf_counter()
                synced = Synced(self.version)
                if groups:
                    synced = await self.learner.sync()
                    self.version = synced.version
                    self.ledger.step_taken(len(groups))
                sync_s = time.perf_counter() - t2
                self._expire()
                ckpt = self.checkpoint(step)
                trained = [Ended(t, g, "accepted", c, v) for v, g, c, t in batch]
                ended, self.ended, self.rejected = self.ended + trained, [], 0
                self._count_failing(ended)
                self.step = step + 1
                if step < last_step:  # no new work after the last step
                    self._admit()
                report = StepReport(
                    step=step, version_before=version_before, version_after=self.version, trained=groups,
                    ended=ended, staleness=[version_before - v for v, *_ in batch], stats=stats,
                    wait_s=wait_s, learn_s=learn_s, sync_s=sync_s, ledger=self.ledger.as_dict(),
                    ready=len(self.ready), sync=synced.metrics, checkpoint=ckpt, step_s=time.perf_counter() - t_prev,
                )
                t_prev = time.perf_counter()
                if pending_report is not None:
                    await pending_report
                pending_report = asyncio.ensure_future(_maybe_await(on_step(report)))
            if pending_report is not None:
                await pending_report
        finally:
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    def _count_failing(self, ended: list[Ended]) -> None:
        """Count a step whose every ended group failed (none trained); raise
        :class:`GroupsFailing` at ``max_failed_steps`` of them in a row."""
        if not ended or any(e.status != "failed" for e in ended):
            self.failed_steps = 0
            return
        self.failed_steps += 1
        if self.max_failed_steps is not None and self.failed_steps >= self.max_failed_steps:
            raise GroupsFailing(
                f"every group failed for {self.failed_steps} learner steps in a row "
                f"(orchestrator.max_failed_steps), {len(ended)} in the last; the last: {ended[-1].detail}")


async def _maybe_await(value) -> None:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        await value
