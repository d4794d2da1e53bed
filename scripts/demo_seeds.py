"""Does the CPU demo learn? Train the demo config with several seeds and evaluate each, base vs final.

    python scripts/demo_seeds.py [--config configs/local.yaml] [--seeds 0 1 2] [--sft-seed 0]
        [--out docs/perf/demo_seeds.json] [--runs /tmp/demo-seeds] [--set KEY=VALUE ...]
        [--eval-args "--unseen 0"]

For each seed: ``brushrl train --config CONFIG --set run.seed=SEED --set policy.sft.seed=SFT_SEED``
(its own local Ray cluster; the RL seed draws the prompts, the sampler's seeds and the LoRA init;
every seed starts from the one warm start of ``--sft-seed``, the entry ``make demo`` caches, so the
runs differ by their RL alone; ``--sft-seed -1``: each seed its own warm start) and ``brushrl eval
RUN --checkpoint latest`` with the config's ``eval`` section (the same prompt set and seeds for every
run). Prints per seed and split the base and final mean reward and gate pass
rate with 95% intervals, the difference with its interval and whether it clears it, its part from
better paintings, the passing paintings' subject fidelity and diversity, and the wall seconds of
training (warm start included) and evaluation, as a table and as the README's markdown table;
writes them as JSON.

    python scripts/demo_seeds.py --report-only [--out docs/perf/demo_seeds.json] [--set KEY=VALUE ...]

trains and samples nothing: each run recorded in ``--out`` (its seeds and probes) is reported again
with ``brushrl eval RUN --report-only`` (this code's statistics on the same ``eval/samples.parquet``;
``--set`` goes to that command, e.g. a config field renamed since), and ``--out`` is rewritten with
the new splits and a ``reported_again`` record (commit, date); the training commit stays.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_seed(config: str, seed: int, runs: Path, sets: list[str], sft_seed: int | None = 0,
             eval_args: list[str] = ()) -> dict:
    """Train and evaluate one seed (``eval_args``: more arguments of ``brushrl eval``, e.g.
    ``--unseen 0``); returns its record (raises ``CalledProcessError`` on failure)."""
    name = f"seed{seed}"
    common = [sys.executable, "-m", "brushrl.cli"]
    sets = [*([f"policy.sft.seed={sft_seed}"] if sft_seed is not None else []), *sets]
    extra = [a for s in sets for a in ("--set", s)]
    log = (runs / f"{name}.log").open("w")
    t0 = time.monotonic()
    subprocess.run([*common, "train", "--config", config, "--name", name, "--output-dir", str(runs),
                    "--set", f"run.seed={seed}", *extra], check=True, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    t1 = time.monotonic()
    subprocess.run([*common, "eval", str(runs / name), "--checkpoint", "latest", *eval_args], check=True, stdout=log,
                   stderr=subprocess.STDOUT, cwd=ROOT)
    t2 = time.monotonic()
    report = json.loads((runs / name / "eval" / "eval.json").read_text())
    return {"seed": seed, "run": str(runs / name), "final": report["policies"][-1], "train_s": t1 - t0,
            "eval_s": t2 - t1, "samples_per_prompt": report["samples_per_prompt"], "splits": seed_splits(report)}


def seed_splits(report: dict) -> dict:
    """Per split of an ``eval.json`` (``brushrl.artifacts.eval_report``): the base's and the last
    policy's mean reward and gate pass rate (95% intervals), their differences and ``improved``, the
    paired difference where both pass and the difference's decomposition into fewer failures and
    better paintings (None for a report written before them)."""
    base, final = report["policies"][0], report["policies"][-1]
    paint = (report.get("paintings") or {}).get("results") or {}
    splits = {}
    for split, res in report["results"][final].items():
        if split.startswith("vs_"):
            continue
        vs = report["results"][final][f"vs_{base}"][split]
        splits[split] = {"base_reward": report["results"][base][split]["reward"], "final_reward": res["reward"],
                         "base_gate_pass": report["results"][base][split]["gate_pass"]["mean"],
                         "final_gate_pass": res["gate_pass"]["mean"], "diff": vs["reward"],
                         "base_gate_ci": report["results"][base][split]["gate_pass"],
                         "final_gate_ci": res["gate_pass"], "gate_diff": vs["gate_pass"], "improved": vs["improved"],
                         # absent (None) in an eval.json written before them
                         "reward_both_pass": vs.get("reward_both_pass"), "decomposition": vs.get("decomposition"),
                         # the passing paintings' subject fidelity and within-prompt diversity, base and final
                         **{k: [(paint.get(p) or {}).get(split, {}).get(k) for p in (base, final)]
                            for k in ("fidelity", "diversity")},
                         "gate_not_lower": res["gate_pass"]["mean"] >= report["results"][base][split]["gate_pass"]["mean"]}
    return splits


def _fmt(e: dict) -> str:
    """A mean with its 95% interval: ``0.393 [0.327, 0.454]``."""
    return f"{e['mean']:.3f} [{e['lo']:.3f}, {e['hi']:.3f}]"


def _ci(d: dict) -> str:
    """A difference with its 95% interval: ``+0.215 [+0.109, +0.319]``."""
    return f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def table(records: list[dict]) -> list[str]:
    """One line per seed and split."""
    fmt, ci = _fmt, _ci
    pair = lambda v, f: " -> ".join("-" if x is None or x.get("mean") is None else f.format(x["mean"]) for x in v)  # noqa: E731
    lines = [f"{'seed':<5}{'split':<10}{'base reward':<24}{'final reward':<24}{'final - base':<26}"
             f"{'gate pass':<14}{'better paintings':<26}{'fidelity':<14}{'diversity':<16}{'train s':>8}{'eval s':>8}"]
    for r in records:
        for split, s in r["splits"].items():
            diff = ci(s["diff"]) + (" *" if s["improved"] else "")
            gate = f"{s['base_gate_pass']:.0%} -> {s['final_gate_pass']:.0%}"
            better = ci(s["decomposition"]["better_paintings"]) if s.get("decomposition") else "-"
            fidelity = pair(s.get("fidelity") or [None, None], "{:.0%}")
            diversity = pair(s.get("diversity") or [None, None], "{:.3f}")
            lines.append(f"{r['seed']:<5}{split:<10}{fmt(s['base_reward']):<24}{fmt(s['final_reward']):<24}{diff:<26}"
                         f"{gate:<14}{better:<26}{fidelity:<14}{diversity:<16}{r['train_s']:>8.0f}{r['eval_s']:>8.0f}")
    lines.append("* the 95% interval of the difference lies above 0")
    return lines


def markdown(records: list[dict]) -> list[str]:
    """The README's demo table: one row per seed and split (the same figures as :func:`table`, the
    final policy's fidelity and diversity with their 95% intervals)."""
    fmt, ci = _fmt, _ci

    def pair(v: list, f: str) -> str:
        if not v or any(x is None or x.get("mean") is None for x in v):
            return "-"
        lo, hi = f.format(v[1]["lo"]), f.format(v[1]["hi"])
        return f"{f.format(v[0]['mean'])} → {f.format(v[1]['mean'])} [{lo}, {hi}]"

    lines = ["| seed | prompts | base reward | final reward | final − base (paired) | gate pass base → final "
             "| from better paintings | subject fidelity base → final | diversity base → final | train s | eval s |",
             "|" + " --- |" * 11]
    for r in records:
        for split, s in r["splits"].items():
            better = ci(s["decomposition"]["better_paintings"]) if s.get("decomposition") else "-"
            lines.append(f"| {r['seed']} | {split.replace('_', '-')} | {fmt(s['base_reward'])} | {fmt(s['final_reward'])} "
                         f"| {ci(s['diff'])}{' ✓' if s['improved'] else ''} "
                         f"| {s['base_gate_pass']:.0%} → {s['final_gate_pass']:.0%} | {better} "
                         f"| {pair(s.get('fidelity'), '{:.0%}')} | {pair(s.get('diversity'), '{:.3f}')} "
                         f"| {r['train_s']:.0f} | {r['eval_s']:.0f} |")
    return lines


def report_again(record: dict, sets: list[str]) -> dict:
    """``record`` (one seed or probe of the JSON) with its splits re-read after ``brushrl eval RUN
    --report-only`` (raises ``CalledProcessError`` when that fails)."""
    extra = [a for s in sets for a in ("--set", s)]
    subprocess.run([sys.executable, "-m", "brushrl.cli", "eval", record["run"], "--report-only", *extra], check=True,
                   stdout=subprocess.DEVNULL, cwd=ROOT)
    report = json.loads((Path(record["run"]) / "eval" / "eval.json").read_text())
    return {**record, "splits": seed_splits(report)}


def _commit() -> str:
    """This checkout's short commit, recorded with the figures."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=ROOT).stdout.strip()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/local.yaml")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sft-seed", type=int, default=0, help="warm start of every seed (-1: each its own)")
    ap.add_argument("--runs", default="/tmp/demo-seeds", help="parent folder of the runs (default: %(default)s)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more training overrides")
    ap.add_argument("--eval-args", default="", help="more arguments of `brushrl eval`, one string "
                    "(e.g. \"--unseen 0\": the README's table has the held-out and training splits only)")
    ap.add_argument("--out", default="docs/perf/demo_seeds.json")
    ap.add_argument("--report-only", action="store_true",
                    help="train nothing: report the runs recorded in --out again from their eval samples")
    args = ap.parse_args(argv)
    if args.report_only:
        record = json.loads(Path(args.out).read_text())
        record["seeds"] = [report_again(r, args.set) for r in record["seeds"]]
        record["probes"] = [report_again(r, args.set) for r in record.get("probes", [])]
        record["reported_again"] = {"commit": _commit(), "date": time.strftime("%Y-%m-%d"),
                                    "why": "differences paired by (prompt, sample): the same sampler and render seeds"}
        print("\n".join(table(record["seeds"] + record["probes"])))
        print("\n".join(markdown(record["seeds"] + record["probes"])))
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
        return record
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    records = []
    for seed in args.seeds:
        records.append(run_seed(args.config, seed, runs, args.set, None if args.sft_seed < 0 else args.sft_seed,
                                args.eval_args.split()))
        print("\n".join(table(records[-1:])[1:-1]), flush=True)
    record = {"config": args.config, "overrides": args.set, "eval_args": args.eval_args, "sft_seed": args.sft_seed,
              "commit": _commit(), "seeds": records}
    print("\n".join(table(records)))
    print("\n".join(markdown(records)))
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
