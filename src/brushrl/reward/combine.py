"""Weighted combination of reward components, with the gate and None semantics."""

from __future__ import annotations

from dataclasses import dataclass, field

from brushrl.types import GateVerdict


@dataclass
class RewardBreakdown:
    """Every component's raw value, the total, and the reason for a None total.

    Attributes:
        components: component name -> value in [0, 1] (None: that scorer could not score).
        total: ``sum(weights[c] * components[c])`` for a gated sample, 0.0 for a gate failure,
            None for an infrastructure failure.
        none_cause: why ``total`` is None (``render_infra``, ``<scorer>:scorer_timeout``,
            ``<scorer>:scorer_error:<Type>``, ``<scorer>:<cause>`` joined by commas), else None.
    """

    components: dict[str, float | None] = field(default_factory=dict)
    total: float | None = None
    none_cause: str | None = None


def combine(
    gate: GateVerdict | None,
    components: dict[str, float | None],
    weights: dict[str, float],
    none_cause: str | None = None,
) -> RewardBreakdown:
    """Combine reward components into a sample's total reward.

    Args:
        gate: the final gate verdict (runtime if rendered, else static); None when the render
            failed for infrastructure reasons, so no verdict could be reached.
        components: values of the non-gate components (``length``, scorers); a None value means
            the scorer failed for that sample.
        weights: component -> weight (``reward.weights``); the ``gate`` component is 1 for a passed
            gate. Components without a weight are recorded but do not count.
        none_cause: the cause to record when the total is None because of ``gate is None``.

    Returns:
        ``total`` 0.0 when the gate failed (the seeds give no compile credit to a failing sketch);
        None when ``gate`` is None or any weighted scorer is None; else the weighted sum.
    """
    if gate is None:
        return RewardBreakdown(dict(components), None, none_cause or "render_infra")
    if not gate.passed:
        zeroed = {name: 0.0 for name in weights}
        return RewardBreakdown(zeroed, 0.0, None)
    values = {"gate": 1.0, **components}
    missing = [name for name, w in weights.items() if w and values.get(name) is None]
    if missing:
        cause = none_cause or f"scorer_error:{','.join(sorted(missing))}"
        return RewardBreakdown(values, None, cause)
    total = sum(w * float(values[name]) for name, w in weights.items())
    return RewardBreakdown(values, total, None)
