"""``brushrl render SKETCH.js``: render one sketch locally (one Chromium, no Ray).

Prints one JSON object with ``--json`` (``verdict``, ``png``, ``status``, ``wall_s``, ``draw_s``,
``cpu_s``, ``peak_rss_mb``, ``paint_fraction``, ``attempts``, ``brush_calls``, ``js_errors``,
``refused``, ``console``, ``actor_id``, ``detail``), else a short line. ``verdict`` is ``pass`` for an ok render with paint, otherwise ``blank_canvas``,
``render_error``, ``render_timeout`` or ``infra`` (the gate refines this). Exit code 0 when the
render is ok, 1 otherwise, 2 for a bad config or unreadable sketch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brushrl.config import BrushRLConfig, ConfigError, load_config
from brushrl.types import RenderResult


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``render`` sub-command."""
    p = subparsers.add_parser(
        "render",
        help="render one p5.brush sketch to PNG in headless Chromium",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sketch", metavar="SKETCH.js", help="sketch source file")
    p.add_argument("--seed", type=int, default=0, help="render seed for Math.random (default 0)")
    p.add_argument("--size", type=int, help="viewport side in pixels (default: render.canvas_size)")
    p.add_argument("--out", metavar="PNG", help="write the canvas here (default: not written)")
    p.add_argument("--deadline", type=float, metavar="S", help="seconds per attempt (default: render.deadline_s)")
    p.add_argument("--gl", choices=["swiftshader", "llvmpipe"], help="software GL (default: render.gl_backend)")
    p.add_argument("--config", metavar="FILE", help="run config YAML (its render and gate sections)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def verdict_of(result: RenderResult, min_paint_fraction: float) -> str:
    """Provisional verdict of a render: ``pass`` or a reason code."""
    if result.status == "ok":
        return "pass" if result.paint_fraction >= min_paint_fraction else "blank_canvas"
    return {"error": "render_error", "timeout": "render_timeout"}.get(result.status, "infra")


def run(args: argparse.Namespace) -> int:
    """Render ``args.sketch`` and report; returns the exit code."""
    try:
        cfg = load_config(args.config) if args.config else BrushRLConfig()
        code = Path(args.sketch).read_text()
    except (ConfigError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    rc = cfg.render
    # Playwright is imported only when the command runs.
    from brushrl.render.browser import Renderer

    with Renderer.from_config(rc.model_copy(update={"gl_backend": args.gl or rc.gl_backend})) as renderer:
        result = renderer.render(
            code, args.seed, args.size or rc.canvas_size, args.deadline or rc.deadline_s, rc.attempts
        )
    png = None
    if result.png is not None and args.out:
        Path(args.out).write_bytes(result.png)
        png = args.out
    verdict = verdict_of(result, cfg.gate.min_paint_fraction)
    if args.json:
        record = {
            "verdict": verdict,
            "png": png,
            "status": result.status,
            "wall_s": round(result.wall_s, 3),
            "draw_s": round(result.draw_s, 3),
            "cpu_s": round(result.cpu_s, 3),
            "peak_rss_mb": round(result.peak_rss_mb, 1),
            "paint_fraction": round(result.paint_fraction, 5),
            "attempts": result.attempts,
            "brush_calls": result.brush_calls,
            "js_errors": result.js_errors,
            "refused": result.refused,
            "console": result.console,
            "actor_id": result.actor_id,
            "detail": result.detail,
        }
        print(json.dumps(record))
    else:
        extra = f" -> {png}" if png else ""
        why = "; ".join(result.js_errors[:1] + ([result.detail] if result.detail else []))
        print(
            f"{verdict}: {result.status} in {result.wall_s:.2f} s (draw {result.draw_s:.2f} s), "
            f"paint {result.paint_fraction:.2%}{extra}" + (f" [{why.splitlines()[0]}]" if why else "")
        )
    return 0 if result.status == "ok" else 1
