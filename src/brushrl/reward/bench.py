"""Reward benchmark: rewards/s per scorer and each stage's share of one scored group's latency.

    python -m brushrl.reward.bench [--group-size 4] [--judge-url URL] [--hpsv3-python PY
        --hpsv3-config YAML --hpsv3-checkpoint FILE] [--json out.json]

One group of G corpus sketches goes through the stages the producer runs: static gate, render
(one local Chromium, sequential), runtime gate, then each configured scorer on the group's PNGs
(``pool_similarity`` always; the judge when ``--judge-url`` names an OpenAI-compatible endpoint;
HPSv3 when ``--hpsv3-python`` names the hpsv3 env, run there in a subprocess that reports its own
load and scoring times). Scorers are timed one after another, so each one's rewards/s is its own;
in training they run concurrently and the group waits for the slowest. Prints a table and writes
JSON. Timings need a quiet machine to mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HPS_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from brushrl.reward.hpsv3 import HPSv3Scorer
cfg = json.loads(sys.argv[1]); files = sys.argv[2:]
scorer = HPSv3Scorer(cfg)
t1 = time.perf_counter()
out = scorer.score_group([open(f, "rb").read() for f in files], "", 0)
t2 = time.perf_counter()
print("RESULT" + json.dumps({"load_s": t1 - t0, "score_s": t2 - t1, "values": [o.value for o in out]}))
"""


def _hpsv3(pngs: list[bytes], python: str, config: str | None, checkpoint: str | None, device: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="brushrl-bench-") as tmp:
        files = []
        for i, png in enumerate(pngs):
            path = Path(tmp) / f"{i}.png"
            path.write_bytes(png)
            files.append(str(path))
        cfg = {"config_path": config, "checkpoint_path": checkpoint, "device": device, "batch_size": 8}
        src = str(Path(__file__).resolve().parents[2])
        proc = subprocess.run([python, "-c", _HPS_SNIPPET, json.dumps(cfg), *files], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": src})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    if proc.returncode or not lines:
        raise RuntimeError(f"hpsv3 bench subprocess failed: {proc.stderr[-2000:]}")
    return json.loads(lines[0][len("RESULT"):])


def run(args: argparse.Namespace) -> dict:
    """Run the benchmark; returns the JSON record (see the module docstring)."""
    from brushrl.config import GateConfig, JudgeConfig, PoolScorerConfig, RenderConfig
    from brushrl.corpus import build_corpus
    from brushrl.gate import check_runtime, check_static
    from brushrl.pool import ReferencePool
    from brushrl.render.browser import Renderer
    from brushrl.reward.pool_scorer import PoolSimilarityScorer

    gate_cfg, render_cfg, pool_cfg = GateConfig(), RenderConfig(), PoolScorerConfig(path=args.pool)
    corpus = build_corpus(2, seed=0)[1::2][: args.group_size]
    replies = ["```js\n" + c.code + "\n```" for c in corpus]
    stages: dict[str, float] = {}
    scorers: dict[str, dict] = {}

    t = time.perf_counter()
    codes = [check_static(r, gate_cfg, render_cfg.canvas_size, replay=render_cfg.mode == "replay")[0] for r in replies]
    stages["static_gate"] = time.perf_counter() - t

    renderer = Renderer.from_config(render_cfg)
    try:
        t = time.perf_counter()
        renders = [renderer.render(c, seed=0, size=render_cfg.canvas_size, deadline_s=args.render_deadline,
                                   attempts=1) for c in codes]
        stages["render"] = time.perf_counter() - t
    finally:
        renderer.close()
    t = time.perf_counter()
    verdicts = [check_runtime(r, gate_cfg, render_cfg.canvas_size) for r in renders]
    stages["runtime_gate"] = time.perf_counter() - t
    pngs = [r.png for r, v in zip(renders, verdicts) if v.passed]
    if not pngs:
        raise RuntimeError(f"no render passed the gate: {[v.verdict for v in verdicts]}")

    pool = ReferencePool(pool_cfg.path)
    t = time.perf_counter()
    scorer = PoolSimilarityScorer(pool.entries, pool_cfg.tiers, pool_cfg.copy_min_corr)
    load = time.perf_counter() - t
    refs = [e.id for e in pool.sample(list(pool_cfg.tiers), pool_cfg.refs_per_tier, 0)]
    t = time.perf_counter()
    scorer.score_many(pngs, refs)
    scorers["pool_similarity"] = {"load_s": load, "score_s": time.perf_counter() - t}

    if args.judge_url:
        from brushrl.reward.judge import OpenAIJudgeBackend, PairwiseJudge

        jcfg = JudgeConfig(base_url=args.judge_url, model=args.judge_model)
        t = time.perf_counter()
        judge = PairwiseJudge(pool, OpenAIJudgeBackend(jcfg), jcfg)
        load = time.perf_counter() - t
        t = time.perf_counter()
        out = judge.score_many(pngs, 0)
        scorers["judge"] = {"load_s": load, "score_s": time.perf_counter() - t,
                            "resolved": sum(o.resolved for o in out)}
    if args.hpsv3_python:
        res = _hpsv3(pngs, args.hpsv3_python, args.hpsv3_config, args.hpsv3_checkpoint, args.hpsv3_device)
        scorers["hpsv3"] = {"load_s": res["load_s"], "score_s": res["score_s"]}

    for name, rec in scorers.items():
        rec["rewards_per_s"] = len(pngs) / rec["score_s"] if rec["score_s"] else float("inf")
        stages[f"score:{name}"] = rec["score_s"]
    total = sum(stages.values())
    return {
        "group_size": len(replies), "scored": len(pngs), "total_s": total,
        "stages": {k: {"s": v, "share": v / total} for k, v in stages.items()},
        "scorers": scorers,
        "note": "sequential timing on this machine; scorers run concurrently in training",
    }


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    from brushrl.config import JudgeConfig

    p = argparse.ArgumentParser(prog="python -m brushrl.reward.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group-size", type=int, default=4, help="G: corpus sketches in the group")
    p.add_argument("--pool", default="pools/starter", help="reference pool folder")
    p.add_argument("--render-deadline", type=float, default=120.0, help="seconds per render (one attempt)")
    p.add_argument("--judge-url", help="OpenAI-compatible endpoint root (with /v1); omit to skip the judge")
    p.add_argument("--judge-model", default=JudgeConfig().model, help="model name sent to the endpoint")
    p.add_argument("--hpsv3-python", help="Python of the hpsv3 env; omit to skip HPSv3")
    p.add_argument("--hpsv3-config", help="hpsv3 model YAML (default: the package's)")
    p.add_argument("--hpsv3-checkpoint", help="HPSv3 weights (default: the hub's)")
    p.add_argument("--hpsv3-device", default="cpu")
    p.add_argument("--json", type=Path, default=Path("reward_bench.json"), help="where to write the JSON record")
    args = p.parse_args(argv)
    console = Console()
    with console.status("rendering and scoring one group ..."):
        rec = run(args)
    table = Table(title=f"one scored group: G={rec['group_size']}, {rec['scored']} scored, {rec['total_s']:.2f} s")
    for col in ("stage", "seconds", "share"):
        table.add_column(col)
    for name, st in rec["stages"].items():
        table.add_row(name, f"{st['s']:.3f}", f"{st['share']:.1%}")
    console.print(table)
    t2 = Table(title="scorers")
    for col in ("scorer", "load s", "score s", "rewards/s"):
        t2.add_column(col)
    for name, sc in rec["scorers"].items():
        t2.add_row(name, f"{sc['load_s']:.2f}", f"{sc['score_s']:.3f}", f"{sc['rewards_per_s']:.2f}")
    console.print(t2)
    args.json.write_text(json.dumps(rec, indent=2))
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
