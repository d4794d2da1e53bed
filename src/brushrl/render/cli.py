"""``brushrl render SKETCH.js``: the pipeline's verdict on one sketch, and its painting (one local
Chromium, no Ray).

As in training: the static gate first (``brushrl.gate.check_code``); a sketch it rejects is not
rendered and its verdict is the static reason code (``external_access`` for a ``fetch``, ...).
A sketch that passes is rendered and judged by the runtime gate (``brushrl.gate.check_runtime``):
``pass``, a sandbox or call-log code (``sandbox_violation``, ``invalid_call``, ``work_budget``, ...),
``render_error``, ``render_timeout``, ``wrong_canvas_size``, ``blank_canvas``, ``text_in_painting``
(the painting reads as words: the reading is in the line) or ``infra``.
``--no-gate`` renders whatever the static gate says and reports only the runtime verdict, saying
that the static gate was skipped.

Prints one JSON object with ``--json`` (``verdict``, ``stage`` (``static`` / ``runtime``),
``static_gate`` (``pass``, a reason code, or ``skipped (--no-gate)``), ``gate_detail``, ``png``,
``status``, ``wall_s``, ``draw_s``, ``cpu_s``, ``peak_rss_mb``, ``paint_fraction``, ``attempts``,
``brush_calls``, ``js_errors``, ``refused``, ``console``, ``actor_id``, ``detail``, ``text`` (what
the text scan read, ``[[text, confidence], ...]``, null when not read); the render
fields are null when nothing was rendered), else a short line. Exit code 0 when the verdict is
``pass``, 1 otherwise, 2 for a bad config or an unreadable sketch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brushrl.config import BrushRLConfig, ConfigError, load_config
from brushrl.gate import InfraRender, check_code, check_runtime
from brushrl.types import GateVerdict, RenderResult

#: What ``static_gate`` says when ``--no-gate`` skipped it.
SKIPPED = "skipped (--no-gate)"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``render`` sub-command."""
    p = subparsers.add_parser(
        "render",
        help="gate one p5.brush sketch and render it to PNG in headless Chromium",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sketch", metavar="SKETCH.js", help="sketch source file")
    p.add_argument("--seed", type=int, default=0, help="render seed for Math.random (default 0)")
    p.add_argument("--size", type=int, help="canvas side in pixels (default: render.canvas_size)")
    p.add_argument("--out", metavar="PNG", help="write the canvas here (default: not written)")
    p.add_argument("--deadline", type=float, metavar="S", help="seconds per attempt (default: render.deadline_s)")
    p.add_argument("--gl", choices=["swiftshader", "llvmpipe"], help="software GL (default: render.gl_backend)")
    p.add_argument("--config", metavar="FILE", help="run config YAML (its render and gate sections)")
    p.add_argument("--no-gate", action="store_true",
                   help="skip the static gate: render even a sketch it rejects (the output says so)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Gate and render ``args.sketch`` and report; returns the exit code."""
    try:
        cfg = load_config(args.config) if args.config else BrushRLConfig()
        code = Path(args.sketch).read_text()
    except (ConfigError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    rc = cfg.render
    size = args.size or rc.canvas_size
    static = None if args.no_gate else check_code(code, cfg.gate, size, replay=cfg.render.mode == "replay")
    result = verdict = None
    if static is not None and not static.passed:
        verdict = static
    else:
        from brushrl.render.browser import Renderer  # Playwright: only when something is rendered

        with Renderer.from_config(rc.model_copy(update={"gl_backend": args.gl or rc.gl_backend})) as renderer:
            result = renderer.render(code, args.seed, size, args.deadline or rc.deadline_s, rc.attempts)
        try:
            verdict = check_runtime(result, cfg.gate, size)
        except InfraRender as exc:  # not the sketch's fault: in training the reward is None
            verdict = GateVerdict("infra", str(exc), "runtime")
    png = None
    if result is not None and result.png is not None and args.out:
        Path(args.out).write_bytes(result.png)
        png = args.out
    static_gate = SKIPPED if static is None else static.verdict
    if args.json:
        print(json.dumps({"verdict": verdict.verdict, "stage": verdict.stage, "static_gate": static_gate,
                          "gate_detail": verdict.detail, "png": png, **_render_fields(result)}))
    else:
        print(_line(verdict, static_gate, result, png))
    return 0 if verdict.passed else 1


def _render_fields(result: RenderResult | None) -> dict:
    keys = ("status", "wall_s", "draw_s", "cpu_s", "peak_rss_mb", "paint_fraction", "attempts", "brush_calls",
            "js_errors", "refused", "console", "actor_id", "detail", "text")
    if result is None:
        return dict.fromkeys(keys)
    rounded = {"wall_s": 3, "draw_s": 3, "cpu_s": 3, "peak_rss_mb": 1, "paint_fraction": 5}
    return {k: round(getattr(result, k), rounded[k]) if k in rounded else getattr(result, k) for k in keys}


def _line(verdict: GateVerdict, static_gate: str, result: RenderResult | None, png: str | None) -> str:
    head = f"{verdict.verdict} ({verdict.stage} gate" + ("; static gate skipped: --no-gate)" if static_gate == SKIPPED
                                                        else ")")
    if result is None:
        return f"{head}: not rendered" + (f" [{verdict.detail}]" if verdict.detail else "")
    extra = f" -> {png}" if png else ""
    why = "; ".join(result.js_errors[:1] + ([result.detail] if result.detail else [])
                    + ([verdict.detail] if verdict.verdict == "text_in_painting" else []))
    return (f"{head}: {result.status} in {result.wall_s:.2f} s (draw {result.draw_s:.2f} s), "
            f"paint {result.paint_fraction:.2%}{extra}" + (f" [{why.splitlines()[0]}]" if why else ""))
