"""``brushrl bench text``: does the text scan find stroke lettering, and does it leave honest paintings alone?

Renders through the default path (``render.mode: replay``, a ``TextReader`` of
``render.text_scan_side``), seed 0, 600x600, and judges with the runtime gate's rule
(``brushrl.gate.runtime.legible``, ``gate.text_min_confidence`` / ``gate.text_min_chars``):

* text: ``tests/fixtures/text/*.js`` (letters built from allowed brush polygons);
* honest: the ``brushrl bench replay --set all`` sketches (the render benchmark's 20, every corpus
  base's canonical variant, the honest sandbox fixtures) and the starter pool's PNGs (read as
  they are, not rendered).

Prints, per set, how many paintings were read, how many read as text (which, and what was read)
and the reading's seconds (p50 / p90), and writes JSON (``--out``). Target: every text painting
flagged, no honest one.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sketches", type=int, default=0, help="only the first N honest sketches (0: all)")
    p.add_argument("--isolation", choices=("netns", "none"), default="netns",
                   help="render.network_isolation of the renderer (default netns)")
    p.add_argument("--out", default="text_bench.json", help="JSON report path")


def run(args: argparse.Namespace) -> int:
    from brushrl.config import GateConfig, RenderConfig
    from brushrl.gate.runtime import legible
    from brushrl.render.browser import Renderer
    from brushrl.render.replay_bench import sketch_set
    from brushrl.render.text import TextReader
    from brushrl.stats import quantile

    gate, t0 = GateConfig(), time.monotonic()
    reader = TextReader(RenderConfig().text_scan_side)
    sets: dict[str, list[tuple[str, str]]] = {
        "text": [(p.name, p.read_text()) for p in sorted((ROOT / "tests" / "fixtures" / "text").glob("*.js"))],
        "honest": sketch_set("all")[: args.sketches or None],
    }
    rows = []
    with Renderer(network_isolation=args.isolation, text_reader=reader) as r:
        for kind, items in sets.items():
            for i, (name, code) in enumerate(items, 1):
                res = r.render(code, 0, 600, 120.0, 1)
                words = legible(res.text, gate.text_min_confidence, gate.text_min_chars)
                rows.append({"set": kind, "name": name, "status": res.status, "read": res.text,
                             "text_s": res.phases.get("text"), "flagged": bool(words)})
                print(f"[{kind} {i}/{len(items)}] {name}: {res.status} read {res.text} -> "
                      f"{'TEXT' if words else 'no text'}", flush=True)
    for png in sorted((ROOT / "pools" / "starter").glob("*.png")):
        t = time.monotonic()
        found = reader.read(png.read_bytes())
        rows.append({"set": "pool", "name": png.name, "status": "ok", "read": found, "text_s": time.monotonic() - t,
                     "flagged": bool(legible(found, gate.text_min_confidence, gate.text_min_chars))})
    report = {"command": f"brushrl bench text --sketches {args.sketches}", "reader": reader.version,
              "min_confidence": gate.text_min_confidence, "min_chars": gate.text_min_chars, "sets": {}, "rows": rows}
    print(f"\n{'set':8s} {'read':>5s} {'flagged':>8s} {'p50 s':>7s} {'p90 s':>7s}  flagged")
    for kind in ("text", "honest", "pool"):
        read = [x for x in rows if x["set"] == kind and x["read"] is not None]
        secs = [x["text_s"] for x in read if x["text_s"] is not None]
        flagged = [x["name"] for x in read if x["flagged"]]
        report["sets"][kind] = {"read": len(read), "flagged": len(flagged), "names": flagged,
                                "text_p50_s": quantile(secs, 0.5), "text_p90_s": quantile(secs, 0.9)}
        print(f"{kind:8s} {len(read):5d} {len(flagged):8d} {quantile(secs, 0.5) or 0:7.3f} "
              f"{quantile(secs, 0.9) or 0:7.3f}  {', '.join(flagged[:6])}")
    report["seconds"] = time.monotonic() - t0
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out} ({report['seconds']:.0f} s)")
    s = report["sets"]
    return 0 if s["text"]["flagged"] == s["text"]["read"] and not s["honest"]["flagged"] and not s["pool"]["flagged"] else 1
