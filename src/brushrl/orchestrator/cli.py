"""``brushrl train`` and ``brushrl scale``."""

from __future__ import annotations

import argparse
from pathlib import Path

from brushrl.config import ConfigError, load_config


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments shared by ``brushrl train`` and ``rayjobs/train.py``."""
    p.add_argument("--config", default="configs/local.yaml", help="YAML run config (default: %(default)s)")
    p.add_argument("--steps", type=int, help="override run.steps")
    p.add_argument("--name", help="override run.name (the run directory's name)")
    p.add_argument("--output-dir", help="override run.output_dir (parent of run directories)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any field by dotted path, YAML value (repeatable), e.g. --set render.num_actors=4")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR (e.g. runs/local) from its newest checkpoint with the same "
                        "step numbering; its config.yaml is used (--config is ignored; --steps/--set still apply)")


def config_from_args(args: argparse.Namespace):
    """The validated config with command-line overrides applied (raises ``ConfigError``)."""
    import yaml

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        overrides[key] = yaml.safe_load(value)
    if args.steps is not None:
        overrides["run.steps"] = args.steps
    if args.name:
        overrides["run.name"] = args.name
    if args.output_dir:
        overrides["run.output_dir"] = args.output_dir
    if getattr(args, "resume", None):
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"--resume {run_dir}: no config.yaml there (not a brushrl run directory)")
        overrides |= {"run.output_dir": str(run_dir.resolve().parent), "run.name": run_dir.resolve().name}
        return load_config(run_dir / "config.yaml", overrides)
    return load_config(args.config, overrides)


#: Exit codes of a run stopped by a signal (128 + signal number, as a shell reports it).
STOPPED_EXIT = {"SIGINT": 130, "SIGTERM": 143}


def run_train(args: argparse.Namespace) -> int:
    """Run a training job; returns the exit code: 0 finished, 2 bad config or nothing to resume,
    130 / 143 stopped by SIGINT / SIGTERM (the run directory is consistent and resumable)."""
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        print(exc)
        return 2
    import logging

    from brushrl.orchestrator.trainer import Trainer

    # Stage loggers (SFT progress, cache hits) print to the console and to `ray job` logs.
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")

    try:
        trainer = Trainer(cfg, resume=bool(getattr(args, "resume", None)))
    except FileNotFoundError as exc:
        print(exc)
        return 2
    trainer.run()
    if trainer.outcome == "stopped":
        return STOPPED_EXIT.get(trainer.stop_signal, 130)
    return 0


def run_scale(args: argparse.Namespace) -> int:
    """Ask a running trainer for a new number of renderers; 2 for a bad run directory or count."""
    from brushrl.orchestrator.control import ControlError, write_control

    try:
        path = write_control(args.run_dir, args.renderers)
    except (FileNotFoundError, ControlError) as exc:
        print(exc)
        return 2
    print(f"wrote {path}: the trainer switches to {args.renderers} renderer(s) before its next step")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train the policy with GRPO (local Ray, or the cluster of a Ray job)",
        description="Warm-start the policy, start renderer/rollout/learner/scorer actors on Ray and run "
        "GRPO for run.steps steps; writes runs/<name>/ (config, rollouts.parquet, PNGs, checkpoints, "
        "metrics.jsonl, gallery.html).",
    )
    add_train_arguments(p)
    p.set_defaults(func=run_train)

    s = sub.add_parser(
        "scale",
        help="change the number of renderers of a running training run",
        description="Write RUN_DIR/control.yaml; the trainer reads it before each step and grows or shrinks its "
        "renderer pool without restarting. Renderers that cannot be placed yet (on a cluster: no free "
        "`renderer` resource) wait for the autoscaler's new nodes and join when they start.",
    )
    s.add_argument("run_dir", help="the run directory of the running run (<run.output_dir>/<run.name>)")
    s.add_argument("--renderers", type=int, required=True, help="renderer actors wanted (>= 1)")
    s.set_defaults(func=run_scale)
