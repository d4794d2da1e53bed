"""``brushrl gate FILE [FILE ...]``: run the gate on sketches or whole replies.

A ``.js`` file is sketch code; any other file (``.txt``, ``.md``) is a policy reply from which
the sketch is extracted. ``--render`` also renders each statically passing sketch in headless
Chromium (``brushrl.render.browser.Renderer``) and applies the runtime gate. The static gate
follows the config's ``render.mode``: with ``replay`` (the default) the checks that only guard a
captured sketch canvas are left out (an aliased ``brush``, typed arrays and ``RegExp``, ``data:``
strings; docs/gate.md), with ``direct`` every check runs. The exit code is 0 when every file
passes, 1 otherwise, 2 for a bad config.
"""
# Beside the package, not in brushrl/gate/: --render needs the render stage, which sits above the
# gate (docs/architecture.md). The docstring above is the command's --help.

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brushrl.config import BrushRLConfig, ConfigError, load_config
from brushrl.gate.runtime import InfraRender, check_runtime
from brushrl.gate.static import check_code, check_static
from brushrl.types import GateVerdict


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``gate`` sub-command."""
    parser = subparsers.add_parser(
        "gate",
        help="judge sketches/replies with the static (and optionally runtime) gate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help=".js sketch or .txt/.md reply")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--config", metavar="FILE", help="run config YAML (gate and render sections)"
    )
    parser.add_argument(
        "--render", action="store_true", help="also render and apply the runtime gate"
    )
    parser.add_argument("--seed", type=int, default=0, help="render seed (with --render)")
    parser.set_defaults(func=run)


def _judge_file(path: Path, cfg: BrushRLConfig) -> tuple[str | None, GateVerdict]:
    text = path.read_text(errors="replace")
    if path.suffix == ".js":
        return text, check_code(text, cfg.gate, cfg.render.canvas_size, replay=cfg.render.mode == "replay")
    return check_static(text, cfg.gate, cfg.render.canvas_size, replay=cfg.render.mode == "replay")


def run(args: argparse.Namespace) -> int:
    """Gate every file; print one line (or JSON object) each; 0 if all pass else 1."""
    try:
        cfg = load_config(args.config) if args.config else BrushRLConfig()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    renderer = None
    all_passed = True
    try:
        for name in args.files:
            path = Path(name)
            record: dict = {"path": name}
            try:
                code, verdict = _judge_file(path, cfg)
            except OSError as exc:
                record.update(verdict="unreadable", detail=str(exc), stage="static")
                all_passed = False
                _emit(record, args.json)
                continue
            if verdict.passed and args.render and code is not None:
                if renderer is None:
                    from brushrl.render.browser import Renderer  # lazy: needs Playwright + Chromium

                    renderer = Renderer.from_config(cfg.render)
                size = cfg.render.canvas_size
                result = renderer.render(
                    code, args.seed, size, cfg.render.deadline_s, cfg.render.attempts
                )
                record.update(
                    render_status=result.status,
                    paint_fraction=result.paint_fraction,
                    wall_s=result.wall_s,
                )
                try:
                    verdict = check_runtime(result, cfg.gate, size)
                except InfraRender as exc:
                    verdict = GateVerdict("infra", str(exc), "runtime")
            record.update(verdict=verdict.verdict, detail=verdict.detail, stage=verdict.stage)
            all_passed &= verdict.passed
            _emit(record, args.json)
    finally:
        if renderer is not None:
            renderer.close()
    return 0 if all_passed else 1


def _emit(record: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record), flush=True)
    else:
        detail = f"  {record['detail']}" if record.get("detail") else ""
        print(f"{record['path']}: {record['verdict']} ({record['stage']}){detail}", flush=True)
