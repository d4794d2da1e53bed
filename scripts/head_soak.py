"""Start a private Ray head N times in a row under CPU load and check that every start that
returned stays alive past the raylet's abort window (issue 38: the job API answered while the
raylet could still abort ~15-17 s later).

Each round: ``PrivateHead.start()`` (returns once ``ray job list`` answers and the node's agent
reports raylet and GCS alive), then ``--hold`` seconds, then the agent's ``/api/healthz`` and
``ray job list`` again, then stop. ``--busy K`` starts K busy-loop processes for the whole soak
(on top of whatever else the machine runs; the 1-minute load average is recorded per round).

Prints a table and writes JSON (``--out``, default docs/perf/head_soak.json). Exit 1 when any
round failed.

    .venv/bin/python scripts/head_soak.py --rounds 10 --busy 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

from brushrl.ray_setup import PrivateHead, node_healthy


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10, help="head starts (default: %(default)s)")
    p.add_argument("--hold", type=float, default=25.0,
                   help="seconds each head is kept before the second check, past the ~17 s abort window (default: %(default)s)")
    p.add_argument("--busy", type=int, default=2, help="busy-loop processes run throughout (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("docs/perf/head_soak.json"))
    args = p.parse_args(argv)

    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for s in spinners:
        s.start()
    rounds = []
    work = Path(tempfile.mkdtemp(prefix="head_soak"))
    try:
        for i in range(1, args.rounds + 1):
            head = PrivateHead(work / f"head{i}.log", num_cpus=1)
            t0 = time.monotonic()
            row = {"round": i, "load_1m_at_start": round(os.getloadavg()[0], 1)}
            try:
                head.start()
                row["ready_s"] = round(time.monotonic() - t0, 1)
                time.sleep(args.hold)
                row["healthy_after_hold"] = node_healthy(head.agent_port)
                row["job_api_after_hold"] = head.jobs("list").returncode == 0
                row["head_process_alive"] = head.proc is not None and head.proc.poll() is None
            except Exception as exc:  # noqa: BLE001 - a failed round is recorded, the soak goes on
                row["error"] = f"{type(exc).__name__}: {str(exc)[-300:]}"
            finally:
                head.stop()
            row["ok"] = "error" not in row and all(row[k] for k in ("healthy_after_hold", "job_api_after_hold",
                                                                       "head_process_alive"))
            rounds.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for s in spinners:
            s.terminate()
    ok = sum(r["ok"] for r in rounds)
    report = {"rounds": rounds, "ok": ok, "of": len(rounds), "hold_s": args.hold, "busy_loops": args.busy,
              "cores": os.cpu_count(), "command": "python scripts/head_soak.py " + " ".join(argv or sys.argv[1:])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{'round':>5} {'load':>5} {'ready s':>8} {'alive after hold':>17}")
    for r in rounds:
        print(f"{r['round']:>5} {r['load_1m_at_start']:>5} {r.get('ready_s', '-'):>8} {str(r['ok']):>17}")
    print(f"{ok}/{len(rounds)} heads alive {args.hold:.0f} s after start; wrote {args.out}")
    return 0 if ok == len(rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
