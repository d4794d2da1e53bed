"""Wall time and GPU-hours of a run of S steps on a cluster shape, from stage latencies.

The model and its assumptions are written up in docs/plan.md. With ``R = groups_per_step * G *
static_pass`` renders a step, ``n`` renderers placed, ``c`` concurrent renders
(``ResourcePlan.concurrent_renders``, at most ``n``), ``k = orchestrator.max_staleness`` and ``W``
learner workers:

* one batch's latency from admission to scored (generate, then render, then score; the render
  phase is ``ceil(R / n)`` waves of ``render_s``, longer when cores allow fewer than ``n`` at once)::

      L = gen_s + ceil(R / n) * render_s * max(1, n / c) + R * score_s

* the learner's step over that batch (``learn_s`` is ONE worker's seconds for the whole batch;
  ``learner.strategy: deepspeed`` deals the batch's ``B = groups_per_step * G`` samples at most
  ``ceil(B / W)`` to a worker, ``brushrl.learner.shard``)::

      learn = learn_s * ceil(B / W) / B

* the step period, from the loop (``brushrl.orchestrator.loop``) in steady state, batches of
  ``groups_per_step`` groups moving together. Let ``e_n`` be the end of learner step n (its weight
  sync done). (1) Capacity (``brushrl.orchestrator.capacity``): at most ``(k + 1) *
  groups_per_step`` groups running or waiting, the batch being trained counted until the version
  increments, so batch n is admitted when step ``n - k - 1`` ends: ``a_n = e_{n-k-1}``, ready at
  ``a_n + L``. (2) One learner: step n starts at ``max(a_n + L, e_{n-1})``. (3) No partial rollouts:
  the sync's ``load_adapter`` queues on the engine thread behind the generate call in flight
  (``brushrl.rollout.batching``), on every replica; the batch admitted at ``e_{n-1}`` (batch
  ``n + k``) is generating then, so step n's sync ends after it. Hence::

      e_n = max(e_{n-k-1} + L + learn,  e_{n-1} + learn,  e_{n-1} + gen_s)

  whose cycle means give ``T = max((L + learn) / (k + 1), learn, gen_s)``; with the renderers and
  scorers shared by the batches in flight, also ``T >= R * render_s / c`` and ``T >= R * score_s``::

      step_s = max((L + learn) / (k + 1), learn, gen_s, R * render_s / c, R * score_s)

  ``k = 0`` is the synchronous loop, ``L + learn`` (the other terms are never larger). The
  ``gen_s`` term holds for every ``k >= 1``: a larger staleness bound cannot take the step below one
  batch's generation while syncs wait for the generation in flight.

* ``rollout.partial_rollouts`` with ``k >= 1`` (docs/async.md "Partial rollouts"): a sync ends one
  decode step after the learner's (counted as 0), so (3) goes; but the engine still merges requests
  at call boundaries (``brushrl.rollout.batching``), and the batch admitted at ``e_{n-1}`` now finds
  a call in flight and waits for it, at most ``gen_s``; a call carries at most ``m = max(1,
  floor(replicas x max_num_seqs / (groups_per_step x G)))`` batches, so the engines generate at
  most ``m`` batches per ``gen_s``. An upper bound on the step (the wait taken whole)::

      step_s = min(max((L + gen_s + learn) / (k + 1), learn, gen_s / m, R * render_s / c, R * score_s),
                   the step without partial rollouts)

  (the second: the engine then runs one batch per ``gen_s`` as before; ``tests/test_plan.py``
  checks both against a simulation of the loop and the engine's calls). It beats the ``gen_s``
  floor only with ``(L + gen_s + learn) / (k + 1) < gen_s``, e.g. ``k = 2`` where ``L`` is mostly
  generation; joining the call in flight (iteration-level batching) would drop the wait.

* ``sync`` mode is ``k = 0``; ``async`` takes ``k = max(1, orchestrator.max_staleness)``.
* ``wall_s = startup_s + steps * step_s``; GPU-hours = ``wall_h * GPUs of the nodes that are up``
  (by GPU type), and separately ``wall_h * GPUs the actors reserve``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Literal

from brushrl.config import BrushRLConfig, StageEstimates
from brushrl.plan.resources import ResourcePlan, build_plan

Mode = Literal["sync", "async"]

#: The seeds' reproduction (Hugging Face, TRL + OpenEnv, Qwen3.5-35B-A3B, judge-led): 110 steps of 8
#: rollouts on one H200, step times summing to 34.8 h (median 1,112 s), from its ``results/README.md``
#: and ``results/curve-judge-led.csv`` (../shared/notes/field.md). What ``brushrl plan`` compares with.
SEEDS_RUN = {"steps": 110, "samples_per_step": 8, "h200_hours": 34.8, "step_median_s": 1112.0}


def seeds_h200_hours(steps: int, samples_per_step: int) -> float:
    """The seeds' reproduction's H200-hours for ``steps`` steps of ``samples_per_step`` samples, at its
    own H200-seconds a sample (34.8 h x 3600 / (110 x 8) = 142 s): the cost to beat."""
    per_sample_s = SEEDS_RUN["h200_hours"] * 3600 / (SEEDS_RUN["steps"] * SEEDS_RUN["samples_per_step"])
    return steps * samples_per_step * per_sample_s / 3600


def default_mode(cfg: BrushRLConfig) -> Mode:
    """The pipeline the trainer runs for ``cfg``: ``async`` when ``orchestrator.max_staleness >= 1``
    (producers sample the next groups while the learner steps, docs/async.md), else ``sync``."""
    return "async" if cfg.orchestrator.max_staleness >= 1 else "sync"


def staleness_of(cfg: BrushRLConfig, mode: Mode) -> int:
    """The staleness bound ``k`` the model runs ``mode`` with: 0 for ``sync``, the config's
    ``orchestrator.max_staleness`` (at least 1) for ``async``.

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in ("sync", "async"):
        raise ValueError(f"unknown mode {mode!r} (sync or async)")
    return 0 if mode == "sync" else max(1, cfg.orchestrator.max_staleness)


def learner_share(cfg: BrushRLConfig) -> float:
    """Share of a step's batch the busiest learner worker trains: ``ceil(B / W) / B`` with ``B =
    groups_per_step * G`` samples and ``W`` workers (``brushrl.learner.shard`` deals at most
    ``ceil(B / W)`` to each; 1 with ``strategy: single``). The step's learn seconds are
    ``learn_s`` x this: ideal data-parallel scaling, an upper bound on the speed-up (the ZeRO-2
    gradient reduce-scatter of a LoRA adapter, 16.3 M parameters on Qwen3.5-35B-A3B, is not counted,
    nor the padding rows that keep the workers' micro-batches the same shape)."""
    samples = cfg.rollout.groups_per_step * cfg.rollout.group_size
    workers = cfg.learner.workers if cfg.learner.strategy == "deepspeed" else 1
    return math.ceil(samples / workers) / samples


@dataclass
class RunEstimate:
    """Estimated time and cost of a run. Seconds are wall-clock seconds; hours are node/GPU hours."""

    steps: int
    mode: str
    step_s: float
    """Wall seconds of one learner step."""
    stage_s: dict[str, float]
    """Seconds of each stage for one batch (``gen``, ``render``, ``score``, ``learn``; ``learn`` is
    the step's, after the split over learner workers)."""
    wall_s: float
    """``startup_s + steps * step_s``."""
    render_share: float
    """Share of a (sync) step spent rendering."""
    gpu_hours: dict[str, float] = field(default_factory=dict)
    """GPU type -> GPU-hours of every GPU on the nodes that are up (what a cloud bills)."""
    gpu_hours_reserved: float = 0.0
    """GPU-hours the actors reserve (fractional GPUs count as fractions)."""
    node_hours: dict[str, float] = field(default_factory=dict)
    """Node kind -> node-hours (nodes up × wall hours)."""
    staleness: int = 0
    """``k`` of the model (:func:`staleness_of`)."""
    bound: str = "pipeline"
    """The term of :func:`step_seconds` that sets the step (``pipeline``: ``(L + learn) / (k + 1)``)."""

    @property
    def wall_h(self) -> float:
        return self.wall_s / 3600.0


def step_seconds(est: StageEstimates, renders: float, renderers: int, concurrent: float, staleness: int = 0,
                 learn_share: float = 1.0, partial_batches: int = 0) -> tuple[float, dict[str, float], str]:
    """Seconds of one learner step in steady state, each stage's seconds for one batch, and the
    term that sets the step (see the module docstring).

    Args:
        est: stage latencies.
        renders: renders a step (``groups_per_step * G * static_pass``; may be fractional).
        renderers: renderer actors placed (>= 1).
        concurrent: renders that run at once (``<= renderers``; fewer when cores are short).
        staleness: ``k``, the staleness bound (0: synchronous).
        learn_share: share of ``learn_s`` a step takes (:func:`learner_share`).
        partial_batches: 0: syncs wait for the generation in flight; ``m >= 1``: partial rollouts,
            the engines' calls carrying at most ``m`` batches (:func:`partial_batches`).

    Returns:
        ``(step_s, stages, bound)``; ``bound`` is ``pipeline``, ``learn``, ``gen``, ``render`` or ``score``.

    Raises:
        ValueError: no renderer, or a negative staleness.
    """
    if renderers < 1 or concurrent <= 0:
        raise ValueError("no renderer placed: the run cannot render")
    if staleness < 0:
        raise ValueError(f"staleness {staleness} < 0")
    render = math.ceil(renders / renderers - 1e-9) * est.render_s * max(1.0, renderers / concurrent)
    stages = {"gen": est.gen_s, "render": render, "score": renders * est.score_s, "learn": est.learn_s * learn_share}
    terms = {"pipeline": sum(stages.values()) / (staleness + 1), "learn": stages["learn"], "gen": est.gen_s,
             "render": renders * est.render_s / concurrent, "score": stages["score"]}
    bound = max(terms, key=terms.get)
    if partial_batches and staleness:  # the admission's wait for the call in flight, at most gen_s
        partial = dict(terms, pipeline=(sum(stages.values()) + est.gen_s) / (staleness + 1),
                       gen=est.gen_s / partial_batches)
        if max(partial.values()) < terms[bound]:
            bound = max(partial, key=partial.get)
            return partial[bound], stages, bound
    return terms[bound], stages, bound


def partial_batches(cfg: BrushRLConfig) -> int:
    """0 without ``rollout.partial_rollouts``; else the batches one round of engine calls carries,
    ``max(1, floor(replicas x max_num_seqs / (groups_per_step x G)))`` (module docstring)."""
    r = cfg.rollout
    if not r.partial_rollouts:
        return 0
    return max(1, r.replicas * (r.max_num_seqs or 1) // (r.groups_per_step * r.group_size))


def estimate_run(cfg: BrushRLConfig, plan: ResourcePlan, steps: int, mode: Mode = "sync") -> RunEstimate:
    """Estimate wall time and GPU-hours of ``steps`` learner steps of ``cfg`` placed as ``plan``."""
    est = cfg.resources.estimates
    k = staleness_of(cfg, mode)
    step_s, stages, bound = step_seconds(est, plan.renders_per_step, plan.renderers_placed, plan.concurrent_renders,
                                         k, learner_share(cfg), partial_batches(cfg))
    wall_s = est.startup_s + steps * step_s
    wall_h = wall_s / 3600.0
    gpu_hours: dict[str, float] = {}
    node_hours: dict[str, float] = {}
    for node in plan.nodes:
        node_hours[node.name] = node.nodes_up * wall_h
        if node.gpus and node.nodes_up:
            key = node.gpu_type or "GPU"
            gpu_hours[key] = gpu_hours.get(key, 0.0) + node.nodes_up * node.gpus * wall_h
    reserved = sum(a.count * a.gpus for a in plan.actors if a.count) * wall_h
    return RunEstimate(steps, mode, step_s, stages, wall_s, stages["render"] / sum(stages.values()),
                       gpu_hours, reserved, node_hours, k, bound)


def with_estimates_at(cfg: BrushRLConfig, end: Literal["low", "high"]) -> BrushRLConfig:
    """``cfg`` with every field of ``resources.estimates.ranges`` at its ``end`` (the others kept),
    the end widened to the field's own value when the value lies outside its range.

    Every estimate raises a run's cost as it grows (more seconds, more cores a render, more renders
    a step), so the ``low`` config bounds the cost from below and ``high`` from above."""
    est = cfg.resources.estimates
    pick = min if end == "low" else max
    at = {name: pick(bounds[0 if end == "low" else 1], getattr(est, name)) for name, bounds in est.ranges.items()}
    return cfg.model_copy(update={"resources": cfg.resources.model_copy(
        update={"estimates": est.model_copy(update=at)})})


def estimate_bounds(cfg: BrushRLConfig, steps: int, mode: Mode) -> tuple[RunEstimate, RunEstimate] | None:
    """The run's estimate with every ranged estimate at its low end and at its high end
    (:func:`with_estimates_at`; each end placed again, since ``render_cores`` and ``static_pass`` move
    the plan's concurrency and renders a step); None when ``resources.estimates.ranges`` is empty."""
    if not cfg.resources.estimates.ranges:
        return None
    low, high = (with_estimates_at(cfg, end) for end in ("low", "high"))
    return (estimate_run(low, build_plan(low), steps, mode), estimate_run(high, build_plan(high), steps, mode))


#: metrics.jsonl key -> StageEstimates field, per step (``render/mean_s`` is per render).
_RUN_KEYS = {"time/gen_s": "gen_s", "time/learn_s": "learn_s", "render/mean_s": "render_s"}
#: The step's groups that ended with their stage seconds (a failed group has none): ``time/gen_s``
#: sums their generate calls.
_TIMED_GROUPS = ("groups/accepted", "groups/filtered", "groups/stale")


def estimates_from_run(run_dir: str | Path, base: StageEstimates, learn_share: float = 1.0) -> StageEstimates:
    """Stage latencies measured by a run: means over its ``metrics.jsonl`` steps (the first step is
    left out when there are more, it carries warm-up). Fields a run does not measure keep ``base``'s
    values.

    * ``gen_s``: ``time/gen_s`` per group that ended with its seconds (``time/gen_s`` sums the
      groups' generate calls, which run at once: a group's call is the batch's latency);
    * ``learn_s``: ``time/learn_s`` (the optimizer step) / ``learn_share``, the share of the batch
      each learner worker trained in the run (:func:`learner_share` of its config): one worker's
      seconds for the whole batch. ``time/sync_s`` is left out: it is mostly the sync's wait for
      the generation in flight, the model's ``gen_s`` term;
    * ``render_s``: ``render/mean_s``; ``score_s``: ``time/score_s`` / the step's samples.

    A measured field's entry in ``base.ranges`` is dropped (it is no longer a guess).

    Raises:
        FileNotFoundError: the run has no ``metrics.jsonl``.
        ValueError: it has no step records.
    """
    path = Path(run_dir) / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not records:
        raise ValueError(f"{path}: no step records")
    if len(records) > 1:
        records = records[1:]
    def per(record: dict, key: str) -> float:
        if key == "time/gen_s":
            return sum(record.get(k) or 0 for k in _TIMED_GROUPS) or 1
        return learn_share if key == "time/learn_s" else 1

    update: dict[str, float] = {}
    for key, name in _RUN_KEYS.items():
        values = [r[key] / per(r, key) for r in records if isinstance(r.get(key), (int, float)) and r[key] > 0]
        if values:
            update[name] = mean(values)
    score = [r["time/score_s"] / r["samples"] for r in records
             if isinstance(r.get("time/score_s"), (int, float)) and r.get("samples")]
    if score:
        update["score_s"] = mean(score)
    ranges = {k: v for k, v in base.ranges.items() if k not in update}  # measured now: no longer a guess
    return base.model_copy(update={**update, "ranges": ranges})
