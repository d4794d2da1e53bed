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
from brushrl.gate import check_code, check_runtime
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


@pytest.mark.parametrize("log", [
    [["p5", "randomSeed", [1777593600000]]],                       # a date: a seed, not a coordinate
    [["brush", "seed", [1777593600000]], ["p5", "noiseSeed", [-1e15]]],
    [["brush", "fill", [{"$": "color", "v": [1.03, -0.02, 0.2, 1]}, 200]]],  # lerpColor a hair past 1
])
def test_seeds_and_slightly_out_of_gamut_colours_are_kept(log):
    assert validate_log(log).entries == log


@pytest.mark.parametrize("bad, code", [
    ([["p5", "randomSeed", [1e300]]], R.WORK_BUDGET),
    ([["brush", "circle", [1777593600000, 300, 2]]], R.WORK_BUDGET),  # the seed bound is for seeds only
    ([["brush", "fill", [{"$": "color", "v": [1.6, 0, 0, 1]}]]], R.INVALID_CALL),
])
def test_seed_and_colour_bounds_still_hold(bad, code):
    with pytest.raises(CallLogRejected) as err:
        validate_log(bad)
    assert err.value.code == code


def test_p5_brush_names_match_the_installed_library():
    """The record page's stubs refuse brush and field names as p5.brush 2.2.2 does."""
    from brushrl.render.calllog import BRUSH_FIELDS, BRUSH_NAMES
    from brushrl.render.harness import BRUSH_FILE, find_js_dir

    src = (find_js_dir() / BRUSH_FILE).read_text()
    for name in BRUSH_NAMES:
        assert f'["{name}",' in src or f'"{name}"' in src, name
    for name in BRUSH_FIELDS:
        assert f'("{name}",' in src or f'"{name}"' in src, name


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
               "ok_timer_redraw.js", "ok_event_handler.js",
               # issue 36: the record page's stubs throw and return as p5.brush does
               "ok_object_method_fill.js", "ok_brush_returns.js", "ok_date_seed.js", "ok_lerp_color_edge.js",
               "ok_catch_brush_error.js"]
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


def test_a_brush_call_throws_on_the_record_page_as_in_p5_brush_with_the_sketchs_line(renderers):
    """Uncaught, p5.brush's error ends the render on both paths with its own message; the record
    page's names the sketch's line (the revision turn shows it to the model)."""
    code = ("async function setup() { createCanvas(600, 600, WEBGL); noLoop(); }\n"
            "function draw() {\n  background(250);\n  brush.fill('#b8336a', 200);\n  brush.vertex(10, 20);\n}\n")
    message = "vertex() called outside of beginShape()/endShape(). Call beginShape() first."
    for mode in ("direct", "none"):
        res = renderers[mode].render(code, 5, SIZE, DEADLINE_S)
        assert res.status == "error" and message in res.js_errors[0], (mode, res.js_errors)
    assert "(sketch.js:5:9)" in res.js_errors[0]


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


def test_what_the_static_gate_leaves_to_replay_is_judged_by_the_record_page(renderers):
    """The gate fixtures whose static check replay leaves out (``replay`` in their label,
    docs/gate.md rows 12, 21, 31) get their labelled runtime verdict through record and replay:
    an alias's call off the whitelist is ``not_whitelisted`` from the validated log, the rest
    paint (nothing they do reaches the replayed picture)."""
    gate_dir = Path(__file__).parent / "fixtures" / "gate"
    labels = json.loads((gate_dir / "labels.json").read_text())
    left = {n: lab["replay"] for n, lab in labels.items() if "replay" in lab}
    assert len(left) >= 5
    for name, want in sorted(left.items()):
        code = (gate_dir / name).read_text()
        assert check_code(code, GATE, SIZE, replay=True).verdict == want["static"], name
        res = renderers["none"].render(code, 0, SIZE, DEADLINE_S, 1)
        verdict = check_runtime(res, GATE, SIZE)
        assert verdict.verdict == want["runtime"], (name, res.status, verdict.detail, res.js_errors[:2])
        assert res.forbidden == {} and res.refused == [], (name, res.forbidden, res.refused)
