"""Wall time and GPU-hours of a run of S steps on a cluster shape, from stage latencies.

The model and its assumptions are written up in docs/plan.md. In short, with
``R = groups_per_step * G * static_pass`` renders a step, ``n`` renderers placed and ``c`` concurrent
renders (``ResourcePlan.concurrent_renders``, at most ``n``):

* ``sync`` (the trainer with ``orchestrator.max_staleness: 0``: generate, then render, then score,
  then learn)::

      render phase = ceil(R / n) * render_s * max(1, n / c)
      step_s       = gen_s + render phase + R * score_s + learn_s

* ``async`` (``max_staleness >= 1``, the shipped GPU configs: renders and scoring overlap
  generation and learning)::

      step_s = max(gen_s + learn_s, R * render_s / c, R * score_s)

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
from brushrl.plan.resources import ResourcePlan

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


@dataclass
class RunEstimate:
    """Estimated time and cost of a run. Seconds are wall-clock seconds; hours are node/GPU hours."""

    steps: int
    mode: str
    step_s: float
    """Wall seconds of one learner step."""
    stage_s: dict[str, float]
    """Seconds each stage contributes to one step (``gen``, ``render``, ``score``, ``learn``)."""
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

    @property
    def wall_h(self) -> float:
        return self.wall_s / 3600.0


def step_seconds(est: StageEstimates, renders: float, renderers: int, concurrent: float,
                 mode: Mode = "sync") -> tuple[float, dict[str, float]]:
    """Seconds of one learner step and each stage's share of it (see the module docstring).

    Args:
        est: stage latencies.
        renders: renders a step (``groups_per_step * G * static_pass``; may be fractional).
        renderers: renderer actors placed (>= 1).
        concurrent: renders that run at once (``<= renderers``; fewer when cores are short).
        mode: ``sync`` or ``async``.

    Raises:
        ValueError: no renderer, or an unknown mode.
    """
    if renderers < 1 or concurrent <= 0:
        raise ValueError("no renderer placed: the run cannot render")
    if mode == "sync":
        render = math.ceil(renders / renderers - 1e-9) * est.render_s * max(1.0, renderers / concurrent)
        stages = {"gen": est.gen_s, "render": render, "score": renders * est.score_s, "learn": est.learn_s}
        return sum(stages.values()), stages
    if mode == "async":
        stages = {"gen": est.gen_s, "render": renders * est.render_s / concurrent,
                  "score": renders * est.score_s, "learn": est.learn_s}
        return max(est.gen_s + est.learn_s, stages["render"], stages["score"]), stages
    raise ValueError(f"unknown mode {mode!r} (sync or async)")


def estimate_run(cfg: BrushRLConfig, plan: ResourcePlan, steps: int, mode: Mode = "sync") -> RunEstimate:
    """Estimate wall time and GPU-hours of ``steps`` learner steps of ``cfg`` placed as ``plan``."""
    est = cfg.resources.estimates
    step_s, stages = step_seconds(est, plan.renders_per_step, plan.renderers_placed, plan.concurrent_renders, mode)
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
                       gpu_hours, reserved, node_hours)


#: metrics.jsonl key -> StageEstimates field, per step (``render/mean_s`` is per render).
_RUN_KEYS = {"time/gen_s": "gen_s", "time/learn_s": "learn_s", "render/mean_s": "render_s"}


def estimates_from_run(run_dir: str | Path, base: StageEstimates) -> StageEstimates:
    """Stage latencies measured by a run: means over its ``metrics.jsonl`` steps (the first step is
    left out when there are more, it carries warm-up). ``score_s`` is the scoring phase's wall
    seconds divided by the step's samples. Fields a run does not measure keep ``base``'s values.

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
    update: dict[str, float] = {}
    for key, name in _RUN_KEYS.items():
        values = [r[key] for r in records if isinstance(r.get(key), (int, float)) and r[key] > 0]
        if values:
            update[name] = mean(values)
    score = [r["time/score_s"] / r["samples"] for r in records
             if isinstance(r.get("time/score_s"), (int, float)) and r.get("samples")]
    if score:
        update["score_s"] = mean(score)
    return base.model_copy(update=update)
