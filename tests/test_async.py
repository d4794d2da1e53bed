"""Asynchronous GRPO: the group ledger and capacity rule, and the async loop's scheduling.

The loop tests drive :class:`GRPOLoop` with a producer and a learner whose timing the test
controls (asyncio sleeps), so that staleness, drops and ordering are exact; the producer builds
real pipeline records and the learner side follows the ``LearnerSide`` protocol. The Ray pipeline
with injected failures is in ``tests/test_async_pipeline.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from brushrl.learner import GroupFilter
from brushrl.orchestrator.loop import GRPOLoop, Synced
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.producer import GroupCounts, Ticket
from brushrl.types import Completion, GateVerdict, Group, Sample


# ----------------------------------------------------------------------------------- ledger
def test_capacity_rule_is_the_areal_formula():
    ledger = GroupLedger(groups_per_step=2, max_staleness=1)
    assert ledger.free(version=0) == (1 + 0 + 1) * 2
    for _ in range(4):
        ledger.submit()
    assert ledger.free(0) == 0
    ledger.finish("accepted")
    ledger.finish("filtered")  # a filtered group frees its slot at once
    assert ledger.free(0) == 1
    ledger.finish("failed")
    ledger.finish("stale")
    assert ledger.free(0) == 3  # only the accepted group still holds a slot
    assert ledger.free(1) == 5


def test_every_end_path_keeps_the_invariant_and_rejects_unknown_states():
    ledger = GroupLedger(groups_per_step=1, max_staleness=2)
    for state in ("accepted", "filtered", "failed", "stale", "accepted"):
        ledger.submit()
        ledger.finish(state)
    ledger.submit()
    ledger.expire()  # an accepted group expired in the ready buffer
    assert ledger.as_dict() | {} == {"groups_per_step": 1, "max_staleness": 2, "submitted": 6, "accepted": 1,
                                     "filtered": 1, "failed": 1, "stale": 2, "running": 1, "forfeited": 0}
    with pytest.raises(ValueError, match="unknown terminal state"):
        ledger.finish("lost")
    ledger.running = 0  # corrupt it: the invariant check must notice
    with pytest.raises(AssertionError, match="ledger broken"):
        ledger.check()


def test_short_steps_forfeit_their_slots_and_resume_counts_lost_groups_as_failed():
    ledger = GroupLedger(groups_per_step=3, max_staleness=0)
    for _ in range(3):
        ledger.submit()
    ledger.finish("accepted")
    ledger.finish("filtered")
    ledger.finish("filtered")
    ledger.step_taken(consumed=1)  # a short step at version 0 -> version 1
    assert ledger.forfeited == 2 and ledger.free(1) == 3  # a whole new batch, as in sync GRPO
    ledger.step_taken(consumed=0)  # a skipped step forfeits nothing (no new version)
    assert ledger.forfeited == 2
    for _ in range(3):
        ledger.submit()
    ledger.finish("accepted")  # one ready, two running at the checkpoint
    restored = GroupLedger.from_dict(ledger.as_dict())
    restored.recover(ready=1)
    assert restored.running == 0 and restored.failed == 3 and restored.accepted == 1
    assert restored.free(1) == 3


# ------------------------------------------------------------------------------ async loop
class Engine:
    """The policy version the (simulated) rollout engine serves."""

    def __init__(self) -> None:
        self.version = 0
        self.events: list[tuple] = []


class TimedLearner:
    """``LearnerSide`` whose step takes ``learn_s`` seconds; ``sync`` bumps the engine's version."""

    def __init__(self, engine: Engine, learn_s: float = 0.02) -> None:
        self.engine, self.learn_s, self.version = engine, learn_s, 0
        self.trained: list[list[int]] = []
        self.busy = False

    async def train(self, groups: list[Group]) -> dict:
        self.busy = True
        self.engine.events.append(("train_start", self.version, [g.group_id for g in groups]))
        await asyncio.sleep(self.learn_s)
        self.trained.append([g.group_id for g in groups])
        self.version += 1
        self.busy = False
        return {"loss": 0.0}

    async def sync(self) -> Synced:
        await asyncio.sleep(0.001)
        self.engine.version = self.version
        return Synced(self.version)


def make_producer(engine: Engine, learner: TimedLearner | None = None, delays=None, rewards=None, fail=()):
    """A producer coroutine: samples at the engine's current version, takes ``delays[group_id]``
    seconds (default 0.01; a callable: until it returns True for the engine), and scores ``rewards(group_id)`` (default: varied -> accepted)."""
    delays = delays or {}

    async def produce(ticket: Ticket, step: int) -> tuple[Group, GroupCounts]:
        version = engine.version
        engine.events.append(("gen", ticket.group_id, version, learner.busy if learner else False))
        delay = delays.get(ticket.group_id, 0.01)
        if callable(delay):  # wait for a condition on the engine (deterministic under CPU load)
            while not delay(engine):
                await asyncio.sleep(0.005)
        else:
            await asyncio.sleep(delay)
        if ticket.group_id in fail:
            raise RuntimeError("rollout actor died")
        values = rewards(ticket.group_id) if rewards else [0.1, 0.9]
        samples = []
        for r in values:
            c = Completion("p", "", [1], [2], [-0.5], policy_version=version)
            samples.append(Sample(c, "", ticket.seed, ticket.group_id, step, GateVerdict("pass"), reward=r))
        counts = GroupCounts()
        counts.outcome["scored"] += len(values)
        return Group(ticket.group_id, "p", ticket.seed, samples), counts

    return produce


def make_draw():
    ids = iter(range(10_000))
    return lambda: Ticket(next(ids), "p", 0)


def run_loop(loop: GRPOLoop, steps: int) -> list:
    reports = []
    asyncio.run(loop.run(1, steps, reports.append))
    return reports


def test_staleness_zero_is_synchronous_grpo():
    engine = Engine()
    learner = TimedLearner(engine, learn_s=0.03)
    ledger = GroupLedger(groups_per_step=2, max_staleness=0)
    loop = GRPOLoop(ledger, GroupFilter(), make_draw(), make_producer(engine, learner), learner)
    reports = run_loop(loop, 4)
    # Each batch is sampled entirely by the version it trains; nothing is generated while the learner
    # steps; the next batch is admitted only after the weight sync.
    assert [r.staleness for r in reports] == [[0, 0]] * 4
    gens = [e for e in engine.events if e[0] == "gen"]
    assert not any(busy for *_, busy in gens)
    assert [v for _, _, v, _ in gens[:8]] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert learner.trained == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [r.version_after for r in reports] == [1, 2, 3, 4]
    assert all(r.ledger["stale"] == 0 for r in reports)


def test_staleness_one_overlaps_generation_with_learning_and_bounds_lag():
    engine = Engine()
    learner = TimedLearner(engine, learn_s=0.05)
    ledger = GroupLedger(groups_per_step=2, max_staleness=1)
    loop = GRPOLoop(ledger, GroupFilter(), make_draw(), make_producer(engine, learner), learner)
    reports = run_loop(loop, 5)
    gens = [e for e in engine.events if e[0] == "gen"]
    assert any(busy for *_, busy in gens), "no group was generated while the learner stepped"
    lags = [s for r in reports for s in r.staleness]
    assert max(lags) <= 1 and 1 in lags
    assert all(len(r.trained) == 2 for r in reports)


def test_a_slow_group_beyond_max_staleness_is_dropped_and_counted():
    engine = Engine()
    learner = TimedLearner(engine, learn_s=0.01)
    ledger = GroupLedger(groups_per_step=1, max_staleness=1)
    # Group 0 is sampled at version 0 and finishes only once the learner is at version 3.
    slow = make_producer(engine, learner, delays={0: lambda e: e.version >= 3})
    loop = GRPOLoop(ledger, GroupFilter(), make_draw(), slow, learner)
    reports = run_loop(loop, 6)
    ended = {e.ticket.group_id: e for r in reports for e in r.ended}
    assert ended[0].status == "stale" and ended[0].generated_by == 0
    assert reports[-1].ledger["stale"] >= 1
    assert max(s for r in reports for s in r.staleness) <= 1
    assert 0 not in [gid for batch in learner.trained for gid in batch]


def test_failures_and_filters_release_capacity_and_the_invariant_holds():
    engine = Engine()
    learner = TimedLearner(engine)

    def rewards(gid):
        return {0: [0.5, 0.5], 1: [None, 0.3]}.get(gid, [0.0, 1.0])  # zero variance, too few valid

    ledger = GroupLedger(groups_per_step=2, max_staleness=1)
    produce = make_producer(engine, learner, rewards=rewards, fail={2, 3})
    loop = GRPOLoop(ledger, GroupFilter(min_valid=2, tol=1e-6), make_draw(), produce, learner)
    reports = run_loop(loop, 3)
    statuses = {e.ticket.group_id: e.status for r in reports for e in r.ended}
    assert statuses[0] == "zero_variance" and statuses[1] == "too_few_valid"
    assert statuses[2] == statuses[3] == "failed"
    final = reports[-1].ledger
    assert final["filtered"] == 2 and final["failed"] == 2
    assert final["submitted"] == final["accepted"] + final["filtered"] + final["failed"] + final["stale"] + final["running"]
    assert all(len(r.trained) == 2 for r in reports), "the learner must never be starved by dropped groups"


def test_a_step_goes_ahead_short_when_every_group_is_rejected():
    engine = Engine()
    learner = TimedLearner(engine)
    ledger = GroupLedger(groups_per_step=1, max_staleness=0)
    produce = make_producer(engine, learner, rewards=lambda gid: [0.5, 0.5])  # always zero variance
    loop = GRPOLoop(ledger, GroupFilter(), make_draw(), produce, learner)
    reports = run_loop(loop, 2)
    assert [r.trained for r in reports] == [[], []] and learner.trained == []
    assert [r.version_after for r in reports] == [0, 0]  # skipped: no optimizer step, no new version
    assert reports[-1].ledger["filtered"] >= 6


def test_the_run_fails_loudly_when_every_group_keeps_failing():
    """A lost node or dead actor makes every group fail at once; the loop must not count on through
    empty (skipped) steps to a run that "finishes" having trained nothing: after
    ``max_failed_steps`` such steps in a row it raises with the groups' own error. Filtered groups
    (no reward spread) never count towards it."""
    from brushrl.orchestrator.loop import GroupsFailing

    engine = Engine()
    learner = TimedLearner(engine)
    ledger = GroupLedger(groups_per_step=1, max_staleness=0)
    produce = make_producer(engine, learner, fail=set(range(1, 10_000)))  # group 0 trains, then all fail
    loop = GRPOLoop(ledger, GroupFilter(), make_draw(), produce, learner, max_failed_steps=3)
    reports = []
    with pytest.raises(GroupsFailing, match=r"3 learner steps in a row.*rollout actor died"):
        asyncio.run(loop.run(1, 50, reports.append))
    assert [len(r.trained) for r in reports] == [1, 0, 0]  # step 4 raised: steps 2-4 had only failures
    assert all(e.status == "failed" for r in reports[1:] for e in r.ended)

    filtered = GRPOLoop(GroupLedger(groups_per_step=1, max_staleness=0), GroupFilter(), make_draw(),
                        make_producer(engine, learner, rewards=lambda gid: [0.5, 0.5]), learner, max_failed_steps=1)
    assert [r.trained for r in run_loop(filtered, 3)] == [[], [], []]  # skipped, but not failing


# ----------------------------------------------------------------------------- bench summary
def test_bench_summary_leaves_out_warmup_and_weights_staleness_by_groups():
    from brushrl.orchestrator.bench import summarize

    def rec(step, wall, learn, stale_mean, stale_max, accepted):
        return {"step": step, "time/step_s": wall, "time/learn_s": learn, "time/gen_s": 1.0, "time/render_s": 2.0,
                "time/score_s": 0.5, "time/sync_s": 0.5, "staleness/mean": stale_mean, "staleness/max": stale_max,
                "groups/accepted": accepted, "ledger/accepted": step, "ledger/stale": 0}

    metrics = [rec(1, 100.0, 1.0, 0.0, 0, 1), rec(2, 10.0, 5.0, 1.0, 1, 1), rec(3, 30.0, 5.0, 0.0, 0, 3)]
    out = summarize(metrics, warmup=1)
    assert out["steps"] == 2 and out["wall_s"] == 40.0
    assert out["steps_per_hour"] == pytest.approx(180.0)
    assert out["learner_idle_share"] == pytest.approx(0.75)
    assert out["staleness_mean"] == pytest.approx(0.25) and out["staleness_max"] == 1
    assert out["stage_share"]["render"] == pytest.approx(4.0 / 18.0)
    assert out["groups"] == {"accepted": 3, "stale": 0}
    with pytest.raises(ValueError, match="more than 1"):
        summarize(metrics[:1], warmup=1)
