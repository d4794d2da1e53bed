"""Render timing and determinism benchmark (numbers go to docs/perf/render.md).

    python -m brushrl.render.bench --sketch heavy --repeat 5 [--gl llvmpipe] [--fresh] [--flag=--x]
    python -m brushrl.render.bench --sketch heavy --repeat 8 --actors 2     # RenderPool on local Ray

Renders one sketch ``--repeat`` times with the same seed in one ``Renderer`` (``--fresh``: a new
browser each time) and prints, per render, wall and in-page seconds and the pixel difference against
the first render (share of pixels with any channel different, largest channel difference). With
``--actors N`` the renders go through a ``RenderPool`` of N actors on a local Ray and the total wall
time is printed. ``--gl swiftshader-gpu2d`` is SwiftShader without ``--disable-gpu`` (Chromium's 2D
canvas on the GPU process), kept for comparison.
"""

from __future__ import annotations

import argparse
import io
import json
import time

import numpy as np
from PIL import Image

#: The sketch skeleton the policy is taught: one filled watercolour shape.
SKELETON = """async function setup() { createCanvas(600, 600, WEBGL); brush.scaleBrushes(3); angleMode(DEGREES); noLoop(); }
function draw() { translate(-width / 2, -height / 2); background("#fdf8ee"); brush.noStroke(); brush.fill("#e08a72", 200); brush.fillBleed(0.25); brush.fillTexture(0.5, 0.4); brush.beginShape(0.5); brush.vertex(300, 100); brush.vertex(420, 300); brush.vertex(300, 480); brush.vertex(180, 300); brush.endShape(true); }
"""

#: A heavier painting: 5 petals painted 3 times over, a centre, 2 leaves and a stem (21 filled
#: layered shapes), in the whitelist's methods only.
HEAVY = """async function setup() { createCanvas(600, 600, WEBGL); brush.scaleBrushes(3); angleMode(DEGREES); noLoop(); }
function petal(a, r, w, col, op) {
  brush.fill(col, op); brush.fillBleed(0.25); brush.fillTexture(0.5, 0.4);
  brush.beginShape(0.6);
  brush.vertex(300, 300);
  brush.vertex(300 + r * 0.6 * cos(a - w), 300 + r * 0.6 * sin(a - w));
  brush.vertex(300 + r * cos(a), 300 + r * sin(a));
  brush.vertex(300 + r * 0.6 * cos(a + w), 300 + r * 0.6 * sin(a + w));
  brush.endShape(true);
}
function draw() {
  translate(-width / 2, -height / 2); background("#fdf8ee"); brush.noStroke();
  brush.fill("#5f8a4a", 210); brush.beginShape(0.3); brush.vertex(296, 300); brush.vertex(306, 300); brush.vertex(312, 580); brush.vertex(300, 580); brush.endShape(true);
  brush.fill("#6f9a52", 200); brush.beginShape(0.7); brush.vertex(305, 470); brush.vertex(420, 420); brush.vertex(470, 460); brush.vertex(380, 500); brush.endShape(true);
  brush.fill("#6f9a52", 190); brush.beginShape(0.7); brush.vertex(300, 500); brush.vertex(190, 450); brush.vertex(140, 490); brush.vertex(230, 530); brush.endShape(true);
  const cols = ["#e08a72", "#d46a6a", "#f0a98a"];
  for (let layer = 0; layer < 3; layer++) {
    for (let i = 0; i < 5; i++) petal(i * 72 + layer * 9, 220 - layer * 30, 24 - layer * 3, cols[layer], 200 - layer * 10);
  }
  brush.fill("#f2c14e", 230); brush.circle(300, 300, 28, 0.4);
}
"""

SKETCHES = {"skeleton": SKELETON, "heavy": HEAVY}


def pixel_diff(png_a: bytes, png_b: bytes) -> tuple[float, int]:
    """(share of pixels whose RGBA differs in any channel, largest channel difference 0-255)."""
    a = np.asarray(Image.open(io.BytesIO(png_a)).convert("RGBA"), dtype=np.int16)
    b = np.asarray(Image.open(io.BytesIO(png_b)).convert("RGBA"), dtype=np.int16)
    d = np.abs(a - b)
    return float((d.max(axis=-1) > 0).mean()), int(d.max())


def _pool(args) -> None:
    import ray

    from brushrl.config import RenderConfig
    from brushrl.ray_setup import start_local_ray
    from brushrl.render.pool import RenderPool

    start_local_ray(num_cpus=4, log_to_driver=False)
    pool = RenderPool(RenderConfig(num_actors=args.actors, gl_backend=args.gl, deadline_s=300, attempts=1, cache_entries=0))
    pool.ping()
    t = time.monotonic()
    results = pool.render_many([(SKETCHES[args.sketch], args.seed)] * args.repeat)
    total = time.monotonic() - t
    pool.shutdown()
    ray.shutdown()
    print(json.dumps({"actors": args.actors, "renders": args.repeat, "total_s": round(total, 2),
                      "per_min": round(60 * args.repeat / total, 1), "statuses": sorted({r.status for r in results}),
                      "sketch": args.sketch, "gl": args.gl}))


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    from brushrl.render.browser import GL_ARGS, Renderer

    GL_ARGS.setdefault("swiftshader-gpu2d", tuple(a for a in GL_ARGS["swiftshader"] if a != "--disable-gpu"))

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sketch", choices=sorted(SKETCHES), default="skeleton")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", type=int, default=600)
    ap.add_argument("--gl", choices=["swiftshader", "llvmpipe", "swiftshader-gpu2d"], default="swiftshader")
    ap.add_argument("--flag", action="append", default=[], help="extra Chromium flag (repeatable)")
    ap.add_argument("--fresh", action="store_true", help="a new browser for every render")
    ap.add_argument("--actors", type=int, default=0, help="render through a RenderPool of N actors")
    args = ap.parse_args(argv)
    if args.actors:
        return _pool(args)
    t = time.monotonic()
    r = Renderer(gl_backend=args.gl, extra_args=tuple(args.flag))
    launch_s = time.monotonic() - t
    first = None
    try:
        for i in range(args.repeat):
            if args.fresh and i:
                r.close()
                r = Renderer(gl_backend=args.gl, extra_args=tuple(args.flag))
            res = r.render(SKETCHES[args.sketch], args.seed, args.size, 300.0, 1)
            row = {"i": i, "status": res.status, "wall_s": round(res.wall_s, 2), "draw_s": round(res.draw_s, 2),
                   "paint_fraction": round(res.paint_fraction, 4)}
            if res.png is not None:
                first = first or res.png
                row["diff_pixels"], row["diff_max"] = pixel_diff(first, res.png)
            print(json.dumps(row), flush=True)
    finally:
        r.close()
    print(json.dumps({"launch_s": round(launch_s, 2), "gl": args.gl, "flags": args.flag, "sketch": args.sketch,
                      "fresh": args.fresh}))


if __name__ == "__main__":
    main()
