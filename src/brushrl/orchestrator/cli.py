"""``brushrl train``, ``brushrl eval`` and ``brushrl scale``."""

from __future__ import annotations

import argparse
from pathlib import Path

from brushrl.config import ConfigError, load_config, parse_sets


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
    overrides = parse_sets(args.set)
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


def resolve_job_weights(cfg, config: str):
    """The config with its hub models loaded from ``weights.dir`` (``brushrl.hub.weights.resolve_weights``),
    before Ray or any actor starts; when every model is local, the hub's offline switches go into
    this process's environment (a local Ray cluster inherits them; actors of a submitted job get
    them through their runtime envs, ``offline_env``). Prints one line a model.

    Raises:
        WeightsUnavailable: a model neither local nor reachable (named, with the fetch command).
    """
    import os

    from brushrl.hub.weights import resolve_weights

    resolved = resolve_weights(cfg, config)
    os.environ.update(resolved.env)
    for line in resolved.notes:
        print(f"[brushrl] weights: {line}", flush=True)
    if resolved.env:
        print("[brushrl] weights: every model local; actors run with " + ", ".join(f"{k}=1" for k in resolved.env),
              flush=True)
    return resolved.cfg


def run_train(args: argparse.Namespace) -> int:
    """Run a training job; returns the exit code: 0 finished, 2 bad config, nothing to resume,
    model weights or a tracker's package unavailable (before any actor starts), 130 / 143 stopped
    by SIGINT / SIGTERM (the run directory is consistent and resumable)."""
    from brushrl.hub.weights import WeightsUnavailable

    try:
        cfg = config_from_args(args)
        resume = getattr(args, "resume", None)
        cfg = resolve_job_weights(cfg, f"{resume}/config.yaml" if resume else args.config)
    except (ConfigError, WeightsUnavailable) as exc:
        print(exc)
        return 2
    import logging

    from brushrl.orchestrator.trainer import Trainer

    # Stage loggers (SFT progress, cache hits) print to the console and to `ray job` logs.
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")

    from brushrl.artifacts.trackers import TrackerUnavailable

    try:
        trainer = Trainer(cfg, resume=bool(getattr(args, "resume", None)))
    except (FileNotFoundError, TrackerUnavailable) as exc:
        print(exc)
        return 2
    trainer.run()
    if trainer.outcome == "stopped":
        return STOPPED_EXIT.get(trainer.stop_signal, 130)
    return 0


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments shared by ``brushrl eval`` and ``rayjobs/eval.py``."""
    p.add_argument("run_dir", help="the run directory to evaluate (<run.output_dir>/<run.name>); its config.yaml is used")
    p.add_argument("--checkpoint", action="append", default=[], metavar="CKPT",
                   help="a checkpoint to score: latest, a step (20), a folder name (step_0020) or a path; repeatable")
    p.add_argument("--no-base", action="store_true", help="do not score the base policy (the warm start, LoRA B = 0)")
    p.add_argument("--samples", type=int, help="override eval.samples_per_prompt")
    p.add_argument("--held-out", type=int, metavar="K", help="score only the first K of eval.subjects")
    p.add_argument("--training", type=int, metavar="K", help="score only the first K training subjects (0: none)")
    p.add_argument("--unseen", type=int, metavar="K",
                   help="score only the first K of eval.unseen_subjects, colour x species pairs neither SFT nor RL "
                   "saw, reported apart without a target (0: none; default: all)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any field of the run's config by dotted path, YAML value (repeatable)")
    p.add_argument("--report-only", action="store_true",
                   help="sample nothing: rebuild eval.json, eval.html and the table from the last evaluation's "
                   "eval/samples.parquet (same policies; pass the same --held-out/--training/--unseen/--turns)")
    p.add_argument("--turns", type=int, default=1, metavar="K",
                   help="multi-turn revision: each sample is a trajectory of up to K replies, critiqued by the "
                   "run's reward.critic between them; reports each turn side by side (default 1)")


def run_eval(args: argparse.Namespace) -> int:
    """Score the base and/or checkpoints of a run (``brushrl.orchestrator.evaluate``); 2 for a bad
    run directory, config (an unseen subject that is also held out or trained on included),
    checkpoint or a tracker of its ``logging.trackers`` that cannot start."""
    import logging

    import yaml

    from brushrl.orchestrator.evaluate import Evaluator, eval_config, eval_prompts, resolve_policies

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--set {item!r}: expected KEY=VALUE")
            return 2
        overrides[key] = yaml.safe_load(value)
    if args.samples is not None:
        overrides["eval.samples_per_prompt"] = args.samples
    from brushrl.artifacts.trackers import TrackerUnavailable, require_trackers

    try:
        cfg = eval_config(args.run_dir, overrides)
        seen = set(cfg.eval.subjects) | (set(cfg.prompts.subjects) if cfg.eval.include_training else set())
        both = sorted(seen & set(cfg.eval.unseen_subjects[:args.unseen]))
        if both:
            raise ValueError(f"eval.unseen_subjects: {both} also in eval.subjects or prompts.subjects (an unseen "
                             f"pair must be neither held out nor trained on)")
        require_trackers(cfg)  # the run's logging.trackers get the results: fail before sampling
        policies = resolve_policies(args.run_dir, args.checkpoint, base=not args.no_base)
    except (ConfigError, FileNotFoundError, ValueError, TrackerUnavailable) as exc:
        print(exc)
        return 2
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    prompts = eval_prompts(cfg, held_out=args.held_out, training=args.training, unseen=args.unseen)
    print(f"[eval] {args.run_dir}: " + ("the last evaluation reported again" if args.report_only else
          ", ".join(p.name for p in policies)) + f" on {len(prompts)} prompts x "
          f"{cfg.eval.samples_per_prompt} samples (eval.seed {cfg.eval.seed})"
          + (f", {args.turns} turns ({cfg.reward.critic.kind} critic)" if args.turns > 1 else ""), flush=True)
    if args.turns < 1:
        print(f"--turns {args.turns}: expected >= 1")
        return 2
    evaluator = Evaluator(cfg, args.run_dir, prompts, turns=args.turns)
    if args.report_only:
        try:
            evaluator.rereport()
        except FileNotFoundError as exc:
            print(exc)
            return 2
        return 0
    evaluator.run(policies)
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

    e = sub.add_parser(
        "eval",
        help="score a run's base policy and checkpoints on fixed held-out prompts (side-by-side table)",
        description="Sample eval.samples_per_prompt completions for each held-out subject (eval.subjects) and "
        "each training subject, with fixed render and sampler seeds, from the base policy and each checkpoint; "
        "gate, render and score them on the run's own actors and reward; print a side-by-side table with 95% "
        "bootstrap intervals and write RUN_DIR/eval/eval.json and RUN_DIR/eval.html.",
    )
    add_eval_arguments(e)
    e.set_defaults(func=run_eval)

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
