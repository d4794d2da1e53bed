"""Record and replay (brushrl.render.calllog): the sketch's page only records its calls, Python
validates the log, a page without sketch code re-draws it, and only that picture is judged.

* The validator on built logs (no browser): what it keeps, counts and refuses, with reason codes.
* The config refuses a whitelist the replay cannot run.
* In real Chromium with real p5.brush: honest sketches (corpus bases, the heavy benchmark
  sketches with brush methods outside the whitelist, the sandbox's honest idioms) replay
  pixel-identical to the direct path; the hostile fixtures of tests/fixtures/replay (one per class
  of issue 27, labelled in labels.json) all fail the runtime gate through record-and-replay, with and
  without the network namespace; instance mode and an off-whitelist call end at once with a
  reason code.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from brushrl.config import ConfigError, GateConfig, load_config
from brushrl.gate import check_runtime
from brushrl.gate import reasons as R
from brushrl.render import netns
from brushrl.render.calllog import Bounds, CallLogRejected, replay_program, validate_log

FIXTURES = Path(__file__).parent / "fixtures" / "replay"
LABELS: dict[str, dict] = json.loads((FIXTURES / "labels.json").read_text())
SANDBOX = Path(__file__).parent / "fixtures" / "sandbox"
SIZE, DEADLINE_S = 600, 60
GATE = GateConfig()

GOOD_LOG = [
    ["p5", "createCanvas", [600, 600, "webgl"]],
    ["brush", "scaleBrushes", [3]],
    ["frame"],
    ["p5", "translate", [-300, -300]],
    ["renderer", "rotate", [0.5]],
    ["p5", "background", [{"$": "color", "v": [1, 0.9, 0.8, 1]}]],
    ["brush", "fill", ["#b8336a", 120]],
    ["brush", "hatch", [5, 30, {"$": "object", "v": {"rand": 0.1, "continuous": True}}]],
    ["brush", "beginShape", [{"$": "undefined"}]],
    ["brush", "vertex", [1.5, 2]],
    ["brush", "vertex", [3, 4]],
    ["brush", "endShape", [True]],
    ["brush", "polygon", [[[1, 2], [3, 4], [5, 6]]]],
]


# -- the validator -------------------------------------------------------------------------------------
def test_a_valid_log_is_kept_and_its_brush_calls_counted():
    log = validate_log(GOOD_LOG)
    assert log.entries == GOOD_LOG
    assert log.brush_calls == {"scaleBrushes": 1, "fill": 1, "hatch": 1, "beginShape": 1, "vertex": 2,
                               "endShape": 1, "polygon": 1}
    program = replay_program(log)
    # the log reaches the page as one JSON string literal: no part of it is JavaScript source
    assert program.startswith("window.__brushrl_replay(JSON.parse(\"") and program.endswith("\"));\n")
    assert json.loads(json.loads(program[len("window.__brushrl_replay(JSON.parse("):-len(");\n") - 1])) == GOOD_LOG


@pytest.mark.parametrize("bad, code", [
    (None, R.INVALID_CALL),
    ([["brush", "box", []]], R.INVALID_CALL),                     # returns a value
    ([["brush", "Polygon", [[[1, 2]]]]], R.INVALID_CALL),          # a class
    ([["p5", "text", ["ROSE", 1, 2]]], R.INVALID_CALL),            # not a recorded p5 call
    ([["renderer", "createCanvas", [1, 1]]], R.INVALID_CALL),
    ([["window", "fill", [1]]], R.INVALID_CALL),
    ([["brush", "circle"]], R.INVALID_CALL),                       # not [target, name, args]
    ([["brush", "fill", ["red'); document.write('x"]]], R.INVALID_CALL),
    ([["brush", "fill", ["<b>ROSE</b>"]]], R.INVALID_CALL),
    ([["brush", "circle", [1, 2, {"$": "unsupported", "v": "function"}]]], R.INVALID_CALL),
    ([["brush", "circle", [1, 2, {"$": "nonfinite"}]]], R.INVALID_CALL),
    ([["brush", "circle", [1, 2, {"$": "object", "v": {"valueOf": {"$": "unsupported", "v": "function"}}}]]],
     R.INVALID_CALL),
    ([["brush", "fill", [{"$": "color", "v": [2, 0, 0, 1]}]]], R.INVALID_CALL),
    ([["brush", "fill", [{"$": "object", "v": {"__proto__": 1}}]]], R.INVALID_CALL),
    ([["brush", "polygon", [[[[[[1]]]]]]]], R.INVALID_CALL),        # nested too deep
    ([["frame"], ["frame"]], R.INVALID_CALL),
    ([["brush", "circle", [300, 300, 1e9]]], R.WORK_BUDGET),
    ([["brush", "circle", [300, 300, 2]]] * 20001, R.WORK_BUDGET),
    ([["brush", "polygon", [[[1, 2]] * 9000]]] * 12, R.WORK_BUDGET),
])
def test_a_log_the_replay_cannot_run_is_rejected_with_its_reason_code(bad, code):
    with pytest.raises(CallLogRejected) as err:
        validate_log(bad)
    assert err.value.code == code


def test_the_number_bound_follows_the_canvas():
    big = [["brush", "circle", [30000, 300, 2]]]
    with pytest.raises(CallLogRejected):
        validate_log(big, Bounds(max_abs=6000))
    assert validate_log(big, Bounds(max_abs=60000)).brush_calls == {"circle": 1}


def test_a_whitelist_the_replay_cannot_run_is_refused_in_the_config():
    with pytest.raises(ConfigError, match=r"gate.whitelist: brush.box cannot be replayed"):
        load_config("configs/local.yaml", {"gate.whitelist": ["fill", "circle", "box"]})
    cfg = load_config("configs/local.yaml", {"gate.whitelist": ["fill", "circle", "box"], "render.mode": "direct"})
    assert cfg.render.mode == "direct"
    assert load_config("configs/local.yaml").render.mode == "replay"


# -- in Chromium -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def renderers():
    from brushrl.render.browser import Renderer

    out = {"direct": Renderer(gl_backend="llvmpipe", network_isolation="none", mode="direct"),
           "none": Renderer(gl_backend="llvmpipe", network_isolation="none", mode="replay")}
    if netns.netns_available():
        out["netns"] = Renderer(gl_backend="llvmpipe", network_isolation="netns", mode="replay")
    yield out
    for r in out.values():
        r.close()


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(np.int16)


def _honest() -> list[tuple[str, str]]:
    from brushrl.corpus import make_variant
    from brushrl.render.bench_sketches import HATCHING, PENCIL_STROKES

    sandbox = ["ok_chained_transforms.js", "ok_vectors_and_colours.js", "ok_looping_draw.js",
               "ok_timer_redraw.js", "ok_event_handler.js"]
    return ([(b, make_variant(b, 1).code) for b in ("peach_hibiscus", "rose")]
            + [("hatching", HATCHING), ("pencil_strokes", PENCIL_STROKES)]
            + [(n, (SANDBOX / n).read_text()) for n in sandbox])


def test_honest_sketches_replay_pixel_identical_to_the_direct_path(renderers):
    """Same seed, same browser: every pixel of the replay equals the direct path's (llvmpipe is
    pixel-exact across renders, docs/perf/render.md). Covers colours made in HSB, vectors, the
    renderer's own chained transforms, a looping draw, timers, brush methods outside the whitelist
    (hatch, set, line) and options objects."""
    differ = []
    for name, code in _honest():
        direct = renderers["direct"].render(code, 5, SIZE, DEADLINE_S)
        replay = renderers["none"].render(code, 5, SIZE, DEADLINE_S)
        assert direct.status == replay.status == "ok", (name, direct.js_errors, replay.js_errors, replay.detail)
        assert replay.brush_calls == direct.brush_calls, name
        assert replay.paint_fraction > 0.005, name
        changed = float((np.abs(_pixels(direct.png) - _pixels(replay.png)).max(-1) > 0).mean())
        if changed:
            differ.append((name, changed))
    assert differ == []


@pytest.mark.parametrize("mode", ["netns", "none"])
@pytest.mark.parametrize("name", sorted(LABELS))
def test_fixture_fails_through_record_and_replay(renderers, name, mode):
    """The runtime layer on its own (the static gate is not asked): every hostile or unsupported
    fixture gets its labelled verdict, which is never a pass, and ends well before the deadline."""
    if mode not in renderers:
        pytest.skip("no network namespaces on this machine")
    label = LABELS[name]
    res = renderers[mode].render((FIXTURES / name).read_text(), 0, SIZE, DEADLINE_S, 1)
    verdict = check_runtime(res, GATE, SIZE)
    assert verdict.verdict == label["runtime"] != "pass", (name, label["why"], res.status, verdict.detail,
                                                            res.js_errors[:2], res.forbidden)
    assert res.status != "timeout", name
