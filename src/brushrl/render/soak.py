"""Soak test of one renderer (what one actor does): memory over time and leftover processes.

    python -m brushrl.render.soak --n 500 [--every 25] [--gl llvmpipe] [--out soak.json]

Renders ``--n`` sketches in one ``Renderer`` (one browser, reused like an actor's): the benchmark
set's corpus sketches and the skeleton in turn, with a sketch that throws every 25th render and a
runaway ``while (true) {}`` (2 s deadline) every 50th, so the error and timeout paths are soaked
too. Every ``--every`` renders it records the browser's summed RSS (MiB), its process count, this
process's RSS and the statuses so far. After ``close()`` it waits up to 10 s and lists leftover
processes: any process still carrying the browser's marker or profile folder, and zombies below
this process.

Prints a table and writes JSON; exit code 1 when processes are left over. "Memory flat" is judged
from ``rss_slope_mb_per_100``: the least-squares slope of the browser's RSS over the second half of
the samples (the first half includes warm-up growth).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

import psutil

from brushrl.render.procs import MB

ERROR_SKETCH = "function setup() { createCanvas(600, 600, WEBGL); throw new Error('soak error'); }"
RUNAWAY_SKETCH = "function setup() { createCanvas(600, 600, WEBGL); while (true) {} }"


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope dy/dx (0.0 with fewer than 2 points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def leftovers(marker: str, profile: str | None) -> list[str]:
    """Processes that outlived the browser: carrying ``marker`` or the ``profile`` folder in their
    command line, or zombies below this process. One ``"pid status cmdline"`` line each."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if marker in cmd or (profile and profile in cmd):
            out.append(f"{p.pid} {p.info['status']} {cmd[:120]}")
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} zombie {p.name()}")
        except psutil.Error:
            continue
    return out


def soak(n: int, every: int, gl: str, size: int = 600, deadline_s: float = 120.0, on_render=None) -> dict:
    """Run the soak (see the module docstring) and return the report dict."""
    from brushrl.render.bench_sketches import HEAVY_SKETCHES, bench_sketches
    from brushrl.render.browser import Renderer

    sketches = [code for name, code in bench_sketches() if name.startswith("corpus/")] + [HEAVY_SKETCHES["skeleton"]]
    r = Renderer(gl_backend=gl)
    marker = r._marker
    profile = next((a.split("=", 1)[1] for a in r.procs.browser.cmdline() if a.startswith("--user-data-dir=")), None) \
        if r.procs else None
    samples, statuses = [], Counter()
    me = psutil.Process()
    t0 = time.monotonic()
    try:
        for i in range(1, n + 1):
            if i % 50 == 0:
                res = r.render(RUNAWAY_SKETCH, i, size, 2.0, 1)
            elif i % 25 == 0:
                res = r.render(ERROR_SKETCH, i, size, deadline_s, 1)
            else:
                res = r.render(sketches[i % len(sketches)], i, size, deadline_s, 1)
            statuses[res.status] += 1
            if i % every == 0 or i == n:
                u = r.usage()
                samples.append({"renders": i, "t_s": round(time.monotonic() - t0, 1), "browser_rss_mb": round(u.rss_mb, 1),
                                "browser_procs": len(r.procs.processes()) if r.procs else 0,
                                "python_rss_mb": round(me.memory_info().rss / MB, 1), "statuses": dict(statuses)})
            if on_render:
                on_render(i, n)
    finally:
        r.close()
    end = time.monotonic() + 10
    while (left := leftovers(marker, profile)) and time.monotonic() < end:
        time.sleep(0.5)
    half = samples[len(samples) // 2:]
    return {
        "n": n, "gl": gl, "size": size, "statuses": dict(statuses), "samples": samples,
        "rss_slope_mb_per_100": 100 * _slope([s["renders"] for s in half], [s["browser_rss_mb"] for s in half]),
        "python_rss_slope_mb_per_100": 100 * _slope([s["renders"] for s in half], [s["python_rss_mb"] for s in half]),
        "leftover_processes": left,
        "wall_s": round(time.monotonic() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="renders (default 500)")
    ap.add_argument("--every", type=int, default=25, help="renders between memory samples (default 25)")
    ap.add_argument("--gl", choices=["swiftshader", "llvmpipe"], default="llvmpipe")
    ap.add_argument("--out", default="soak_render.json", help="report file (default soak_render.json)")
    args = ap.parse_args(argv)
    if args.n < 1 or args.every < 1:
        print("--n and --every must be >= 1", file=sys.stderr)
        return 2
    with Progress(transient=True) as bar:
        task = bar.add_task("soak", total=args.n)
        report = soak(args.n, args.every, args.gl, on_render=lambda i, _n: bar.update(task, completed=i))
    t = Table(title=f"render soak: {args.n} renders in one browser ({args.gl}), pid {os.getpid()}")
    for col in ("renders", "t s", "browser RSS MiB", "browser procs", "python RSS MiB", "statuses"):
        t.add_column(col, justify="right")
    for s in report["samples"]:
        t.add_row(str(s["renders"]), f"{s['t_s']:.0f}", f"{s['browser_rss_mb']:.0f}", str(s["browser_procs"]),
                  f"{s['python_rss_mb']:.0f}", " ".join(f"{k}:{v}" for k, v in sorted(s["statuses"].items())))
    console = Console(width=None if sys.stdout.isatty() else 130)
    console.print(t)
    console.print(f"browser RSS slope (2nd half): {report['rss_slope_mb_per_100']:+.1f} MiB / 100 renders; "
                  f"python RSS slope {report['python_rss_slope_mb_per_100']:+.1f} MiB / 100 renders; "
                  f"leftover processes: {len(report['leftover_processes'])}")
    for line in report["leftover_processes"]:
        console.print("  " + line)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")
    return 1 if report["leftover_processes"] else 0


if __name__ == "__main__":
    sys.exit(main())
