"""The resource plan of a config: which actor on which node kind, what each reserves, how many
renderers fit per node, the render capacity against the learner's demand.

Model (documented in docs/plan.md):

* The learner, rollout and scorer actors ("fixed" actors) sit on the first node of their kind.
* Renderers fill the free room of their kind's nodes: per node, the smallest of
  ``free CPUs / render.num_cpus``, ``free GPUs / num_gpus``, ``free memory / memory_gb`` and
  ``advertised custom resource / asked`` for each custom resource the renderer asks for.
* Concurrent renders on a node: ``min(renderers there, free CPUs there / estimates.render_cores)``
  (a render keeps ``render_cores`` cores busy, whatever logical CPUs its actor reserved).
* Render capacity, renders/min: ``60 * sum(concurrent renders) / estimates.render_s``.
* Learner demand, renders/min: ``60 * groups_per_step * G * static_pass / (gen_s + learn_s)``: the
  rate at which a learner that never waits would consume renders. Capacity below demand means the
  learner waits on renders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from brushrl.config import SCORER_NUM_CPUS, ActorPlacement, BrushRLConfig

#: Tolerance of float comparisons of resource amounts.
_EPS = 1e-9


@dataclass
class ActorRow:
    """One kind of actor in the plan: ``count`` actors of ``cpus``/``gpus``/``memory_gb`` each."""

    actor: str
    node: str
    count: int
    cpus: float
    gpus: float
    memory_gb: float
    resources: dict[str, float]


@dataclass
class NodeRow:
    """One node kind: nodes it would run and how many renderers one node holds.

    ``renderers_per_node`` is for a node without fixed actors; ``renderers_first`` for the first node,
    which hosts the fixed actors of this kind. ``nodes_up`` = max(always-up nodes, nodes needed)."""

    name: str
    cpus: float
    gpus: int
    gpu_type: str | None
    memory_gb: float
    count: int
    nodes_up: int = 0
    renderers: int = 0
    renderers_first: int = 0
    renderers_per_node: int = 0
    concurrent_renders: float = 0.0
    fixed: list[str] = field(default_factory=list)


@dataclass
class ResourcePlan:
    """The plan of one config; ``errors`` make a config unrunnable, ``warnings`` slow it down."""

    actors: list[ActorRow]
    nodes: list[NodeRow]
    renderers_placed: int
    render_capacity_per_min: float
    """Renders per minute the placed renderers deliver."""
    renders_per_step: float
    """``groups_per_step * G * static_pass``."""
    learner_demand_per_min: float
    """Renders per minute a learner that never waits would consume."""
    render_core_s: float
    """CPU core-seconds of one render (``render_s * render_cores``)."""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def concurrent_renders(self) -> float:
        return sum(n.concurrent_renders for n in self.nodes)


def _fits(avail: dict[str, float], ask: dict[str, float]) -> int:
    """How many times ``ask`` fits into ``avail`` (keys missing from ``avail`` are 0); ``ask``
    entries of 0 do not constrain. Returns a large number when nothing constrains."""
    n = 10**9
    for key, need in ask.items():
        if need > 0:
            n = min(n, int(math.floor(avail.get(key, 0.0) / need + _EPS)))
    return max(n, 0)


def _ask(cpus: float, p: ActorPlacement) -> dict[str, float]:
    return {"CPU": cpus, "GPU": p.num_gpus, "memory_gb": p.memory_gb, **p.resources}


def build_plan(cfg: BrushRLConfig) -> ResourcePlan:
    """Place the actors of ``cfg`` on ``cfg.resources.nodes`` and compare render capacity with the
    learner's demand (see the module docstring for the model). Never raises for an unplaceable
    config: the problems are in ``errors``."""
    res, est = cfg.resources, cfg.resources.estimates
    fixed = [_row("learner", res.learner, cfg.learner.num_cpus, cfg.learner.workers),  # resources.learner: per worker
             _row("rollout", res.rollout, cfg.rollout.num_cpus, cfg.rollout.replicas)]  # per replica
    fixed += [_row(actor, getattr(res, actor), cpus, count) for actor, cpus, count in reward_actor_asks(cfg)]
    rend = res.renderer
    renderer_row = ActorRow("renderer", rend.node, cfg.render.num_actors, cfg.render.num_cpus, rend.num_gpus,
                            rend.memory_gb, dict(rend.resources))
    errors: list[str] = []
    warnings: list[str] = []
    nodes: list[NodeRow] = []
    for name, kind in res.nodes.items():
        row = NodeRow(name, kind.cpus, kind.gpus, kind.gpu_type, kind.memory_gb, kind.count)
        total = {"CPU": kind.cpus, "GPU": float(kind.gpus), "memory_gb": kind.memory_gb, **kind.resources}
        free = dict(total)
        here = [a for a in fixed if a.node == name]
        for a in here:
            ask = _ask(a.cpus, getattr(res, a.actor))
            for key, one in ask.items():
                need = one * a.count
                if need > 0 and free.get(key, 0.0) + _EPS < need:
                    what = f"{a.count} x {key}={one:g}" if a.count > 1 else f"{key}={need:g}"
                    errors.append(
                        f"resources.{a.actor}: does not fit on a {name} node: needs {what}, "
                        f"{max(free.get(key, 0.0), 0.0):g} of the node's {total.get(key, 0.0):g} left"
                    )
                free[key] = free.get(key, 0.0) - need
            row.fixed.append(a.actor if a.count == 1 else f"{a.count} {a.actor}")
        needed = 1 if here else 0
        if rend.node == name:
            ask = _ask(cfg.render.num_cpus, rend)
            row.renderers_first = _fits(free, ask)
            row.renderers_per_node = _fits(total, ask)
            left = cfg.render.num_actors
            for i in range(kind.count):  # fill nodes one by one; the first also hosts the fixed actors
                room, cores = (row.renderers_first, free["CPU"]) if i == 0 else (row.renderers_per_node, total["CPU"])
                put = min(left, room)
                if left <= 0:
                    break
                if put <= 0:
                    continue
                left -= put
                row.renderers += put
                row.concurrent_renders += min(put, max(cores, 0.0) / est.render_cores)
                needed = max(needed, i + 1)
        floor = kind.count if kind.min_count is None else kind.min_count
        row.nodes_up = min(kind.count, max(floor, needed))
        nodes.append(row)

    placed = sum(n.renderers for n in nodes)
    if placed == 0:
        errors.append(f"no renderer fits on a {rend.node} node (render.num_cpus={cfg.render.num_cpus:g}, "
                      f"resources.renderer={_ask(cfg.render.num_cpus, rend)})")
    elif placed < cfg.render.num_actors:
        warnings.append(f"only {placed} of render.num_actors={cfg.render.num_actors} renderers fit on "
                        f"{res.nodes[rend.node].count} {rend.node} node(s); the rest would stay pending")
    capacity = 60.0 * sum(n.concurrent_renders for n in nodes) / est.render_s
    renders_per_step = cfg.rollout.groups_per_step * cfg.rollout.group_size * est.static_pass
    busy = est.gen_s + est.learn_s
    demand = 60.0 * renders_per_step / busy if busy > 0 else math.inf
    if capacity + _EPS < demand:
        per_renderer = capacity / placed if placed else 0.0
        more = math.ceil((demand - capacity) / per_renderer) if per_renderer > 0 else None
        hint = f"; about {more} more renderer(s) would keep up" if more else ""
        warnings.append(
            f"the learner would wait on renders: capacity {capacity:.1f} renders/min < demand "
            f"{demand:.1f} renders/min ({renders_per_step:g} renders a step every {busy:g} s of generation "
            f"+ learning){hint}"
        )
    return ResourcePlan(fixed + [renderer_row], nodes, placed, capacity, renders_per_step, demand,
                        est.render_s * est.render_cores, errors, warnings)


def _row(actor: str, p: ActorPlacement, cpus: float, count: int = 1) -> ActorRow:
    return ActorRow(actor, p.node, count, cpus, p.num_gpus, p.memory_gb, dict(p.resources))


def reward_actor_asks(cfg: BrushRLConfig) -> list[tuple[str, float, int]]:
    """The reward side's actors as ``(resources field, CPUs each, count)``, as
    ``brushrl.reward.actor.start_reward_actors`` starts them: the pool scorer and the judge's client
    on ``resources.scorer``; the judge servers (``reward.judge.serve.replicas``) or the in-process
    judge on ``resources.judge``; HPSv3 on ``resources.hpsv3``; the critic of multi-turn revision
    (``rollout.turns`` > 1) on ``resources.scorer``, with the judge servers for the judge critic."""
    rew, out = cfg.reward, []
    critic = cfg.rollout.turns > 1
    if rew.pool_components:  # one pool scorer actor for pool_similarity, subject and novelty
        out.append(("scorer", SCORER_NUM_CPUS, 1))
    if critic:
        out.append(("scorer", SCORER_NUM_CPUS, 1))
        if rew.critic.kind == "judge" and "judge" not in rew.scorers and rew.judge.serve is not None:
            out.append(("judge", rew.judge.serve.num_cpus, rew.judge.serve.replicas))
    if "judge" in rew.scorers:
        if rew.judge.serve is not None:
            out.append(("judge", rew.judge.serve.num_cpus, rew.judge.serve.replicas))
        if rew.judge.backend == "transformers":
            out.append(("judge", SCORER_NUM_CPUS, 1))
        else:
            out.append(("scorer", SCORER_NUM_CPUS, 1))  # the judge's HTTP client
    if "hpsv3" in rew.scorers:
        out.append(("hpsv3", rew.hpsv3.num_cpus, 1))
    merged: dict[tuple[str, float], int] = {}
    for actor, cpus, count in out:
        merged[(actor, cpus)] = merged.get((actor, cpus), 0) + count
    return [(actor, cpus, count) for (actor, cpus), count in merged.items()]
