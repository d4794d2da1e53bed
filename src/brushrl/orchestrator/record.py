"""One learner step's record: the ``metrics.jsonl`` line, the Ray counter increments and the samples
to write, computed from the loop's :class:`~brushrl.orchestrator.loop.StepReport` in one place.

Pure: no files, no Ray. The keys are documented in docs/metrics.md; ``reward/mean`` and the
component means are over samples with a reward (a None reward is excluded, never 0), render seconds
are over renders that ran (a cache hit took none; ``render/cache_hit_rate`` counts it).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from brushrl.config import RewardConfig
from brushrl.orchestrator.loop import StepReport
from brushrl.stats import quantile
from brushrl.types import Sample, Trajectory


@dataclass
class StepRecord:
    """What :func:`step_record` computed.

    Attributes:
        record: the ``metrics.jsonl`` line.
        samples: every sample of the step's ended groups with its index in the group (its
            trajectory's member index with revision), the group's end state and its trajectory
            (None for a single-turn group), in group order (``rollouts.parquet`` rows, PNGs).
        counts: this step's counter increments for ``PipelineMetrics.publish``: ``{"render":
            {status: n}, "gate": {verdict: n}, "none": {cause: n}, "scorer_none": {cause: n},
            "groups": {status: n}}``.
        render_times: wall seconds of each render that ran.
        group_ends: groups by end state (``accepted``, ``zero_variance``, ``too_few_valid``,
            ``failed``, ``stale``).
    """

    record: dict
    samples: list[tuple[Sample, int, str, Trajectory | None]]
    counts: dict[str, dict[str, int]]
    render_times: list[float]
    group_ends: Counter


def step_record(report: StepReport, reward: RewardConfig) -> StepRecord:
    """The step's record (module docstring); stamps each sample with ``report.step``."""
    samples: list[tuple[Sample, int, str, Trajectory | None]] = []
    trajectories: list[Trajectory] = []
    ends: Counter = Counter()
    counts: dict[str, Counter] = defaultdict(Counter)
    gen_s = render_s = score_s = critic_s = 0.0
    scorer_s: Counter = Counter()
    render_times: list[float] = []
    for e in report.ended:
        ends[e.status] += 1
        if e.counts is not None:
            gen_s += e.counts.gen_s
            render_s += e.counts.render_wall_s
            score_s += e.counts.score_s
            critic_s += e.counts.critic_s
            scorer_s.update(e.counts.scorer_wall_s)
            render_times += e.counts.render_s
            for key, counter in e.counts.as_dict().items():
                counts[key].update(counter)
        if e.group is not None and e.group.trajectories:
            trajectories += e.group.trajectories
            for t in e.group.trajectories:
                for s in t.turns:
                    s.step = report.step
                    samples.append((s, t.member, e.status, t))
        elif e.group is not None:
            for i, s in enumerate(e.group.samples):
                s.step = report.step
                samples.append((s, i, e.status, None))
    counts["groups"].update(ends)
    scored = [s for s, *_ in samples]
    valid = [s.reward for s in scored if s.reward is not None]
    renders = [s.render for s in scored if s.render is not None]
    stale, step_s = report.staleness, report.step_s
    record = {
        "step": report.step,
        "policy_version": report.version_before,  # the version the learner trained at
        "reward/mean": _mean(valid),
        "gate/pass_rate": sum(s.gate.passed for s in scored) / max(len(scored), 1),
        "samples": len(scored),
        "samples/none": len(scored) - len(valid),
        "groups/accepted": len(report.trained),
        "groups/filtered": ends["zero_variance"] + ends["too_few_valid"],
        "groups/failed": ends["failed"],
        "groups/stale": ends["stale"],
        "staleness/mean": _mean(stale),
        "staleness/max": max(stale) if stale else None,
        # completions sampled across a weight sync (rollout.partial_rollouts): more than one version
        "rollout/partial_samples": sum(bool(s.completion.version_spans) for s in scored),
        "render/per_s": len(render_times) / render_s if render_s else 0.0,
        "render/mean_s": _mean(render_times) or 0.0,
        "render/p50_s": quantile(render_times, 0.5),
        "render/p95_s": quantile(render_times, 0.95),
        "render/cache_hit_rate": sum(r.cache_hit for r in renders) / len(renders) if renders else 0.0,
        "time/gen_s": gen_s,
        "time/render_s": render_s,
        "time/score_s": score_s,
        # each scorer's own seconds (launch to its last answer), summed over the step's groups
        **{f"time/score/{name}_s": scorer_s.get(name, 0.0) for name in reward.scorers},
        "time/wait_s": report.wait_s,
        "time/learn_s": report.learn_s,
        "time/update_s": report.learn_s,  # the optimizer step (ray_brushrl_learner_update_seconds)
        "time/sync_s": report.sync_s,
        "time/step_s": step_s,
        "learner/idle_share": max(0.0, 1.0 - report.learn_s / step_s) if step_s > 0 else 0.0,
        **{f"ledger/{k}": v for k, v in report.ledger.items()},
        "ready": report.ready,
        **{f"learner/{k}": v for k, v in report.stats.items()},
        **report.sync,  # the sync canary's sync/* (brushrl.orchestrator.sync_check); absent when unchecked
    }
    for name in reward.weights:
        record[f"reward/{name}"] = _mean([s.components.get(name) for s in scored if s.reward is not None
                                          and s.components.get(name) is not None])
    if trajectories:
        record.update(turn_record(trajectories, critic_s))
    stages = [s.raw["judge_curriculum_stage"] for s in scored if "judge_curriculum_stage" in s.raw]
    if stages:
        record["judge/curriculum_stage"] = max(stages)  # the judge's reference curriculum stage
    return StepRecord(record, samples, {k: dict(v) for k, v in counts.items()}, render_times, ends)


def turn_record(trajectories: list[Trajectory], critic_s: float) -> dict:
    """The multi-turn keys of a step's record (docs/metrics.md): per turn k, ``turn/<k>/reward_mean``
    (over that turn's samples with a reward), ``turn/<k>/gate_pass_rate`` and ``turn/<k>/samples``;
    ``trajectory/reward_mean`` (trajectories with a reward), ``trajectory/improved_share`` (share
    of them whose last turn's reward beats their first's), ``trajectory/turns_mean``,
    ``trajectory/done`` (stopped because the critic said done), ``trajectory/none`` (reward None)
    and ``time/critic_s`` (seconds waited for critiques, summed over groups)."""
    by_turn: dict[int, list[Sample]] = defaultdict(list)
    for t in trajectories:
        for s in t.turns:
            by_turn[s.turn].append(s)
    out: dict = {}
    for k in sorted(by_turn):
        turn = by_turn[k]
        out[f"turn/{k}/reward_mean"] = _mean([s.reward for s in turn if s.reward is not None])
        out[f"turn/{k}/gate_pass_rate"] = sum(s.gate.passed for s in turn) / len(turn)
        out[f"turn/{k}/samples"] = len(turn)
    valid = [t for t in trajectories if t.reward is not None]
    improved = [t.turns[-1].reward > t.turns[0].reward for t in valid]
    out.update({
        "trajectory/reward_mean": _mean([t.reward for t in valid]),
        "trajectory/improved_share": sum(improved) / len(improved) if improved else None,
        "trajectory/turns_mean": _mean([len(t.turns) for t in trajectories]),
        "trajectory/done": sum(t.stop == "done" for t in trajectories),
        "trajectory/gate_pass": sum(t.stop == "gate_pass" for t in trajectories),
        "trajectory/none": len(trajectories) - len(valid),
        "time/critic_s": critic_s,
    })
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None
