"""GPU smoke run: vLLM rollout + TRL/LoRA learner + adapter hot-swap on one GPU, sync vs async.

    python rayjobs/gpu_smoke.py [--steps 4] [--vllm-python /opt/vllm-venv/bin/python] [--set KEY=VALUE ...]

Runs ``brushrl bench pipeline`` with the vLLM engine: the learner (bf16, gradient checkpointing)
and the vLLM actor share the GPU (``--learner-gpus`` / ``--rollout-gpus`` fractions), adapters are
synced through ``/dev/shm/brushrl-adapters/v<version>`` with a new vLLM adapter id per version,
renderers and the scorer run on the CPUs. The policy is the tiny warm-started model built locally
(no download; ``--set policy.model=/path`` for a stored one). Prints the same table as the bench
and writes ``runs/gpu_smoke/bench_pipeline.json``. Budget: under 8 minutes on one H200 with the
defaults (2 x 4 steps).

Requirements on the machine: this repo's environment (``make setup``) plus vllm installed either in
it or in a separate environment given by ``--vllm-python`` (vllm pins its own torch; that
environment also needs ``pip install -e .`` of this repo without deps and the same ray version),
and Debian's chromium at ``render.chromium_path``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "configs/local.yaml"))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--max-staleness", type=int, default=2)
    parser.add_argument("--vllm-python", help="interpreter of an environment with vllm (default: this one)")
    parser.add_argument("--learner-gpus", type=float, default=0.5)
    parser.add_argument("--rollout-gpus", type=float, default=0.4)
    parser.add_argument("--out-dir", default=str(ROOT / "runs/gpu_smoke"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("gpu_smoke: no CUDA device visible", file=sys.stderr)
        return 2
    sets = [
        "rollout.backend=vllm",
        "rollout.adapter_dir=/dev/shm/brushrl-adapters",
        f"resources.rollout.num_gpus={args.rollout_gpus}",
        "rollout.gpu_memory_utilization=0.35",
        f"resources.learner.num_gpus={args.learner_gpus}",
        "ray.num_cpus=" + str(os.cpu_count() or 8),
        f"render.num_actors={max(2, (os.cpu_count() or 8) // 2)}",
        *args.set,
    ]
    if args.vllm_python:
        sets.append(f"rollout.python={args.vllm_python}")
    from brushrl.orchestrator.bench import run_bench

    ns = argparse.Namespace(config=args.config, steps=args.steps, warmup=1, max_staleness=args.max_staleness,
                            out_dir=args.out_dir, json=None, set=sets)
    return run_bench(ns)


if __name__ == "__main__":  # the vLLM engine spawns processes: keep module import side-effect free
    sys.exit(main())
