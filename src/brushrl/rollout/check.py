"""Measure a warm start: train (or reuse) it, sample from it like a rollout, gate the samples.

Usage::

    python -m brushrl.rollout.check [--config run.yaml] [--groups 4] [--n 4] [--set policy.sft.epochs=10]
        [--dump samples.jsonl]

Prints the SFT figures (seconds, final loss, examples), then samples ``groups x n`` completions
with the run's rollout settings (temperature, top-p/k, ``max_new_tokens``) through
:class:`~brushrl.rollout.TransformersEngine` and reports the static-gate pass rate, the verdict
counts, tokens per completion, truncations and generation seconds per completion. The static gate
is the full one (tree-sitter parse, skeleton, WEBGL, whitelist); rendering is not done here.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections import Counter
from pathlib import Path

import yaml

from brushrl.config import BrushRLConfig, load_config, parse_config


def _config(args: argparse.Namespace) -> BrushRLConfig:
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)
    if args.config:
        return load_config(args.config, overrides)
    data: dict = {}
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return parse_config(data, "--set")


def main(argv: list[str] | None = None) -> dict:
    """Run the check; returns the summary that it prints (a JSON-able dict)."""
    ap = argparse.ArgumentParser(prog="python -m brushrl.rollout.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="run config YAML (default: built-in defaults)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="dotted config overrides")
    ap.add_argument("--groups", type=int, default=4, help="prompts sampled (one group each)")
    ap.add_argument("--n", type=int, default=4, help="completions per prompt")
    ap.add_argument("--threads", type=int, default=None, help="torch threads for SFT (default: all cores)")
    ap.add_argument("--dump", metavar="JSONL", help="also write every sample with its verdict and detail")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    import torch

    from brushrl.gate import check_static
    from brushrl.policy.sft import DONE_MARKER, warm_start_policy
    from brushrl.prompts import resolve_system_prompt, sample_prompts
    from brushrl.rollout import TransformersEngine

    cfg = _config(args)
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    if cfg.policy.model != "tiny":
        ap.error(f"policy.model is {cfg.policy.model!r}: this tool measures the tiny policy's warm start")
    cfg = warm_start_policy(cfg, system_prompt, threads=args.threads)
    path = Path(cfg.policy.model)
    sft = json.loads((path / DONE_MARKER).read_text())

    torch.set_num_threads(cfg.policy.torch_threads)
    engine = TransformersEngine(cfg.policy, cfg.rollout, system_prompt, cfg.learner.lora)
    prompts = sample_prompts(cfg.prompts, args.groups, random.Random(cfg.run.seed))
    t0 = time.perf_counter()
    completions = [c for group in engine.generate(prompts, args.n, seed=cfg.run.seed) for c in group]
    gen_s = time.perf_counter() - t0
    judged = [check_static(c.text, cfg.gate, cfg.render.canvas_size,
                           replay=cfg.render.mode == "replay")[1] for c in completions]
    verdicts = Counter(v.verdict for v in judged)
    if args.dump:
        with open(args.dump, "w") as f:
            for c, v in zip(completions, judged):
                row = {"verdict": v.verdict, "detail": v.detail, "truncated": c.truncated, "text": c.text}
                f.write(json.dumps(row) + "\n")
    summary = {
        "cache": str(path),
        "sft_seconds": round(sft["seconds"], 1),
        "sft_final_loss": round(sft["final_loss"], 4),
        "sft_steps": sft["steps"],
        "sft_examples": sft["examples"],
        "parameters": sft["parameters"],
        "samples": len(completions),
        "static_pass_rate": verdicts["pass"] / len(completions),
        "verdicts": dict(verdicts),
        "tokens_per_completion": sum(len(c.completion_ids) for c in completions) / len(completions),
        "truncated": sum(c.truncated for c in completions),
        "gen_s_per_completion": round(gen_s / len(completions), 2),
    }
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
