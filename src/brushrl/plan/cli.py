"""``brushrl config check`` and ``brushrl plan``."""

from __future__ import annotations

import argparse
import json
import sys

import yaml
from rich.console import Console
from rich.table import Table

from brushrl.config import BrushRLConfig, ConfigError, load_config, parse_sets
from brushrl.plan.memory import MemoryPlan, build_memory_plan, format_parts
from brushrl.plan.resources import ResourcePlan, build_plan
from brushrl.plan.shapes import SHIPPED_SHAPES, ShapeCost, cheapest, compare_shapes, fastest
from brushrl.plan.timing import (SEEDS_RUN, RunEstimate, default_mode, estimate_bounds, estimate_run, estimates_from_run,
                                 learner_share, seeds_h200_hours)


def _load(path: str, sets: list[str], extra: dict | None = None) -> BrushRLConfig:
    return load_config(path, {**(extra or {}), **parse_sets(sets)})


def _gb(x: float) -> str:
    return f"{x:g} GiB" if x else "-"


def plan_tables(cfg: BrushRLConfig, plan: ResourcePlan) -> list[Table]:
    """Rich tables of a resource plan: actors, node kinds, render capacity vs demand."""
    actors = Table(title="actors", title_justify="left")
    for col in ("actor", "count", "node kind", "CPUs each", "GPUs each", "memory each", "custom resources"):
        actors.add_column(col, justify="right" if col in ("count", "CPUs each", "GPUs each") else "left")
    for a in plan.actors:
        custom = ", ".join(f"{k}={v:g}" for k, v in a.resources.items()) or "-"
        actors.add_row(a.actor, str(a.count), a.node, f"{a.cpus:g}", f"{a.gpus:g}", _gb(a.memory_gb), custom)
    nodes = Table(title="node kinds", title_justify="left")
    for col in ("node kind", "CPUs", "GPUs", "memory", "nodes up / max", "fixed actors", "renderers",
                "renderers / node", "concurrent renders"):
        nodes.add_column(col)
    for n in plan.nodes:
        gpus = f"{n.gpus} {n.gpu_type or ''}".strip() if n.gpus else "-"
        per_node = f"{n.renderers_first} first, {n.renderers_per_node} others" if n.renderers else "-"
        nodes.add_row(n.name, f"{n.cpus:g}", gpus, _gb(n.memory_gb), f"{n.nodes_up} / {n.count}",
                      ", ".join(n.fixed) or "-", str(n.renderers or "-"), per_node,
                      f"{n.concurrent_renders:g}" if n.renderers else "-")
    est = cfg.resources.estimates
    cap = Table(title="render capacity vs learner demand", title_justify="left", show_header=False)
    cap.add_row("render", f"{est.render_s:g} s wall x {est.render_cores:g} cores = {plan.render_core_s:g} core-s a render")
    cap.add_row("capacity", f"{plan.render_capacity_per_min:.1f} renders/min "
                            f"({plan.renderers_placed} renderers, {plan.concurrent_renders:g} rendering at once)")
    cap.add_row("demand", f"{plan.learner_demand_per_min:.1f} renders/min = {cfg.rollout.groups_per_step} groups x "
                          f"G={cfg.rollout.group_size} x static pass {est.static_pass:g} every "
                          f"{est.gen_s + est.learn_s:g} s (gen {est.gen_s:g} + learn {est.learn_s:g})")
    return [actors, nodes, cap]


def memory_tables(mem: MemoryPlan) -> list[Table]:
    """Rich tables of a GPU-memory plan: each GPU actor's estimate by part, then each GPU's load."""
    if not mem.estimates and not mem.gpus:
        return []
    est = Table(title="GPU memory per actor (GiB per GPU; derived from the model's architecture)",
                title_justify="left")
    for col in ("actor", "model", "derived", "parts", "vLLM share", "typed", "holds"):
        est.add_column(col, justify="right" if col in ("derived", "vLLM share", "typed", "holds") else "left")
    for e in mem.estimates:
        parts = ", ".join(format_parts(e.parts))
        est.add_row(e.component, f"{e.model} ({e.note})" if e.note else e.model, f"{e.derived_gib:.1f}", parts,
                    f"{e.reserved_gib:.1f}" if e.reserved_gib else "-",
                    f"{e.typed_gib:.1f}" if e.typed_gib else "-", f"{e.used_gib:.1f}")
    gpus = Table(title="GPUs (first node of each kind, Ray's assignment)", title_justify="left")
    for col in ("GPU", "type", "actors (Ray GPU share: GiB)", "used", "free", "of"):
        gpus.add_column(col, justify="right" if col in ("used", "free", "of") else "left")
    for g in mem.gpus:
        actors = ", ".join(f"{u.component} ({u.share:g}: {u.gib:.1f})" for u in g.uses) or "-"
        gpus.add_row(g.label, g.gpu_type or "-", actors, f"{g.used_gib:.1f}", f"{g.total_gib - g.used_gib:.1f}",
                     f"{g.total_gib:.1f}")
    return [est, gpus]


def _problems(console: Console, plan: ResourcePlan, mem: MemoryPlan | None = None) -> None:
    errors = plan.errors + (mem.errors if mem else [])
    warnings = plan.warnings + (mem.warnings if mem else [])
    for e in errors:
        console.print(f"[bold red]error[/]: {e}")
    for w in warnings:
        console.print(f"[bold yellow]warning[/]: {w}")
    if not errors and not warnings:
        gpu = "; every GPU holds the memory of what lands on it" if mem and mem.gpus else ""
        console.print(f"[green]ok[/]: every actor fits{gpu} and the renderers keep up with the learner")


def _weights(console: Console, cfg: BrushRLConfig) -> None:
    """Each model the config names with its local path and state (``brushrl.hub.weights``): local
    files only, no network, so planning without the weights works; a config that names no hub
    model (the tiny CPU policy) prints nothing."""
    from brushrl.hub.cli import weights_table
    from brushrl.hub.weights import models_of, ref_status

    refs = models_of(cfg)
    if not refs:
        return
    wdir = cfg.weights.dir
    rows = [(ref, ref_status(ref, wdir), "", "") for ref in refs]
    console.print(weights_table(rows, sizes=False,
                                title=f"model weights (weights.dir: {wdir or 'not set'}; complete ones load offline)"))


def _kernels(console: Console, cfg: BrushRLConfig) -> None:
    """Which linear-attention kernels the policy's layers get in this env (``brushrl.learner.kernels``;
    the learner's own env prints its lines at start); nothing for a model without such layers."""
    from brushrl.learner.kernels import kernel_lines
    from brushrl.plan.models import model_type

    for line in kernel_lines(model_type(cfg.policy.model) or ""):
        console.print(line, markup=False, highlight=False)


def run_check(args: argparse.Namespace) -> int:
    """``brushrl config check``: 0 ok, 1 plan errors (or warnings with ``--strict``), 2 bad config."""
    console = Console(file=sys.stdout, width=args.width)
    try:
        cfg = _load(args.file, args.set)
    except ConfigError as exc:
        print(exc)
        return 2
    plan = build_plan(cfg)
    mem = build_memory_plan(cfg)
    if not args.plan_only:
        console.rule(f"resolved config: {args.file}")
        console.print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), markup=False, highlight=False)
    console.rule("resource plan")
    for table in plan_tables(cfg, plan) + memory_tables(mem):
        console.print(table)
    from brushrl.artifacts.trackers import tracker_problems

    plan.errors.extend(tracker_problems(cfg))  # logging.trackers: a missing package or MLflow address
    _problems(console, plan, mem)
    _weights(console, cfg)
    _kernels(console, cfg)
    errors, warnings = plan.errors + mem.errors, plan.warnings + mem.warnings
    return 1 if errors or (args.strict and warnings) else 0


#: What each term of ``brushrl.plan.timing.step_seconds`` means, for the ``step`` row.
_BOUND = {"pipeline": "the pipeline: (gen + render + score + learn) / (max_staleness + 1)",
          "learn": "the learner: learn",
          "gen": "generation: each weight sync waits for the batch generating (with rollout.partial_rollouts: "
                 "the engines' calls, gen / batches a call)",
          "render": "render throughput: renders x render_s / concurrent", "score": "scoring: renders x score_s"}


def _span(low: float, high: float) -> str:
    return f"{low:.1f}-{high:.1f}"


def estimate_table(est: RunEstimate, samples_per_step: int | None = None,
                   bounds: tuple[RunEstimate, RunEstimate] | None = None) -> Table:
    """A rich table of a run estimate; with ``samples_per_step``, the seeds' reproduction's
    H200-hours for as many samples beside it (``brushrl.plan.timing.SEEDS_RUN``); with ``bounds``
    (:func:`brushrl.plan.timing.estimate_bounds`), the range the guesses' ranges imply."""
    t = Table(title=f"{est.steps} steps, {est.mode} pipeline", title_justify="left", show_header=False)
    stages = ", ".join(f"{k} {v:.0f} s" for k, v in est.stage_s.items())
    low, high = bounds or (None, None)
    t.add_row("step", f"{est.step_s:.0f} s ({est.step_s / 60:.1f} min), set by {_BOUND[est.bound]}"
              + (f"; {low.step_s:.0f}-{high.step_s:.0f} s over the estimates' ranges" if bounds else ""))
    t.add_row("one batch", f"{stages}; rendering {100 * est.render_share:.0f}%")
    t.add_row("wall time", f"{est.wall_h:.1f} h" + (f" ({_span(low.wall_h, high.wall_h)} h)" if bounds else ""))
    for gpu, hours in est.gpu_hours.items():
        span = f", {_span(low.gpu_hours[gpu], high.gpu_hours[gpu])} over the ranges" if bounds else ""
        t.add_row(f"{gpu} GPU-hours", f"{hours:.1f} (every GPU of the nodes up{span})")
    t.add_row("GPU-hours reserved", f"{est.gpu_hours_reserved:.1f} (what the actors ask for)")
    for node, hours in est.node_hours.items():
        t.add_row(f"{node} node-hours", f"{hours:.1f}")
    if samples_per_step:
        seeds = seeds_h200_hours(est.steps, samples_per_step)
        t.add_row("seeds' reproduction", f"{seeds:.1f} H200-hours for {est.steps} steps of {samples_per_step} samples "
                  f"(its 110 steps of {SEEDS_RUN['samples_per_step']}: {SEEDS_RUN['h200_hours']:g} h on one H200)")
    return t


def compare_table(costs: list[ShapeCost]) -> Table:
    """A rich table of shapes side by side (``brushrl.plan.shapes``): GPUs billed, the step and what
    sets it, wall hours and billed GPU-hours with the ranges' span, or why a shape is refused."""
    first = next((c.estimate for c in costs if c.estimate), None)
    title = f"{first.steps} steps in each shape" if first else "shapes"
    t = Table(title=title, title_justify="left")
    for col in ("config", "GPUs billed", "step", "wall h", "billed GPU-h", "over the ranges (wall h; GPU-h)"):
        t.add_column(col, justify="left" if col in ("config", "over the ranges (wall h; GPU-h)", "step") else "right")
    for c in costs:
        if not c.estimate:
            t.add_row(c.config, str(c.gpus), "refused: " + "; ".join(c.errors), "-", "-", "-")
            continue
        e = c.estimate
        span = "-"
        if c.bounds:
            low, high = c.bounds
            span = f"{_span(low.wall_h, high.wall_h)}; {_span(sum(low.gpu_hours.values()), sum(high.gpu_hours.values()))}"
        t.add_row(c.config, str(c.gpus), f"{e.step_s:.0f} s ({e.bound})", f"{e.wall_h:.1f}", f"{c.billed_h:.1f}", span)
    return t


def run_compare(args: argparse.Namespace, console: Console) -> int:
    """``brushrl plan --compare``: 0 at least one shape fits, 1 none does, 2 a bad config."""
    paths = args.compare or list(SHIPPED_SHAPES)
    try:
        overrides = parse_sets(args.set)
        costs = compare_shapes(paths, args.steps or load_config(paths[0], overrides).run.steps, args.mode, overrides)
    except ConfigError as exc:
        print(exc)
        return 2
    best, quick = cheapest(costs), fastest(costs)
    if args.json:
        print(json.dumps({"shapes": [{"config": c.config, "gpus": c.gpus, "errors": c.errors,
                                      "step_s": c.estimate.step_s if c.estimate else None,
                                      "bound": c.estimate.bound if c.estimate else None,
                                      "wall_h": c.estimate.wall_h if c.estimate else None,
                                      "billed_gpu_hours": c.billed_h,
                                      "range": ({"wall_h": [b.wall_h for b in c.bounds],
                                                 "billed_gpu_hours": [sum(b.gpu_hours.values()) for b in c.bounds]}
                                                if c.bounds else None)} for c in costs],
                          "cheapest": best.config if best else None, "fastest": quick.config if quick else None}))
        return 0 if best else 1
    console.print(compare_table(costs))
    if not best:
        console.print("[bold red]error[/]: no shape fits")
        return 1
    span = ""
    if best.bounds:
        span = f" ({_span(*(sum(b.gpu_hours.values()) for b in best.bounds))} over the estimates' ranges)"
    console.print(f"cheapest: {best.config}, {best.billed_h:.1f} GPU-hours billed{span}, {best.gpus} GPUs",
                  markup=False, highlight=False)
    span = f" ({_span(*(b.wall_h for b in quick.bounds))} h over the ranges)" if quick.bounds else ""
    console.print(f"fastest: {quick.config}, {quick.estimate.wall_h:.1f} h of wall time{span}, {quick.gpus} GPUs",
                  markup=False, highlight=False)
    return 0


def run_plan(args: argparse.Namespace) -> int:
    """``brushrl plan``: 0 ok, 1 unplaceable, 2 bad config or run directory."""
    console = Console(file=sys.stdout, width=args.width)
    if args.compare is not None:
        return run_compare(args, console)
    extra = {}
    for flag, key in (("render_s", "resources.estimates.render_s"), ("gen_s", "resources.estimates.gen_s"),
                      ("learn_s", "resources.estimates.learn_s"), ("score_s", "resources.estimates.score_s"),
                      ("renderers", "render.num_actors")):
        if getattr(args, flag) is not None:
            extra[key] = getattr(args, flag)
    try:
        cfg = _load(args.config, args.set, extra)
        given = {key.rpartition(".")[2] for key in extra}  # a value on the command line is no guess
        est = cfg.resources.estimates
        if given & set(est.ranges):
            est = est.model_copy(update={"ranges": {k: v for k, v in est.ranges.items() if k not in given}})
            cfg = cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"estimates": est})})
        if args.from_run:
            measured = estimates_from_run(args.from_run, cfg.resources.estimates, learner_share(cfg))
            cfg = cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"estimates": measured})})
    except (ConfigError, OSError, ValueError) as exc:
        print(exc)
        return 2
    plan = build_plan(cfg)
    if plan.errors or plan.renderers_placed == 0:
        _problems(console, plan)
        return 1
    steps = args.steps or cfg.run.steps
    mode = args.mode or default_mode(cfg)
    est = estimate_run(cfg, plan, steps, mode)
    bounds = estimate_bounds(cfg, steps, mode)
    if args.json:
        print(json.dumps({"steps": steps, "mode": est.mode, "max_staleness": est.staleness, "bound": est.bound,
                          "step_s": est.step_s, "stage_s": est.stage_s,
                          "wall_h": est.wall_h, "gpu_hours": est.gpu_hours,
                          "gpu_hours_reserved": est.gpu_hours_reserved, "node_hours": est.node_hours,
                          **({"range": {"step_s": [b.step_s for b in bounds], "wall_h": [b.wall_h for b in bounds],
                                        "gpu_hours": {k: [b.gpu_hours[k] for b in bounds] for k in est.gpu_hours}}}
                             if bounds else {}),
                          "seeds_h200_hours": seeds_h200_hours(steps, cfg.rollout.groups_per_step * cfg.rollout.group_size),
                          "estimates": cfg.resources.estimates.model_dump()}))
        return 0
    e = cfg.resources.estimates
    console.print(f"stage latencies{' (measured: ' + args.from_run + ')' if args.from_run else ''}: "
                  f"gen {e.gen_s:g} s/step, render {e.render_s:g} s, score {e.score_s:g} s/sample, "
                  f"learn {e.learn_s:g} s/step, startup {e.startup_s:g} s")
    why = "--mode" if args.mode else f"orchestrator.max_staleness {cfg.orchestrator.max_staleness}; --mode overrides"
    workers = cfg.learner.workers if cfg.learner.strategy == "deepspeed" else 1
    console.print(f"pipeline: {est.mode} ({why}), modelled with max_staleness {est.staleness}; learn "
                  f"{est.stage_s['learn']:g} s a step = learn_s x {learner_share(cfg):g} ({workers} learner worker(s))")
    console.print(estimate_table(est, cfg.rollout.groups_per_step * cfg.rollout.group_size, bounds))
    for w in plan.warnings:
        console.print(f"[bold yellow]warning[/]: {w}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("config", help="check a run config and print its resource plan",
                       description="Config tools.")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    c = csub.add_parser(
        "check",
        help="print the resolved config, its resource and GPU-memory plan; fail when a GPU is over-subscribed "
             "or above resources.gpu_memory_refuse",
        description="Validate FILE, print it with every default filled in, then the resource plan: which "
        "actor runs on which node kind and what it reserves (CPUs, GPUs, memory, custom resources), how "
        "many renderers fit per node, and the render capacity (renders/min, from resources.estimates: "
        "render_s x render_cores core-seconds a render) against the learner's demand (groups_per_step x "
        "G x static_pass renders every gen_s + learn_s seconds); then the GPU memory of every GPU actor "
        "(learner, vLLM rollout engine, judge servers, HPSv3), derived from its model's architecture "
        "(brushrl.plan.memory), and each GPU's load as Ray would assign them. Exit codes: 0 ok, 1 the "
        "plan has errors (a GPU over-subscribed or planned above resources.gpu_memory_refuse of its memory, "
        "a vLLM gpu_memory_utilization above it, an actor that does not fit; or warnings with --strict, "
        "e.g. a GPU above resources.gpu_memory_warn), "
        "2 the config is invalid.",
    )
    c.add_argument("file", help="YAML run config, e.g. configs/h200.yaml")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field by dotted path (repeatable), e.g. --set render.num_actors=8")
    c.add_argument("--plan-only", action="store_true", help="print only the resource plan")
    c.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    c.add_argument("--width", type=int, default=120, help="output width in characters (default: %(default)s)")
    c.set_defaults(func=run_check)

    q = sub.add_parser(
        "plan",
        help="estimate wall time and GPU-hours of a run from stage latencies",
        description="Estimate the wall time and GPU-hours of STEPS learner steps of a config on its cluster "
        "shape (resources.nodes) from stage latencies (resources.estimates, the flags below, or a previous "
        "run's metrics.jsonl with --from-run). The model and its assumptions: docs/plan.md.",
    )
    q.add_argument("--config", default="configs/local.yaml", help="YAML run config (default: %(default)s)")
    q.add_argument("--steps", type=int, help="learner steps (default: run.steps)")
    q.add_argument("--mode", choices=["sync", "async"], default=None,
                   help="sync: stages one after another (the trainer with orchestrator.max_staleness 0); "
                        "async: batches overlap within the staleness bound (max_staleness >= 1; at least 1). "
                        "Default: the config's trainer mode, async when orchestrator.max_staleness >= 1, "
                        "else sync"),
    q.add_argument("--from-run", metavar="RUN_DIR", help="take stage latencies measured by a run (runs/X)")
    q.add_argument("--render-s", type=float, help="wall seconds of one render")
    q.add_argument("--gen-s", type=float, help="generation seconds a step")
    q.add_argument("--learn-s", type=float, help="one learner worker's optimizer step over the whole batch, seconds")
    q.add_argument("--score-s", type=float, help="scoring seconds a sample")
    q.add_argument("--renderers", type=int, help="renderer actors (render.num_actors)")
    q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field by dotted path (repeatable)")
    q.add_argument("--compare", nargs="*", metavar="CONFIG", default=None,
                   help="cost the same experiment in several cluster shapes (config files; none given: the "
                        f"shipped ones, {', '.join(SHIPPED_SHAPES)}): each placed and its GPU memory planned "
                        "as `config check` does (a shape that does not fit is refused, with why), then wall "
                        "hours and billed GPU-hours at the estimates and over their ranges; names the "
                        "cheapest and the fastest. --config and the stage flags are ignored; --set applies to each")
    q.add_argument("--json", action="store_true", help="print the estimate as one JSON object")
    q.add_argument("--width", type=int, default=120, help="output width in characters (default: %(default)s)")
    q.set_defaults(func=run_plan)
