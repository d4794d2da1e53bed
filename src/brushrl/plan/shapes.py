"""The same experiment in several cluster shapes, costed side by side (``brushrl plan --compare``).

A shape is a run config (``configs/h200.yaml`` and the configs that extend it). Each is placed
(``brushrl.plan.resources``) and its GPU memory planned (``brushrl.plan.memory``) as ``brushrl
config check`` does; a shape with an error there is refused, with the errors, never costed. The
others get the step model's estimate (``brushrl.plan.timing.estimate_run``) and, where the config
marks guesses with ``resources.estimates.ranges``, the estimate at both ends of the ranges.

*Cheapest* is the fewest billed GPU-hours (every GPU of the nodes that are up, what a cloud bills);
*fastest* the least wall time. Each is chosen at the estimates' values; the ranges say how far the
choice could be off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from brushrl.config import BrushRLConfig, load_config
from brushrl.plan.memory import build_memory_plan
from brushrl.plan.resources import build_plan
from brushrl.plan.timing import Mode, RunEstimate, default_mode, estimate_bounds, estimate_run

#: The shipped shapes of the seeds' experiment, most GPUs first (``brushrl plan --compare`` alone).
SHIPPED_SHAPES = ("configs/h200.yaml", "configs/h200_x4.yaml", "configs/h200_x2.yaml")


@dataclass
class ShapeCost:
    """One shape's placement and cost; ``estimate`` is None when the shape is refused (``errors``)."""

    config: str
    gpus: int
    """GPUs on the nodes that are up (what is billed)."""
    errors: list[str] = field(default_factory=list)
    estimate: RunEstimate | None = None
    bounds: tuple[RunEstimate, RunEstimate] | None = None
    """The estimate with every ranged guess at its low and at its high end; None without ranges."""

    @property
    def billed_h(self) -> float | None:
        """GPU-hours of every GPU of the nodes up, all GPU types together; None when refused."""
        return sum(self.estimate.gpu_hours.values()) if self.estimate else None


def cost_shape(cfg: BrushRLConfig, name: str, steps: int, mode: Mode | None = None) -> ShapeCost:
    """Place ``cfg``, plan its GPU memory and, when both hold, estimate ``steps`` steps of it in
    ``mode`` (default: the trainer's, :func:`brushrl.plan.timing.default_mode`)."""
    plan = build_plan(cfg)
    mem = build_memory_plan(cfg)
    gpus = sum(n.nodes_up * n.gpus for n in plan.nodes)
    errors = plan.errors + mem.errors
    if plan.renderers_placed == 0 and not errors:
        errors.append("no renderer placed")
    if errors:
        return ShapeCost(name, gpus, errors)
    mode = mode or default_mode(cfg)
    return ShapeCost(name, gpus, [], estimate_run(cfg, plan, steps, mode), estimate_bounds(cfg, steps, mode))


def compare_shapes(paths: list[str], steps: int, mode: Mode | None = None,
                   overrides: dict | None = None) -> list[ShapeCost]:
    """:func:`cost_shape` of each config file, in the order given; ``overrides`` (dotted paths) apply
    to every one.

    Raises:
        ConfigError: a config is unreadable or invalid (the message names the file and field).
    """
    return [cost_shape(load_config(Path(p), overrides), p, steps, mode) for p in paths]


def cheapest(costs: list[ShapeCost]) -> ShapeCost | None:
    """The shape with the fewest billed GPU-hours among those that fit; None when none does."""
    placed = [c for c in costs if c.estimate]
    return min(placed, key=lambda c: c.billed_h) if placed else None


def fastest(costs: list[ShapeCost]) -> ShapeCost | None:
    """The shape with the least wall time among those that fit (fewer GPUs first on a tie)."""
    placed = [c for c in costs if c.estimate]
    return min(placed, key=lambda c: (round(c.estimate.wall_s, 6), c.gpus)) if placed else None

