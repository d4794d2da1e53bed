"""GPU smoke run of configs/h200.yaml's placement on ONE GPU: the vLLM rollout engine with LoRA
hot-swap, the TRL/PEFT learner, HPSv3 and the judge server brushrl starts, all on the GPU (a quarter
of it each), renderers on the CPUs; tiny stand-in models (no network on the GPU machine).

    python -m brushrl.rehearse.gpu_smoke --pipeline --vllm-python /opt/venvs/vllm/bin/python \\
        --hpsv3-python /opt/venvs/hpsv3/bin/python        [--steps 4] [--out-dir runs/gpu_smoke]

(``make gpu-smoke GPU_SMOKE_ARGS="--pipeline ..."``; was ``rayjobs/gpu_smoke.py``.)

The run is configs/h200.yaml with ``brushrl rehearse``'s override set (tiny policy, tiny judge VLM,
tiny HPSv3 checkpoint, 3 x 1 groups), then put back on the GPU: one node kind with this machine's
GPU; learner, rollout, HPSv3 and judge each ``num_gpus: 0.25``; the two vLLM engines (GPU vLLM from
``--vllm-python``, bf16, eager) at ``gpu_memory_utilization`` 0.2; HPSv3 on ``cuda``. Every override
is printed, and the smoke config must pass ``brushrl config check``'s GPU-memory plan first.

What it measures (written to ``<out-dir>/gpu_smoke.json`` and printed; docs/perf/gpu_smoke.md):

* step time by stage, per step (the run's ``metrics.jsonl``: generation, render, scoring per scorer,
  learner update, adapter sync, wait) and the wall time to the first step (model loads, engine starts);
* GPU memory per component: the most ``nvidia-smi --query-compute-apps`` reported for each actor's
  processes (vLLM's engine core is a child of its actor), sampled every 2 s, against the memory
  plan's estimate for the same component.

Needs: this repo's env (``make setup``) with Debian chromium; GPU vllm in ``--vllm-python`` (its
env also needs this Ray version); the hpsv3 env (``scripts/build_hpsv3_env.sh``; its CUDA torch runs
on the GPU). Budget: under 8 minutes on one H200 with the defaults (no downloads; two eager vLLM
starts of tiny models and a few seconds a step). Untested on a GPU so far (no GPU was lent to the
session that wrote it); the CPU rehearsal of the same file runs in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the checkout (src/brushrl/rehearse/ -> root)
#: The GPU actors of configs/h200.yaml and their share of the one GPU.
SHARES = {"learner": 0.25, "rollout": 0.25, "hpsv3": 0.25, "judge": 0.25}


def smoke_overrides(cfg, stand, steps: int, gpu_type: str | None, gpu_gib: float, cpus: int | None = None) -> dict:
    """The rehearsal override set of ``cfg`` put back on one GPU of a machine with ``cpus`` cores
    (None: this one's) (module docstring)."""
    from brushrl.config import PLACED_ACTORS
    from brushrl.rehearse.overrides import rehearsal_overrides

    cpus = cpus or os.cpu_count() or 8
    out = rehearsal_overrides(cfg, stand, steps=steps, ray_cpus=cpus)
    out["resources.nodes"] = {"gpu": {"cpus": cpus, "gpus": 1, "gpu_type": gpu_type, "gpu_memory_gb": gpu_gib,
                                      "memory_gb": 64}}
    for actor in PLACED_ACTORS:
        out[f"resources.{actor}"] = {"node": "gpu", "num_gpus": SHARES.get(actor, 0), "memory_gb": 0,
                                     "resources": {}, "gpu_memory_gb": None}
    out |= {"policy.dtype": "bfloat16", "rollout.gpu_memory_utilization": 0.2,
            "render.num_actors": max(2, min(8, cpus // 2)), "render.num_cpus": 1,
            "reward.hpsv3.device": "cuda", "reward.judge.serve.dtype": "bfloat16",
            "reward.judge.serve.gpu_memory_utilization": 0.2, "reward.judge.serve.env": {}}
    return out


class GpuSampler:
    """Samples ``nvidia-smi --query-compute-apps=pid,used_memory`` every ``every_s`` seconds in a
    thread; ``peak_mib[pid]`` is the most each process held."""

    def __init__(self, every_s: float = 2.0):
        self.every_s, self.peak_mib, self._stop = every_s, defaultdict(int), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=20).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            for line in out.splitlines():
                pid, _, mib = line.partition(",")
                if pid.strip().isdigit() and mib.strip().isdigit():
                    self.peak_mib[int(pid)] = max(self.peak_mib[int(pid)], int(mib))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(timeout=30)


def actor_pids() -> dict[str, list[int]]:
    """Ray actor class -> pids of its worker processes and their children (vLLM's engine core)."""
    import psutil
    from ray.util.state import list_actors

    out: dict[str, list[int]] = defaultdict(list)
    for a in list_actors(detail=True, limit=1000):
        pid = a.get("pid") if isinstance(a, dict) else getattr(a, "pid", None)
        name = a.get("class_name") if isinstance(a, dict) else getattr(a, "class_name", "")
        if not pid:
            continue
        try:
            out[name] += [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except psutil.Error:
            out[name].append(pid)
    return out


#: Ray actor class -> the memory plan's component name.
COMPONENT = {"LearnerActor": "learner", "_VLLMActor": "rollout", "HPSv3Scorer": "hpsv3", "JudgeServer": "judge[0]"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brushrl.rehearse.gpu_smoke --pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "configs/h200.yaml"))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--vllm-python", required=True, help="interpreter of an env with GPU vllm")
    parser.add_argument("--hpsv3-python", required=True, help="interpreter of the hpsv3 env")
    parser.add_argument("--out-dir", default=str(ROOT / "runs/gpu_smoke"))
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("gpu_smoke: no CUDA device visible", file=sys.stderr)
        return 2
    from brushrl.config import load_config
    from brushrl.orchestrator.trainer import Trainer
    from brushrl.plan.memory import build_memory_plan
    from brushrl.rehearse.overrides import as_set_args
    from brushrl.rehearse.standins import prepare

    t0 = time.monotonic()
    out_dir = Path(args.out_dir).resolve()
    stand = prepare(out_dir, out_dir / "cache", Path(args.vllm_python), Path(args.hpsv3_python))
    props = torch.cuda.get_device_properties(0)
    gpu_gib = props.total_memory / 2**30
    gpu_type = next((t for t in ("H200", "H100", "A100", "L40S", "L4") if t in props.name), None)
    cfg = load_config(args.config)
    overrides = smoke_overrides(cfg, stand, args.steps, gpu_type, gpu_gib)
    overrides["run.name"] = "gpu_smoke"
    for item in as_set_args(overrides):
        print(f"[gpu_smoke] --set {item}")
    cfg = load_config(args.config, overrides)
    plan = build_memory_plan(cfg)
    if plan.errors:
        print("\n".join(f"[gpu_smoke] plan error: {e}" for e in plan.errors), file=sys.stderr)
        return 1
    estimate = {e.component: e.used_gib for e in plan.estimates}
    pids: dict[str, list[int]] = {}
    with GpuSampler() as sampler:
        trainer = Trainer(cfg)

        def watch():  # actor pids while they live (the trainer kills them at the end)
            while not sampler._stop.is_set():
                try:
                    for name, found in actor_pids().items():
                        pids[name] = sorted(set(pids.get(name, [])) | set(found))
                except Exception:  # noqa: BLE001 - the state API before Ray is up
                    pass
                time.sleep(5)

        threading.Thread(target=watch, daemon=True).start()
        trainer.run()
    run_dir = Path(cfg.run.output_dir) / cfg.run.name
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    measured = {COMPONENT[name]: max((sampler.peak_mib.get(p, 0) for p in ps), default=0) / 1024
                for name, ps in pids.items() if name in COMPONENT}
    stage_keys = sorted({k for m in metrics for k in m if k.startswith("time/")})
    result = {
        "gpu": props.name, "gpu_gib": gpu_gib, "wall_s": time.monotonic() - t0, "outcome": trainer.outcome,
        "steps": [{"step": m["step"], **{k: m[k] for k in stage_keys}} for m in metrics],
        "gpu_memory_gib": {c: {"plan": estimate.get(c), "measured_peak": measured.get(c)} for c in estimate},
        "overrides": overrides,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_smoke.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"[gpu_smoke] {props.name}: {trainer.outcome} in {result['wall_s']:.0f} s")
    for c, v in result["gpu_memory_gib"].items():
        print(f"[gpu_smoke] {c:10s} plan {v['plan'] or 0:6.1f} GiB   measured peak {v['measured_peak'] or 0:6.1f} GiB")
    for s in result["steps"]:
        print("[gpu_smoke] step {step}: ".format(**s) + ", ".join(f"{k[5:]} {s[k]:.1f}" for k in stage_keys
                                                                  if isinstance(s.get(k), (int, float))))
    return 0 if trainer.outcome == "finished" else 1


if __name__ == "__main__":  # the vLLM engine spawns processes: keep module import side-effect free
    sys.exit(main())
