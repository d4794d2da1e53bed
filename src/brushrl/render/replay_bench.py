"""``brushrl bench replay``: what record-and-replay costs, and whether it paints the same.

Renders each sketch of a set through three paths, interleaved sketch by sketch (so that load on
the machine falls on all three alike), each path in its own warm ``Renderer`` (llvmpipe, spare
pages on, one warm-up render each, no render cache), seed 0, 600x600:

* ``replay``: the default (``render.mode: replay``): record page + log validation + replay page
  (``brushrl.render.calllog``);
* ``direct``: the sketch's own canvas captured under the in-page harness (``render.mode: direct``);
* ``bare``: the sketch in a page without the harness, the path before the in-page wrapping
  (benchmark only: never scored).

Reports per path: renders ok, wall p50 / p90 / sum (``RenderResult.wall_s``: every page, the
validation and the PNG decode), the same over the heaviest sketches apart (the ``--heavy`` with
the largest direct wall), replay's phases (record page, validation, replay page); and the pixel
comparison of replay against direct for every sketch both painted: how many are identical, the
largest share of differing pixels, and which differ. Sets: ``bench`` (the render benchmark's 20
sketches), ``all`` (those + every corpus base's canonical variant, which the starter pool is
rendered from, + the honest sandbox fixtures).

Prints a table and writes JSON (``--out``). Numbers are only comparable on a quiet machine.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path

PATHS = ("replay", "direct", "bare")


def sketch_set(name: str) -> list[tuple[str, str]]:
    """``(name, code)`` of the set ``bench`` or ``all`` (module docstring)."""
    from brushrl.corpus import BASES, make_variant
    from brushrl.render.bench_sketches import bench_sketches

    items = list(bench_sketches())
    if name == "all":
        seen = {n for n, _ in items}
        items += [(f"corpus/{b}", make_variant(b, 0).code) for b in BASES if f"corpus/{b}" not in seen]
        fixtures = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "sandbox"
        if (fixtures / "labels.json").is_file():
            labels = json.loads((fixtures / "labels.json").read_text())
            items += [(f"fixture/{n}", (fixtures / n).read_text()) for n, v in sorted(labels.items())
                      if not v.get("hostile")]
    return items


def _changed(a: bytes, b: bytes) -> float:
    """Share of pixels whose RGBA differs between two PNGs of one size."""
    import numpy as np
    from PIL import Image

    x = np.asarray(Image.open(io.BytesIO(a)).convert("RGBA")).astype(np.int16)
    y = np.asarray(Image.open(io.BytesIO(b)).convert("RGBA")).astype(np.int16)
    return float((np.abs(x - y).max(-1) > 0).mean()) if x.shape == y.shape else 1.0


def _figures(walls: list[float]) -> dict:
    from brushrl.stats import quantile

    return {"n": len(walls), "wall_p50_s": quantile(walls, 0.5), "wall_p90_s": quantile(walls, 0.9),
            "wall_sum_s": sum(walls)}


def run_bench(items: list[tuple[str, str]], heavy: int, isolation: str, size: int = 600,
              deadline_s: float = 120.0, progress=print) -> dict:
    """Render ``items`` through the three paths; returns the report (module docstring)."""
    from brushrl.render.browser import Renderer
    from brushrl.stats import quantile

    renderers = {p: Renderer(gl_backend="llvmpipe", network_isolation=isolation, mode=p) for p in PATHS}
    rows = []
    try:
        for p, r in renderers.items():  # warm-up: browser caches, first WebGL context
            r.render(items[0][1], 0, size, deadline_s)
        for i, (name, code) in enumerate(items):
            row = {"sketch": name}
            for p, r in renderers.items():
                res = r.render(code, 0, size, deadline_s)
                row[p] = {"status": res.status, "wall_s": res.wall_s, "phases": res.phases,
                          "rejected": res.rejected, "error": (res.js_errors or [""])[0][:200], "png": res.png}
            both = row["replay"]["png"] and row["direct"]["png"]
            row["changed"] = _changed(row["replay"]["png"], row["direct"]["png"]) if both else None
            for p in PATHS:
                row[p].pop("png")
            rows.append(row)
            progress(f"[{i + 1}/{len(items)}] {name}: " + "  ".join(
                f"{p} {row[p]['status']} {row[p]['wall_s']:.2f}s" for p in PATHS)
                + (f"  changed {row['changed']:.4f}" if row["changed"] is not None else ""))
    finally:
        for r in renderers.values():
            r.close()
    ok = [r for r in rows if all(r[p]["status"] == "ok" for p in PATHS)]
    heaviest = sorted(ok, key=lambda r: -r["direct"]["wall_s"])[:heavy]
    compared = [r for r in rows if r["changed"] is not None]
    replay_phases = {}
    for key in ("page", "load", "sketch", "validate", "replay_page", "replay_load", "replay_sketch"):
        vals = [r["replay"]["phases"][key] for r in ok if key in r["replay"]["phases"]]
        replay_phases[key] = quantile(vals, 0.5) if vals else None
    return {
        "sketches": len(rows),
        "all_ok": len(ok),
        "statuses": {p: {s: sum(r[p]["status"] == s for r in rows) for s in {r[p]["status"] for r in rows}}
                     for p in PATHS},
        "paths": {p: _figures([r[p]["wall_s"] for r in ok]) for p in PATHS},
        "heaviest": {"sketches": [r["sketch"] for r in heaviest],
                     **{p: _figures([r[p]["wall_s"] for r in heaviest]) for p in PATHS}},
        "replay_phase_p50_s": replay_phases,
        "pixels": {"compared": len(compared), "identical": sum(r["changed"] == 0 for r in compared),
                   "max_changed_share": max((r["changed"] for r in compared), default=None),
                   "differ": {r["sketch"]: r["changed"] for r in compared if r["changed"]}},
        "rows": rows,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", choices=("bench", "all"), default="all", help="sketch set (default all)")
    p.add_argument("--sketches", type=int, default=0, help="only the first N sketches (0: all)")
    p.add_argument("--heavy", type=int, default=8, help="how many of the heaviest sketches to report apart")
    p.add_argument("--isolation", choices=("netns", "none"), default="netns",
                   help="render.network_isolation of the three renderers (default netns)")
    p.add_argument("--out", default="replay_bench.json", help="JSON report path")


def run(args: argparse.Namespace) -> int:
    items = sketch_set(args.set)
    if args.sketches:
        items = items[: args.sketches]
    t0 = time.monotonic()
    report = run_bench(items, args.heavy, args.isolation)
    report["command"] = f"brushrl bench replay --set {args.set} --sketches {args.sketches} --heavy {args.heavy}"
    report["seconds"] = time.monotonic() - t0
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"\n{'path':8s} {'ok':>4s} {'p50 s':>7s} {'p90 s':>7s} {'sum s':>8s} | heaviest {args.heavy}: "
          f"{'p50 s':>7s} {'sum s':>8s}")
    for p in PATHS:
        a, h = report["paths"][p], report["heaviest"][p]
        print(f"{p:8s} {a['n']:4d} {a['wall_p50_s']:7.2f} {a['wall_p90_s']:7.2f} {a['wall_sum_s']:8.1f} | "
              f"{'':>9s}{h['wall_p50_s']:7.2f} {h['wall_sum_s']:8.1f}")
    px = report["pixels"]
    print(f"pixels: {px['identical']}/{px['compared']} replays identical to the direct path; "
          f"largest differing share {px['max_changed_share']}; differ: {px['differ'] or 'none'}")
    print(f"replay phases p50 (s): " + ", ".join(f"{k} {v:.3f}" for k, v in report['replay_phase_p50_s'].items()
                                                  if v is not None))
    print(f"statuses: {report['statuses']}\nwrote {args.out} ({report['seconds']:.0f} s)")
    return 0
