"""Tests of the gate (brushrl.gate): the labelled fixture corpus, extraction, scoping, the runtime
checks on real PNGs, the CLI, and the name tables against the installed p5/p5.brush/Chromium."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

import brushrl.gate as gate_pkg
from brushrl.cli import main as cli_main
from brushrl.config import GateConfig
from brushrl.gate import (
    InfraRender,
    check_code,
    check_runtime,
    check_static,
    extract_code,
    findings_for,
    png_size,
)
from brushrl.gate import policy as P
from brushrl.gate import reasons as R
from brushrl.gate.names import (
    BROWSER_FILE,
    NAMES_FILE,
    dump_browser_globals,
    dump_js_names,
    load_js_names,
)
from brushrl.render.paint import paint_fraction
from brushrl.types import RenderResult

FIXTURES = Path(__file__).parent / "fixtures" / "gate"
LABELS: dict[str, dict] = json.loads((FIXTURES / "labels.json").read_text())
SIZE = 600
CFG = GateConfig()
SKELETON = (FIXTURES / "pass_skeleton.js").read_text()


def judge_file(name: str, cfg: GateConfig = CFG, size: int = SIZE, replay: bool = False):
    text = (FIXTURES / name).read_text()
    if name.endswith(".js"):
        return check_code(text, cfg, size, replay=replay)
    return check_static(text, cfg, size, replay=replay)[1]


def with_draw(extra: str, top: str = "") -> str:
    """The skeleton with ``extra`` appended to draw's body and ``top`` before setup."""
    body_end = SKELETON.rindex("}")
    return top + SKELETON[:body_end] + extra + "\n" + SKELETON[body_end:]


# -- corpus ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LABELS))
def test_fixture_verdict_under_replay(name):
    """``render.mode: replay`` leaves out the checks that only guarded the direct path's captured
    canvas (docs/gate.md rows 12, 21, 31, 34): the fixtures labelled ``replay`` pass, every other
    one keeps its verdict (test_replay.py renders the five and checks the record page's verdict)."""
    want = LABELS[name].get("replay", {}).get("static", LABELS[name]["expect"])
    verdict = judge_file(name, replay=True)
    assert verdict.verdict == want, f"{name}: {verdict.detail}"


@pytest.mark.parametrize("name", sorted(LABELS))
def test_fixture_verdict(name):
    verdict = judge_file(name)
    assert verdict.verdict == LABELS[name]["expect"], (
        f"{name}: {verdict.detail} ({LABELS[name]['why']})"
    )
    assert verdict.stage == "static"
    if verdict.verdict not in (R.PASS, R.NO_SKETCH):
        assert verdict.detail.startswith("line "), verdict.detail


@pytest.mark.parametrize("name", sorted(n for n in LABELS if n.endswith(".js")))
def test_fenced_reply_matches_bare_code(name):
    code = (FIXTURES / name).read_text()
    code += "" if code.endswith("\n") else "\n"  # the closing fence needs a line of its own
    extracted, verdict = check_static(f"Here you go:\n\n```js\n{code}```\n\nEnjoy.", CFG, SIZE)
    assert extracted == code
    assert verdict.verdict == LABELS[name]["expect"]


def test_corpus_is_labelled_and_covers_every_code():
    files = {p.name for p in FIXTURES.iterdir() if p.suffix in (".js", ".txt")}
    assert files == set(LABELS), "every fixture needs a label and every label a fixture"
    assert len(files) >= 60
    counts = Counter(label["expect"] for label in LABELS.values())
    for code in (R.PASS, *R.STATIC_PRIORITY):
        assert counts[code] >= 3, f"{code} has only {counts[code]} fixture(s)"


# -- priority and configuration ------------------------------------------------------------------


def test_priority_order_is_documented_in_package_docstring():
    doc = gate_pkg.__doc__
    positions = [doc.index(f"\n{code} ") for code in R.STATIC_PRIORITY]
    assert positions == sorted(positions)
    for code in R.RUNTIME_ORDER:
        assert code in doc


def test_first_failing_code_by_priority():
    text_and_rect = with_draw('text("x", 1, 2);\nrect(1, 2, 3, 4);')
    assert check_code(text_and_rect, CFG, SIZE).verdict == R.TEXT_LABEL
    # external access outranks the missing setup and the missing WEBGL
    no_setup = "function draw() { createCanvas(600, 600); fetch('/x'); brush.circle(1, 2, 3); }"
    codes = [f.code for f in findings_for(no_setup, CFG, SIZE)]
    assert codes[0] == R.EXTERNAL_ACCESS and R.MISSING_SETUP in codes and R.NOT_WEBGL in codes
    assert check_code(no_setup, CFG, SIZE).verdict == R.EXTERNAL_ACCESS


def test_whitelist_is_configurable():
    sketch = with_draw("brush.line(300, 480, 300, 590);")
    assert check_code(sketch, CFG, SIZE).verdict == R.NOT_WHITELISTED
    assert check_code(sketch, GateConfig(enforce_whitelist=False), SIZE).passed
    assert check_code(sketch, GateConfig(whitelist=[*CFG.whitelist, "line"]), SIZE).passed
    # a method that does not exist stays unknown whatever the whitelist says
    invented = with_draw("brush.bleed(0.2);")
    assert check_code(
        invented, GateConfig(whitelist=["bleed"], enforce_whitelist=False), SIZE
    ).verdict == (R.UNKNOWN_BRUSH_METHOD)


def test_canvas_size_follows_argument():
    assert check_code(SKELETON, CFG, 512).verdict == R.WRONG_CANVAS_SIZE
    assert check_code(SKELETON.replace("600, 600", "512, 512"), CFG, 512).passed
    assert check_code(SKELETON.replace("600, 600", "600.0, 6e2"), CFG, 600).passed


# -- scoping -------------------------------------------------------------------------------------


def test_block_function_is_not_visible_outside_its_block():
    inner = "function helper() { { function text() {} } text('hi', 1, 2); }"
    assert check_code(with_draw("", top=inner + "\n"), CFG, SIZE).verdict == R.TEXT_LABEL
    visible = "function helper() { function text2() {} text2(); }"
    assert check_code(with_draw("", top=visible + "\n"), CFG, SIZE).passed


def test_local_shadow_only_inside_its_scope():
    shadowed = with_draw("{ const rect = (x) => brush.circle(x, x, 5); rect(10); }")
    assert check_code(shadowed, CFG, SIZE).passed
    leaked = with_draw("{ const rect = (x) => brush.circle(x, x, 5); } rect(10);")
    assert check_code(leaked, CFG, SIZE).verdict == R.BARE_PRIMITIVES


def test_top_level_declaration_of_p5_global_is_a_collision_even_if_called():
    sketch = with_draw(
        "rect(1, 2, 3, 4);", top="function rect(x, y, w, h) { brush.circle(x, y, w); }\n"
    )
    assert check_code(sketch, CFG, SIZE).verdict == R.NAME_COLLISION


def test_catch_and_for_bindings_are_local():
    sketch = with_draw(
        "try { JSON.parse('{'); } catch (text) { console.log(text); }\n"
        "for (const fetch of [1]) { brush.circle(fetch, 1, 1); }"
    )
    assert check_code(sketch, CFG, SIZE).passed


# -- extraction ----------------------------------------------------------------------------------


def test_extract_code_fences():
    assert extract_code("a\n```js\nx();\n```\nb") == "x();\n"
    assert extract_code("```javascript\ny();\n```") == "y();\n"
    assert extract_code("```\nz();\n```") == "z();\n"
    assert extract_code("```python\np()\n```\n```js\nq();\n```") == "q();\n"
    assert extract_code("```js\nfunction setup() {") == "function setup() {"
    assert extract_code("function setup() {}\n") == "function setup() {}\n"
    assert extract_code("I would paint a hibiscus.") is None
    assert extract_code("```python\nsetup = 1\n```") is None


def test_check_static_returns_extracted_code():
    code, verdict = check_static("Sketch:\n```js\n" + SKELETON + "```", CFG, SIZE)
    assert code == SKELETON and verdict.passed
    code, verdict = check_static("no code here", CFG, SIZE)
    assert code is None and verdict.verdict == R.NO_SKETCH


# -- runtime -------------------------------------------------------------------------------------


def _png(size: int, painted: bool) -> bytes:
    image = Image.new("RGBA", (size, size), (253, 248, 238, 255))
    if painted:
        ImageDraw.Draw(image).ellipse(
            (size // 4, size // 4, 3 * size // 4, 3 * size // 4), fill=(224, 138, 114, 255)
        )
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _ok(png: bytes) -> RenderResult:
    return RenderResult(status="ok", png=png, paint_fraction=paint_fraction(png))


def test_runtime_pass_blank_and_wrong_size():
    painted = _ok(_png(SIZE, painted=True))
    assert painted.paint_fraction > 0.1
    verdict = check_runtime(painted, CFG, SIZE)
    assert verdict.passed and verdict.stage == "runtime"

    blank = _ok(_png(SIZE, painted=False))
    assert blank.paint_fraction == 0.0
    assert check_runtime(blank, CFG, SIZE).verdict == R.BLANK_CANVAS
    assert check_runtime(blank, GateConfig(min_paint_fraction=0.0), SIZE).passed

    small = _ok(_png(512, painted=True))
    verdict = check_runtime(small, CFG, SIZE)
    assert verdict.verdict == R.WRONG_CANVAS_SIZE and "512x512" in verdict.detail


def test_runtime_error_and_timeout():
    err = RenderResult(status="error", js_errors=["ReferenceError: drawLeaf is not defined"])
    verdict = check_runtime(err, CFG, SIZE)
    assert verdict.verdict == R.RENDER_ERROR and "drawLeaf" in verdict.detail
    timeout = RenderResult(status="timeout", attempts=2, detail="30 s")
    assert check_runtime(timeout, CFG, SIZE).verdict == R.RENDER_TIMEOUT


def test_runtime_infra_is_not_a_verdict():
    with pytest.raises(InfraRender):
        check_runtime(RenderResult(status="infra", detail="browser crashed"), CFG, SIZE)
    with pytest.raises(ValueError):  # InfraRender is a ValueError
        check_runtime(RenderResult(status="ok", png=None), CFG, SIZE)
    with pytest.raises(ValueError):
        check_runtime(
            RenderResult(status="ok", png=b"GIF89a" + bytes(30), paint_fraction=0.5), CFG, SIZE
        )


def test_runtime_fails_what_the_sandbox_refused_whatever_the_picture():
    painted = _ok(_png(SIZE, painted=True))
    refused = dataclasses.replace(painted, refused=["dialog alert: hi"])
    assert check_runtime(refused, CFG, SIZE).verdict == R.SANDBOX_VIOLATION
    surfaces = dataclasses.replace(painted, forbidden={"webgl2.clear": 1, "p5.text": 2})
    verdict = check_runtime(surfaces, CFG, SIZE)
    assert verdict.verdict == R.SANDBOX_VIOLATION and "webgl2.clear x1" in verdict.detail
    p5_only = dataclasses.replace(painted, forbidden={"p5.rect": 1, "p5.text": 2, "p5.drawingContext": 1})
    assert check_runtime(p5_only, CFG, SIZE).verdict == R.TEXT_LABEL  # the first by static priority
    errored = RenderResult(status="error", js_errors=["x"], forbidden={"p5.image": 1})
    assert check_runtime(errored, CFG, SIZE).verdict == R.PIXEL_ACCESS  # refusals outrank the error
    off_list = dataclasses.replace(painted, brush_calls={"circle": 1, "set": 1})
    assert check_runtime(off_list, CFG, SIZE).verdict == R.NOT_WHITELISTED
    assert check_runtime(off_list, GateConfig(enforce_whitelist=False), SIZE).passed


def test_png_size_reads_ihdr():
    assert png_size(_png(123, painted=False)) == (123, 123)
    with pytest.raises(ValueError):
        png_size(b"not a png at all, not at all")


# -- CLI -----------------------------------------------------------------------------------------


def test_cli_json(capsys):
    files = [
        FIXTURES / "pass_skeleton.js",
        FIXTURES / "text_plain.js",
        FIXTURES / "pass_reply_fenced.txt",
    ]
    code = cli_main(["gate", *map(str, files), "--json"])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [r["path"] for r in records] == list(map(str, files))
    assert [r["verdict"] for r in records] == ["pass", "text_label", "pass"]
    assert all(r["stage"] == "static" and "detail" in r for r in records)
    assert "line 21" in records[1]["detail"]

    assert cli_main(["gate", str(files[0]), str(files[2]), "--json"]) == 0


def test_cli_config_and_plain_output(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("gate:\n  enforce_whitelist: false\n")
    target = FIXTURES / "not_whitelisted_line.js"
    assert cli_main(["gate", str(target)]) == 1
    assert cli_main(["gate", str(target), "--config", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{target}: not_whitelisted (static)")
    assert out[1] == f"{target}: pass (static)"
    bad = tmp_path / "bad.yaml"
    bad.write_text("gate:\n  enforce_whitelistt: true\n")
    assert cli_main(["gate", str(target), "--config", str(bad)]) == 2


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's Chromium")
def test_cli_render_applies_runtime_gate(capsys):
    code = cli_main(["gate", str(FIXTURES / "pass_skeleton.js"), "--render", "--json"])
    record = json.loads(capsys.readouterr().out.strip())
    assert record["render_status"] == "ok", record
    assert record["stage"] == "runtime" and record["verdict"] == "pass"
    assert record["paint_fraction"] >= CFG.min_paint_fraction
    assert code == 0


# -- name tables and policy ----------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_js_names_match_installed_libraries():
    assert dump_js_names() == json.loads(NAMES_FILE.read_text()), (
        "p5/p5.brush changed: run python -m brushrl.gate.make_names --write"
    )


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's Chromium")
def test_browser_globals_match_installed_chromium():
    """The global names of the installed Chromium are the table's (its recorded version is
    provenance only: Debian's patch releases, e.g. 156.0.8078.108 -> .114, kept the same names)."""
    installed, recorded = dump_browser_globals(), json.loads(BROWSER_FILE.read_text())
    assert installed["names"] == recorded["names"], (
        f"Chromium {recorded['chromium_version']} -> {installed['chromium_version']} changed its "
        "globals: run python -m brushrl.gate.make_names --write --only browser"
    )


def test_name_tables_are_consistent():
    names = load_js_names()
    assert names.p5_brush_version == "2.2.2" and names.p5_version.startswith("2.")
    assert set(CFG.whitelist) <= names.brush_exports
    assert P.BRUSH_PAINTING_METHODS <= names.brush_exports
    assert {"text", "log", "clamp", "rect", "createCanvas"} <= names.p5_globals
    assert "bleed" not in names.brush_exports and "setup" not in names.p5_globals
    allowed_p5 = P.ALLOWED_P5_GLOBALS
    assert allowed_p5 <= names.p5_globals, allowed_p5 - names.p5_globals
    assert P.ALLOWED_JS_GLOBALS <= names.ecmascript_globals | names.browser_globals
    assert not (P.ALLOWED_P5_GLOBALS & (P.SHAPE_GLOBALS | P.PIXEL_GLOBALS | P.EXTERNAL_GLOBALS))
    assert {"fetch", "document", "requestAnimationFrame"} <= names.browser_globals
    assert "Math" not in names.browser_globals


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("text", R.TEXT_LABEL),
        ("textFont", R.TEXT_LABEL),
        ("textureMode", R.PIXEL_ACCESS),
        ("loadFont", R.EXTERNAL_ACCESS),
        ("loadPixels", R.PIXEL_ACCESS),
        ("baseMaterialShader", R.PIXEL_ACCESS),
        ("torus", R.BARE_PRIMITIVES),
        ("pixelDensity", R.WRONG_CANVAS_SIZE),
        ("random", None),
        ("TWO_PI", None),
        ("Math", None),
        ("fill", R.DISALLOWED_GLOBAL),
        ("Float64Array", R.DISALLOWED_GLOBAL),
        ("drawPetal", R.DISALLOWED_GLOBAL),
        ("fetch", R.EXTERNAL_ACCESS),
        ("speechSynthesis", R.EXTERNAL_ACCESS),
    ],
)
def test_classify_global(name, expected):
    assert P.classify_global(name, load_js_names()) == expected


# -- typed values (brushrl.gate.values) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "top", "expected"),
    [
        ('const r = rotate(0); r.image(null, 0, 0);', "", R.PIXEL_ACCESS),
        ("scale(1).createGraphics(10, 10);", "", R.EXTERNAL_ACCESS),
        ('const f = () => translate(1, 1); f().text("x", 1, 1);', "", R.PIXEL_ACCESS),
        ('Promise.resolve(translate(0, 0)).then((r) => r.text("x", 1, 1));', "", R.PIXEL_ACCESS),
        ('const o = {}; o.k = translate(0, 0);', "", R.PIXEL_ACCESS),
        ("translate(0, 0).pixelDensity(2);", "", R.WRONG_CANVAS_SIZE),
        ("pixelDensity(2);", "", R.WRONG_CANVAS_SIZE),
        ("", "function mousePressed(e) { e.target.getContext(\"2d\"); }\n", R.DISALLOWED_GLOBAL),
        ('brush.addField("f", function () { return this; });', "", R.EXTERNAL_ACCESS),
        ("const a = { __proto__: null };", "", R.EXTERNAL_ACCESS),
        # a parameter indexed by a computed key: an honest helper (render.mode replay scores
        # nothing the sketch's page reaches; window, `this` and p5 objects cannot be passed in)
        ("", "function f(p, n) { return p[n]; }\n", R.PASS),
        ("", "function f(n) { return Math[n]; }\n", R.EXTERNAL_ACCESS),
        ("", "function wait(ms, done) { setTimeout(done, ms); }\n", R.PASS),
        ("", "const f = 'x'; setTimeout(f, 1);\n", R.EXTERNAL_ACCESS),
        ('this.width = 3;', "", R.NAME_COLLISION),
        ("const o = { grab() { return this; } };", "", R.EXTERNAL_ACCESS),
        # `this` in a const object literal's method is that object only while the method cannot
        # be taken off it (issue 36): taken, passed on, or `this` itself handed out, it is window
        ("const f = petal.show; f();", "const petal = { fill: 9, show() { brush.fill(this.fill, 200); } };\n",
         R.DISALLOWED_GLOBAL),
        ("setTimeout(petal.show, 0);", "const petal = { fill: 9, show() { brush.fill(this.fill, 200); } };\n",
         R.EXTERNAL_ACCESS),
        ("const o = { petal }; o.petal.show();", "const petal = { show() { brush.fill(this.fill, 200); } };\n",
         R.DISALLOWED_GLOBAL),
        ("petal.show();", "const petal = { show() { const g = this.show; brush.fill(this.fill, 200); } };\n",
         R.DISALLOWED_GLOBAL),
        ("petal.show();", "const petal = { show() { brush.fill(this.fill, 200); return this; } };\n",
         R.EXTERNAL_ACCESS),
        ("petal.show();", "let petal = { show() { brush.fill(this.fill, 200); } };\n", R.DISALLOWED_GLOBAL),
        ("petal.show();", "const petal = { get show() { return this.fill; } };\n", R.DISALLOWED_GLOBAL),
        # honest
        ("push(); translate(1, 2).rotate(3); pop();", "", R.PASS),
        ("const v = createVector(1, 2).add(createVector(1, 1)).mult(2); brush.circle(v.x, v.y, 3);", "", R.PASS),
        ("const idx = floor(random(3)); brush.fill(pal()[idx], 100);", 'function pal() { return ["#fff", "#eee"]; }\n', R.PASS),
        ("const pts = [[1, 2]]; pts.forEach((p, i) => brush.circle(pts[(i + 1) % pts.length][0], p[1], 2));", "", R.PASS),
        ("setTimeout(() => redraw(), 0);", "", R.PASS),
        ("petal.show(); petal.size += 1;",
         "const petal = { fill: 9, size: 3, show() { brush.fill(this.fill, 200); this.grow(); }, grow() { this.size *= 2; } };\n",
         R.PASS),
    ],
)
def test_values_are_typed_and_judged_by_kind(extra, top, expected):
    assert check_code(with_draw(extra, top=top), CFG, SIZE).verdict == expected


def test_p5_object_returns_are_allowlisted_p5_functions():
    assert P.P5_OBJECT_RETURNS <= P.ALLOWED_P5_GLOBALS
    assert P.NUMERIC_GLOBALS - load_js_names().p5_globals <= P.ALLOWED_JS_GLOBALS | {"Number"}


# -- what replay leaves out, and what it keeps -----------------------------------------------------

#: (draw-body snippet, top-level snippet, verdict under direct, verdict under replay).
REPLAY_CASES = [
    # row 34: a `this`-using function handed to p5/brush (the record page's stubs call no argument)
    ("brush.fill(function () { return this.c; }, 80);", "", R.EXTERNAL_ACCESS, R.PASS),
    # row 21: the capitalised built-ins replay lets compute; not shared memory nor the collector
    ("const m = new RegExp('^#[0-9a-f]{6}$', 'i').test('#e08a72');", "", R.DISALLOWED_GLOBAL, R.PASS),
    ("const v = new Float64Array(4); const n = BigInt(3);", "", R.DISALLOWED_GLOBAL, R.PASS),
    ("const s = new SharedArrayBuffer(8);", "", R.DISALLOWED_GLOBAL, R.DISALLOWED_GLOBAL),
    ("Atomics.add(0, 0, 1);", "", R.DISALLOWED_GLOBAL, R.DISALLOWED_GLOBAL),
    ("const f = new FinalizationRegistry(() => 0);", "", R.DISALLOWED_GLOBAL, R.DISALLOWED_GLOBAL),
    ("const g = Function('return 1');", "", R.EXTERNAL_ACCESS, R.EXTERNAL_ACCESS),
    # row 31: data: goes, the network schemes, blob: and javascript: stay
    ("const u = 'data:,rose';", "", R.EXTERNAL_ACCESS, R.PASS),
    ("const u = 'blob:' + 'x';", "", R.EXTERNAL_ACCESS, R.EXTERNAL_ACCESS),
    ("const u = 'https://example.com/x.png';", "", R.EXTERNAL_ACCESS, R.EXTERNAL_ACCESS),
    ("const u = 'javascript:alert(1)';", "", R.EXTERNAL_ACCESS, R.EXTERNAL_ACCESS),
    # row 12: an alias reaches the stubs; what it reaches through a name stays judged
    ("const b = brush; b.circle(300, 300, 40);", "", R.UNKNOWN_BRUSH_METHOD, R.PASS),
    ("brush['constructor'];", "", R.EXTERNAL_ACCESS, R.EXTERNAL_ACCESS),
    ("brush.watercolor(1);", "", R.UNKNOWN_BRUSH_METHOD, R.UNKNOWN_BRUSH_METHOD),
    # row 14: overwriting brush is kept (the record page reports it as sandbox_violation: sooner)
    ("brush.circle = () => 0;", "", R.NAME_COLLISION, R.NAME_COLLISION),
]


@pytest.mark.parametrize("body,top,direct,replay", REPLAY_CASES)
def test_replay_leaves_out_only_the_direct_paths_checks(body, top, direct, replay):
    code = with_draw(body, top)
    assert check_code(code, CFG, SIZE).verdict == direct
    assert check_code(code, CFG, SIZE, replay=True).verdict == replay


def test_a_sketch_that_paints_only_through_an_alias_is_left_to_the_runtime_gate():
    """Under replay the static gate cannot count an alias's painting calls, so it does not refuse
    the sketch as ``no_painting_calls`` (the runtime gate sees the validated log); the direct path
    still refuses the alias itself."""
    code = "function setup() {\n  createCanvas(600, 600, WEBGL);\n  const b = brush;\n  b.circle(300, 300, 40);\n}\n"
    assert check_code(code, CFG, SIZE).verdict == R.UNKNOWN_BRUSH_METHOD
    assert check_code(code, CFG, SIZE, replay=True).verdict == R.PASS
    bare = "function setup() {\n  createCanvas(600, 600, WEBGL);\n  brush.noStroke();\n}\n"
    assert check_code(bare, CFG, SIZE, replay=True).verdict == R.NO_PAINTING_CALLS
