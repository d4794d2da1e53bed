"""Pipeline throughput: the same config trained synchronously and asynchronously, compared.

``brushrl bench pipeline``

Runs ``brushrl train`` in-process twice on one local Ray cluster, with ``orchestrator.max_staleness``
0 (synchronous GRPO) and K (asynchronous), each for ``--steps`` learner steps into
``<out-dir>/bench-sync`` and ``<out-dir>/bench-async``, then reads their ``metrics.jsonl`` and prints
one table and writes one JSON file with, per mode:

* ``steps_per_hour``: 3600 x steps / their wall seconds, the first ``--warmup`` steps left out
  (actor start-up, Chromium launch and the first compilation land there);
* ``learner_idle_share``: 1 - (seconds in optimizer steps) / (wall seconds) over those steps;
* ``staleness_mean`` / ``staleness_max``: policy versions behind, over trained groups;
* stage shares: seconds spent generating, rendering, scoring (summed over groups, so stages of
  concurrent groups add up past wall time), learning and syncing, each as a share of their sum;
* ``groups``: the final group ledger.

and ``ratio`` = async steps/hour / sync steps/hour. Timing numbers are only meaningful on an
otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from brushrl.config import ConfigError

STAGES = ("gen", "render", "score", "learn", "sync")


def summarize(metrics: list[dict], warmup: int = 1) -> dict:
    """Pipeline figures of one run from its ``metrics.jsonl`` records (module docstring).

    Raises:
        ValueError: fewer than ``warmup + 1`` steps.
    """
    if len(metrics) <= warmup:
        raise ValueError(f"need more than {warmup} step(s) to measure, got {len(metrics)}")
    timed = metrics[warmup:]
    wall = sum(m["time/step_s"] for m in timed)
    learn = sum(m["time/learn_s"] for m in timed)
    lags = [(m["staleness/mean"], m["groups/accepted"]) for m in timed if m.get("staleness/mean") is not None]
    n_groups = sum(n for _, n in lags)
    stage_s = {s: sum(m.get(f"time/{s}_s", 0.0) for m in timed) for s in STAGES}
    total = sum(stage_s.values()) or 1.0
    last = metrics[-1]
    return {
        "steps": len(timed),
        "wall_s": wall,
        "steps_per_hour": 3600.0 * len(timed) / wall if wall else 0.0,
        "learner_idle_share": 1.0 - learn / wall if wall else 0.0,
        "staleness_mean": sum(v * n for v, n in lags) / n_groups if n_groups else 0.0,
        "staleness_max": max((m["staleness/max"] for m in timed if m.get("staleness/max") is not None), default=0),
        "stage_share": {s: v / total for s, v in stage_s.items()},
        "stage_s": stage_s,
        "groups": {k.split("/", 1)[1]: v for k, v in last.items() if k.startswith("ledger/")},
    }


def run_bench(args: argparse.Namespace) -> int:
    """Train both modes and report; returns the exit code (2 for a bad config)."""
    from brushrl.orchestrator.cli import config_from_args

    out_dir = Path(args.out_dir).resolve()
    results = {}
    for mode, staleness in (("sync", 0), ("async", args.max_staleness)):
        sets = [*args.set, f"orchestrator.max_staleness={staleness}", f"run.name=bench-{mode}",
                f"run.output_dir={out_dir}", f"run.steps={args.steps}", f"run.checkpoint_every={args.steps}"]
        ns = argparse.Namespace(config=args.config, set=sets, steps=None, name=None, output_dir=None, resume=None)
        try:
            cfg = config_from_args(ns)
        except ConfigError as exc:
            print(exc)
            return 2
        from brushrl.orchestrator.trainer import Trainer

        print(f"[bench] {mode}: max_staleness {staleness}, {args.steps} steps -> {out_dir / cfg.run.name}", flush=True)
        trainer = Trainer(cfg)
        trainer.run()
        results[mode] = summarize(trainer.run_dir.metrics(), args.warmup)
    sync, async_ = results["sync"]["steps_per_hour"], results["async"]["steps_per_hour"]
    report = {"config": args.config, "steps": args.steps, "warmup": args.warmup,
              "max_staleness": args.max_staleness, "modes": results,
              "ratio": async_ / sync if sync else None}
    print_table(report)
    path = Path(args.json or out_dir / "bench_pipeline.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"[bench] JSON: {path}")
    return 0


def print_table(report: dict) -> None:
    """The comparison as a rich table."""
    from rich.console import Console
    from rich.table import Table

    modes = report["modes"]
    table = Table(title=f"brushrl pipeline: sync vs async (max_staleness {report['max_staleness']})")
    table.add_column("metric")
    for mode in modes:
        table.add_column(mode, justify="right")
    rows = [
        ("steps/hour", lambda r: f"{r['steps_per_hour']:.1f}"),
        ("learner idle", lambda r: f"{100 * r['learner_idle_share']:.0f}%"),
        ("staleness mean", lambda r: f"{r['staleness_mean']:.2f}"),
        ("staleness max", lambda r: f"{r['staleness_max']:.0f}"),
        *[(f"share {s}", lambda r, s=s: f"{100 * r['stage_share'][s]:.0f}%") for s in STAGES],
        ("groups accepted/filtered/failed/stale",
         lambda r: "/".join(str(r["groups"].get(k, 0)) for k in ("accepted", "filtered", "failed", "stale"))),
    ]
    for name, fmt in rows:
        table.add_row(name, *(fmt(r) for r in modes.values()))
    ratio = report["ratio"]
    table.caption = f"async / sync steps per hour: {ratio:.2f}x" if ratio else "ratio: n/a"
    Console().print(table)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``brushrl bench pipeline`` (registered by ``brushrl.bench_cli``)."""
    p.add_argument("--config", default="configs/local.yaml", help="YAML run config (default: %(default)s)")
    p.add_argument("--steps", type=int, default=6, help="learner steps per mode (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="first steps left out of the timing (default: %(default)s)")
    p.add_argument("--max-staleness", type=int, default=2, help="K of the async mode (default: %(default)s)")
    p.add_argument("--out-dir", default="runs/bench", help="parent of the two run directories (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="where the JSON goes (default: OUT_DIR/bench_pipeline.json)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field (repeatable), e.g. --set rollout.groups_per_step=2")


def run(args: argparse.Namespace) -> int:
    """Entry point for ``brushrl.bench_cli``."""
    return run_bench(args)
