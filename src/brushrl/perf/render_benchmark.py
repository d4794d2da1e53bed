"""Render-farm benchmark: ``brushrl bench render`` and ``rayjobs/render_bench.py``.

Renders the fixed sketch set (``brushrl.render.bench_sketches``: 15 corpus bases + 5 heavy
sketches, 600x600) ``--repeats`` times each with one seed through a ``RenderPool`` of 1, 2 and N
actors (``--actors 1,2,4``), after one warm-up render per actor, with the render cache off. For
each actor count it reports:

* p50 / p95 wall seconds per render (``RenderResult.wall_s``, timed in the actor around the render:
  page, p5 load, sketch, capture, PNG decode; Ray's dispatch is in renders/min only), p50 in-page
  drawing seconds (``draw_s``: setup + first frame); quantiles interpolate linearly
  (``brushrl.stats.quantile``, numpy's default);
* overhead share: sum(wall - draw) / sum(wall) (page, p5 load, capture, PNG decode), and the fixed
  cost per render: p50 of wall - draw, seconds;
* p50 seconds per phase (``RenderResult.phases``: page, load, sketch, close, decode), where the
  overhead goes;
* CPU core-seconds per render: user + system time of all the actor's Chromium processes
  (``brushrl.render.procs``), mean and p50;
* renders per minute (renders / batch wall time) and peak memory per actor (largest summed RSS of
  an actor's Chromium processes during a render, MiB);

and, over all renders of all actor counts, determinism per sketch: share of pixels that differ
from the sketch's first render, largest channel difference, largest paint-fraction difference, and
the largest change of the CPU reward proxy (``brushrl.reward.pool_scorer.similarity`` to a fixed
reference: the first render of the first sketch; range [0, 1]).

Prints tables (rich) and writes everything, per-render rows included, to ``--out`` (JSON).
Numbers are only comparable on a quiet machine; ``--sketches`` / ``--repeats`` make a quick run.
"""
# In brushrl.perf, not brushrl.render: the determinism columns score renders with the reward proxy,
# and reward sits above render (docs/architecture.md). The docstring above is the command's --help.

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from brushrl.config import BrushRLConfig, ConfigError, RenderConfig, load_config
from brushrl.stats import quantile
from brushrl.types import RenderResult


#: ``RenderResult.phases`` keys, in page order.
PHASES = ("page", "load", "sketch", "close", "decode")
#: More phases of a ``render.mode: replay`` render (record page above, then these).
REPLAY_PHASES = ("validate", "replay_page", "replay_load", "replay_sketch", "replay_close")


def summarise(results: list[RenderResult], batch_s: float) -> dict:
    """Figures of one batch of renders (see the module docstring); times in s, memory in MiB."""
    ok = [r for r in results if r.status == "ok"]
    walls, draws = [r.wall_s for r in ok], [r.draw_s for r in ok]
    cpus = [r.cpu_s for r in ok]
    per_actor: dict[str, float] = {}
    for r in results:
        per_actor[r.actor_id] = max(per_actor.get(r.actor_id, 0.0), r.peak_rss_mb)
    return {
        "renders": len(results),
        "ok": len(ok),
        "statuses": {s: sum(r.status == s for r in results) for s in sorted({r.status for r in results})},
        "wall_p50_s": quantile(walls, 0.5),
        "wall_p95_s": quantile(walls, 0.95),
        "draw_p50_s": quantile(draws, 0.5),
        "overhead_share": (sum(walls) - sum(draws)) / sum(walls) if walls else 0.0,
        "fixed_p50_s": quantile([w - d for w, d in zip(walls, draws)], 0.5),
        "cpu_s_mean": statistics.fmean(cpus) if cpus else 0.0,
        "cpu_s_p50": quantile(cpus, 0.5),
        "renders_per_min": 60 * len(results) / batch_s if batch_s else 0.0,
        "batch_s": batch_s,
        "peak_rss_mb_per_actor": max(per_actor.values(), default=0.0),
        "actors_seen": len(per_actor),
        "phase_p50_s": {ph: quantile([r.phases[ph] for r in ok if ph in r.phases], 0.5)
                        for ph in (*PHASES, *(REPLAY_PHASES if any("validate" in r.phases for r in ok) else ()))},
    }


class Determinism:
    """Collects each sketch's renders and measures how far repeats drift from the first one."""

    def __init__(self) -> None:
        self._first: dict[str, RenderResult] = {}
        self._ref = None  # features of the fixed reward reference
        self.rows: dict[str, dict] = {}

    def add(self, name: str, result: RenderResult) -> None:
        """Compare ``result`` (an ``ok`` render of sketch ``name``) with the sketch's first render."""
        from brushrl.render.bench import pixel_diff
        from brushrl.reward.pool_scorer import image_features, similarity

        if result.status != "ok" or result.png is None:
            return
        feats = image_features(result.png)
        if self._ref is None:
            self._ref = feats
        first = self._first.setdefault(name, result)
        row = self.rows.setdefault(name, {"renders": 0, "diff_pixels": 0.0, "diff_max": 0, "paint_delta": 0.0,
                                          "reward_delta": 0.0, "_sims": []})
        row["renders"] += 1
        frac, mx = pixel_diff(first.png, result.png)
        row["diff_pixels"] = max(row["diff_pixels"], frac)
        row["diff_max"] = max(row["diff_max"], mx)
        row["paint_delta"] = max(row["paint_delta"], abs(first.paint_fraction - result.paint_fraction))
        row["_sims"].append(similarity(feats, self._ref))
        row["reward_delta"] = max(row["_sims"]) - min(row["_sims"])

    def report(self) -> dict:
        """``{sketch: {renders, diff_pixels, diff_max, paint_delta, reward_delta}}`` plus ``"all"``."""
        rows = {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in self.rows.items()}
        if rows:
            rows["all"] = {
                "renders": sum(r["renders"] for r in rows.values()),
                **{k: max(r[k] for r in rows.values()) for k in ("diff_pixels", "diff_max", "paint_delta", "reward_delta")},
            }
        return rows


def run_benchmark(
    cfg: RenderConfig,
    actor_counts: list[int],
    sketches: int,
    repeats: int,
    seed: int = 1,
    on_render=None,
    placement=None,
    match: str | None = None,
) -> dict:
    """Run the benchmark on the connected Ray cluster (``ray.init`` must have been called).

    Args:
        cfg: renderer settings (gl backend, deadline, CPUs per actor, ...); ``num_actors`` and the
            cache are overridden.
        actor_counts: pool sizes to measure, e.g. ``[1, 2, 4]``.
        sketches: how many of the 20 benchmark sketches (a prefix, ``bench_sketches``; of those
            whose name contains ``match`` when given).
        repeats: renders of each sketch per pool size (>= 1; >= 2 for determinism within a size).
        seed: render seed of every job.
        on_render: optional ``callback(done: int, total: int)`` after each render (progress).
        placement: where the renderer actors go (``resources.renderer`` of a run config, a
            ``config.ActorPlacement``; None: CPUs only).

    Returns:
        the report: ``{"config", "machine", "sketches", "pools": {n: summary}, "determinism",
        "renders": [per-render rows]}``.
    """
    from brushrl.render.bench_sketches import bench_sketches
    from brushrl.render.pool import RenderPool

    chosen = [(n, c) for n, c in bench_sketches() if match is None or match in n][:sketches]
    if not chosen:
        raise ValueError(f"no benchmark sketch name contains {match!r}")
    jobs = [(name, code) for name, code in chosen for _ in range(repeats)]
    det = Determinism()
    pools: dict[str, dict] = {}
    rows: list[dict] = []
    total, done = len(jobs) * len(actor_counts), 0
    for n in actor_counts:
        pool = RenderPool(cfg.model_copy(update={"num_actors": n, "cache_entries": 0, "cache_dir": None}), placement)
        try:
            pool.ping()
            pool.render_many([(bench_sketches()[1][1], 0)] * n)  # warm-up: one small render per actor

            def progress(_i, _r):
                nonlocal done
                done += 1
                if on_render:
                    on_render(done, total)

            t = time.monotonic()
            results = pool.render_many([(code, seed) for _, code in jobs], on_result=progress)
            batch_s = time.monotonic() - t
        finally:
            pool.shutdown()
        pools[str(n)] = summarise(results, batch_s)
        for (name, _), r in zip(jobs, results):
            det.add(name, r)
            rows.append({"actors": n, "sketch": name, "status": r.status, "actor_id": r.actor_id,
                         "wall_s": r.wall_s, "draw_s": r.draw_s, "cpu_s": r.cpu_s, "peak_rss_mb": r.peak_rss_mb,
                         "phases": r.phases,
                         "paint_fraction": r.paint_fraction, "attempts": r.attempts,
                         "error": (r.js_errors[:1] or [r.detail])[0][:200] if r.status != "ok" else ""})
    return {
        "config": cfg.model_dump() | {"seed": seed, "repeats": repeats},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
        "sketches": [name for name, _ in chosen],
        "pools": pools,
        "determinism": det.report(),
        "renders": rows,
    }


def print_report(report: dict, console=None) -> None:
    """The report's tables (rich): one row per pool size, then determinism per sketch."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 150)
    t = Table(title=f"render farm, {len(report['sketches'])} sketches x {report['config']['repeats']} repeats, "
                    f"{report['config']['canvas_size']}px, {report['config']['gl_backend']}, "
                    f"spare page {'on' if report['config'].get('spare_page', True) else 'off'}")
    for col in ("actors", "ok", "wall p50 s", "wall p95 s", "draw p50 s", "fixed p50 s", "overhead",
                "CPU core-s/render", "renders/min", "peak MiB/actor"):
        t.add_column(col, justify="right")
    for n, s in report["pools"].items():
        t.add_row(n, f"{s['ok']}/{s['renders']}", f"{s['wall_p50_s']:.2f}", f"{s['wall_p95_s']:.2f}",
                  f"{s['draw_p50_s']:.2f}", f"{s.get('fixed_p50_s', 0.0):.2f}", f"{s['overhead_share']:.0%}", f"{s['cpu_s_mean']:.2f}",
                  f"{s['renders_per_min']:.1f}", f"{s['peak_rss_mb_per_actor']:.0f}")
    console.print(t)
    ph = Table(title="where the wall time goes: p50 seconds per phase of an ok render (RenderResult.phases)")
    for col in ("actors", *PHASES):
        ph.add_column(col, justify="right")
    for n, s in report["pools"].items():
        ph.add_row(n, *(f"{s.get('phase_p50_s', {}).get(p, 0.0):.3f}" for p in PHASES))
    console.print(ph)
    d = Table(title="determinism: repeats vs the sketch's first render (all pool sizes)")
    for col in ("sketch", "renders", "pixels differing", "max channel diff", "max Δ paint fraction",
                "max Δ reward proxy (0-1)"):
        d.add_column(col, justify="right")
    for name, r in report["determinism"].items():
        d.add_row(name, str(r["renders"]), f"{r['diff_pixels']:.4%}", str(r["diff_max"]),
                  f"{r['paint_delta']:.5f}", f"{r['reward_delta']:.5f}")
    console.print(d)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by ``brushrl bench render`` and ``rayjobs/render_bench.py``."""
    p.add_argument("--config", metavar="FILE",
                   help="run config YAML (its render section and resources.renderer placement; default: built-in)")
    p.add_argument("--actors", default="1,2,4", metavar="N,N,..", help="pool sizes to measure (default 1,2,4)")
    p.add_argument("--sketches", type=int, default=20, metavar="K", help="first K of the 20 sketches (default 20)")
    p.add_argument("--repeats", type=int, default=3, metavar="R", help="renders per sketch per pool size (default 3)")
    p.add_argument("--match", metavar="TEXT", help="only sketches whose name contains TEXT (e.g. hibiscus)")
    p.add_argument("--spare-page", action=argparse.BooleanOptionalAction, default=None,
                   help="keep a spare page loaded per browser (default: render.spare_page, on); "
                        "--no-spare-page measures the page opened for each sketch")
    p.add_argument("--seed", type=int, default=1, help="render seed (default 1)")
    p.add_argument("--gl", choices=["swiftshader", "llvmpipe"], help="software GL (default: render.gl_backend)")
    p.add_argument("--deadline", type=float, metavar="S", help="seconds per attempt (default: max(render.deadline_s, 120))")
    p.add_argument("--num-cpus", type=float, metavar="C", help="Ray CPUs per renderer actor (default: render.num_cpus)")
    p.add_argument("--out", default="bench_render.json", metavar="JSON", help="report file (default bench_render.json)")


def run(args: argparse.Namespace, address: str | None = "local") -> int:
    """Parse the options, start/join Ray (``address``: ``"local"`` starts a private cluster, None
    joins the job's), run, print and write the report. Returns the exit code (2: bad option)."""
    import ray
    from rich.progress import Progress

    try:
        cfg = load_config(args.config) if args.config else BrushRLConfig()
        actors = [int(a) for a in args.actors.split(",") if a.strip()]
        if not actors or min(actors) < 1:
            raise ValueError
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except ValueError:
        print(f"--actors: expected positive integers separated by commas, got {args.actors!r}", file=sys.stderr)
        return 2
    from brushrl.render.bench_sketches import bench_sketches

    if args.match and not any(args.match in name for name, _ in bench_sketches()):
        print(f"--match: no benchmark sketch name contains {args.match!r}", file=sys.stderr)
        return 2
    if not 1 <= args.sketches <= 20 or args.repeats < 1:
        print("--sketches must be in 1..20 and --repeats >= 1", file=sys.stderr)
        return 2
    rc = cfg.render.model_copy(update={
        "gl_backend": args.gl or cfg.render.gl_backend,
        "deadline_s": args.deadline or max(cfg.render.deadline_s, 120.0),
        "num_cpus": args.num_cpus or cfg.render.num_cpus,
        "spare_page": cfg.render.spare_page if args.spare_page is None else args.spare_page,
    })
    started = not ray.is_initialized()
    if started and address == "local":  # enough logical CPUs (and custom resources) for the largest pool
        from brushrl.ray_setup import start_local_ray

        start_local_ray(num_cpus=max(1, math.ceil(max(actors) * rc.num_cpus)), log_to_driver=False,
                        resources={k: v * max(actors) for k, v in cfg.resources.renderer.resources.items()})
    elif started:
        ray.init(address=address, log_to_driver=False)
    try:
        with Progress(transient=True) as bar:
            task = bar.add_task("rendering", total=None)
            report = run_benchmark(rc, actors, args.sketches, args.repeats, args.seed, placement=cfg.resources.renderer,
                                   on_render=lambda d, t: bar.update(task, completed=d, total=t), match=args.match)
    finally:
        if started:
            ray.shutdown()
    print_report(report)
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0
