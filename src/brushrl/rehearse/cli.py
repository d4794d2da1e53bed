"""``brushrl rehearse CONFIG``: run a GPU config on this CPU machine, every GPU part replaced by a
tiny stand-in through one printed override set (``brushrl.rehearse.overrides``), for a few async
steps submitted with ``ray job submit`` to a private local head, then the run's reward report.

Steps: check the GPU config as given (``brushrl config check``'s plans); build or reuse the tiny
stand-ins (``brushrl.rehearse.standins``); print the override set; start a private head (or use
``--address``); ``ray job submit -- python rayjobs/train.py --config CONFIG --set ...``, the job's
log streamed here; print the reward report (``python -m brushrl.reward.report``) and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from brushrl.config import ConfigError, load_config
from brushrl.rehearse.overrides import as_set_args, rehearsal_overrides
from brushrl.rehearse.standins import ROOT, MissingEnv, prepare


def run_rehearse(args: argparse.Namespace) -> int:
    """0: the job finished; 1: it failed; 2: bad config or a missing env."""
    t0 = time.monotonic()
    config = Path(args.config).resolve()
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        print(exc)
        return 2
    work = Path(args.work_dir or ROOT / "runs" / f"rehearse-{cfg.run.name}").resolve()
    work.mkdir(parents=True, exist_ok=True)
    scorers = cfg.reward.scorers
    try:
        stand = prepare(work, Path(args.cache).expanduser().resolve(), need_vllm=cfg.rollout.backend == "vllm",
                        need_hpsv3="hpsv3" in scorers, need_judge="judge" in scorers,
                        sft_cache=Path(args.sft_cache).expanduser().resolve() if args.sft_cache else None)
    except MissingEnv as exc:
        print(f"brushrl rehearse: {exc}")
        return 2
    overrides = rehearsal_overrides(cfg, stand, steps=args.steps, ray_cpus=args.num_cpus)
    sets = as_set_args(overrides)
    try:
        rehearsed = load_config(config, overrides)
    except ConfigError as exc:
        print(f"the override set does not validate against {config}:\n{exc}")
        return 2
    print(f"[rehearse] {config}: the GPU config as given; overrides, the only difference from the GPU run "
          f"(brushrl.rehearse.overrides):")
    for item in sets:
        print(f"[rehearse]   --set {item}")
    print(f"[rehearse] stand-ins built in {time.monotonic() - t0:.0f} s; work dir {work}")
    if args.dry_run:
        return 0
    run_dir = Path(rehearsed.run.output_dir) / rehearsed.run.name
    head = None
    try:
        address = args.address
        if not address:
            from brushrl.ray_setup import PrivateHead  # imports Ray: only when a head is needed

            head = PrivateHead(work / "ray-head.log", num_cpus=args.num_cpus)
            address = head.start()
            print(f"[rehearse] private Ray head at {address} (log {work / 'ray-head.log'})", flush=True)
        code, job_s = _submit(address, config, sets, work, head.env if head else None)
    finally:
        if head is not None:
            head.stop()
    print(f"[rehearse] job {'finished' if code == 0 else f'failed ({code})'} in {job_s:.0f} s; "
          f"rehearsal wall time {time.monotonic() - t0:.0f} s; run dir {run_dir}", flush=True)
    if (run_dir / "rollouts.parquet").is_file():
        from brushrl.reward.report import main as report

        report([str(run_dir)])
    return 0 if code == 0 else 1


def _submit(address: str, config: Path, sets: list[str], work: Path, env: dict | None) -> tuple[int, float]:
    """``ray job submit`` of ``rayjobs/train.py --config CONFIG --set ...`` to ``address``, its log
    streamed to stdout and ``work/job.log``; returns (exit code, seconds)."""
    from brushrl.ray_setup import job_runtime_env

    cmd = [str(Path(sys.executable).parent / "ray"), "job", "submit", "--address", address,
           "--runtime-env-json", json.dumps(job_runtime_env(ROOT, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")), "--",
           "python", "rayjobs/train.py", "--config", str(config), *[a for s in sets for a in ("--set", s)]]
    t0 = time.monotonic()
    with open(work / "job.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env or {**os.environ, "RAY_AUTH_MODE": "token"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(line)
        code = proc.wait()
    return code, time.monotonic() - t0


def register(sub) -> None:
    p = sub.add_parser(
        "rehearse",
        help="run a GPU config on this CPU machine with tiny stand-ins, through ray job submit",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", help="the GPU run config, e.g. configs/h200.yaml")
    p.add_argument("--steps", type=int, default=3, help="learner steps (default: %(default)s)")
    p.add_argument("--work-dir", help="runs, adapters and logs (default: runs/rehearse-<run.name>)")
    p.add_argument("--cache", default="~/.cache/brushrl/rehearse",
                   help="where the tiny stand-ins are built once (default: %(default)s)")
    p.add_argument("--sft-cache", help="the tiny policy's warm-start cache (default: CACHE/sft)")
    p.add_argument("--address", help="dashboard address of a running head (default: start a private one)")
    p.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of the private head (default: %(default)s)")
    p.add_argument("--dry-run", action="store_true", help="build the stand-ins, print the override set, stop")
    p.set_defaults(func=run_rehearse)
