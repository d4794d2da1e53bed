"""Reward report of a run directory: what each component paid, what failed and why, where time went.

    python -m brushrl.reward.report RUN_DIR [--json out.json]

Reads ``RUN_DIR/rollouts.parquet`` (one row per sample) and ``RUN_DIR/metrics.jsonl`` (one record
per learner step) as ``brushrl train`` writes them and prints, as tables, and writes as JSON
(default ``RUN_DIR/reward_report.json``):

* ``components``: per reward component (``reward_<name>`` columns: gate, length and each scorer),
  over samples that passed the gate: count with a value, count None, mean, min, max;
* ``none``: samples whose total reward is None, by ``none_cause``; ``scorer_none``: per scorer, the
  samples it could not score, by cause (``reward_causes``, weighted or not);
* ``gate``: samples per gate verdict;
* ``judge``: comparisons resolved and dropped (summed ``judge_resolved`` / ``judge_dropped`` of
  ``reward_raw``), and dropped ones by cause (``judge_dropped:<cause>``);
* ``steps``: per step, its wall time and each stage's (``time/*_s``: generation, render, scoring,
  learning, sync, and each scorer's own ``time/score/<name>_s``) with the step's mean rewards and
  the weight-sync canary's numbers (``sync``: ``logprob_gap``, ``logprob_gap_max``,
  ``adapter_shift``, ``engine_shift``, nats/token, ``brushrl.orchestrator.sync_check``; None for a
  step that did not sync or a run without the check).

Stage seconds are summed over a step's groups, so concurrent groups can add up past wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def summarize_run(run_dir: str | Path) -> dict:
    """The report record of ``run_dir`` (module docstring).

    Raises:
        FileNotFoundError: ``rollouts.parquet`` or ``metrics.jsonl`` is missing (the message names it).
    """
    import pandas as pd

    run_dir = Path(run_dir)
    for name in ("rollouts.parquet", "metrics.jsonl"):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(f"{run_dir / name}: not found (is {run_dir} a brushrl run directory?)")
    rows = pd.read_parquet(run_dir / "rollouts.parquet")
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    passed = rows[rows.gate_verdict == "pass"]
    components = {}
    for col in sorted(c for c in rows.columns if c.startswith("reward_") and c not in ("reward_raw", "reward_causes")):
        vals = passed[col].dropna().astype(float)
        components[col.removeprefix("reward_")] = {
            "n": int(vals.size), "none": int(passed[col].isna().sum()),
            "mean": float(vals.mean()) if vals.size else None,
            "min": float(vals.min()) if vals.size else None, "max": float(vals.max()) if vals.size else None,
        }
    scorer_none: dict[str, Counter] = {}
    judge = Counter()
    for causes, raw in zip(rows.get("reward_causes", []), rows.get("reward_raw", [])):
        for scorer, cause in json.loads(causes or "{}").items():
            scorer_none.setdefault(scorer, Counter())[cause] += 1
        for key, value in json.loads(raw or "{}").items():
            if key in ("judge_resolved", "judge_dropped") or key.startswith("judge_dropped:"):
                judge[key.removeprefix("judge_")] += int(value)
    steps = []
    for m in metrics:
        times = {k.removeprefix("time/").removesuffix("_s"): v for k, v in m.items() if k.startswith("time/")}
        rewards = {k.removeprefix("reward/"): v for k, v in m.items() if k.startswith("reward/")}
        sync = {k.removeprefix("sync/"): v for k, v in m.items() if k.startswith("sync/")}
        steps.append({"step": m["step"], "time_s": times, "reward": rewards, "samples": m.get("samples"),
                      "samples_none": m.get("samples/none"), "sync": sync or None})
    return {
        "run_dir": str(run_dir),
        "samples": int(len(rows)),
        "gate": {str(k): int(v) for k, v in rows.gate_verdict.value_counts().items()},
        "components": components,
        "none": {str(k): int(v) for k, v in rows.none_cause.dropna().value_counts().items()},
        "total_none": int(rows.total.isna().sum()),
        "scorer_none": {k: dict(v) for k, v in scorer_none.items()},
        "judge": dict(judge),
        "steps": steps,
    }


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def _fmt_nats(sync: dict | None, key: str) -> str:
    """A canary number in scientific notation (healthy fp32 gaps are ~1e-7), ``-`` when absent."""
    v = (sync or {}).get(key)
    return "-" if v is None else f"{v:.1e}"


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    p = argparse.ArgumentParser(prog="python -m brushrl.reward.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path, help="a run directory written by brushrl train")
    p.add_argument("--json", type=Path, help="where to write the JSON record (default RUN_DIR/reward_report.json)")
    args = p.parse_args(argv)
    console = Console(width=150)
    try:
        rec = summarize_run(args.run_dir)
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    t = Table(title=f"{rec['samples']} samples; gate {rec['gate']}")
    for col in ("component", "n", "None", "mean", "min", "max"):
        t.add_column(col)
    for name, c in rec["components"].items():
        t.add_row(name, str(c["n"]), str(c["none"]), _fmt(c["mean"]), _fmt(c["min"]), _fmt(c["max"]))
    console.print(t)
    console.print(f"total None: {rec['total_none']} by cause {rec['none']}; scorer None by cause {rec['scorer_none']}")
    console.print(f"judge comparisons: {rec['judge']}")
    order = ["step", "gen", "render", "score", "learn", "sync", "wait"]
    seen = {k for s in rec["steps"] for k in s["time_s"]} - {"update"}  # update_s repeats learn_s
    stages = [k for k in order if k in seen] + sorted(seen - set(order))
    t = Table(title="seconds per step and stage (stage seconds summed over the step's groups)")
    for col in ("#", *[f"{k} s" for k in stages], "reward", "sync gap", "gap max", "shift"):
        t.add_column(col)
    for s in rec["steps"]:
        t.add_row(str(s["step"]), *(_fmt(s["time_s"].get(k)) for k in stages), _fmt(s["reward"].get("mean")),
                  *(_fmt_nats(s["sync"], k) for k in ("logprob_gap", "logprob_gap_max", "adapter_shift")))
    console.print(t)
    out = args.json or args.run_dir / "reward_report.json"
    out.write_text(json.dumps(rec, indent=2))
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
