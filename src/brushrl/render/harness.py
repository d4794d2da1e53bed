"""The page a sketch runs in: HTML, in-page harness scripts, Content-Security-Policy and the
vendored p5 / p5.brush files.

The page is served from a fake origin (``ORIGIN``) by ``page.route``; nothing else exists on it.
Script order inside ``<head>`` (inline scripts carry the page's nonce, the rest come from the
origin, ``'self'``):

1. ``GATE_JS`` (``//# sourceURL=brushrl-gate.js``): the wrapper factory. Frames of this script are
   *vetted* calls: an allowlisted p5 function or a brush method running, or a guarded call that
   passed its check.
2. ``harness.js`` (``brushrl-harness.js``) with its ``CONFIG``: takes every reference the harness
   needs off the page before anything else runs (so a sketch's top-level ``const performance`` or
   a replaced ``HTMLCanvasElement.prototype.toDataURL`` never reaches it), seeds ``Math.random``
   with mulberry32(0) (the libraries' load is the same on every page), takes the page's report
   binding off ``window``, fixes ``Error.prepareStackTrace`` to its own formatter, and wraps the
   platform: WebGL and 2D contexts, every DOM node interface, window's functions, navigation. See
   that file's header for how a call is attributed to the sketch.
3. ``/p5.min.js`` and ``/p5.brush.js``.
4. ``START_PATH``: ``__brushrl_start(seed)`` (one-shot, deleted when called): re-seeds
   ``Math.random`` with mulberry32(seed) and p5.brush's two PRNGs from it (``brush.seed``,
   ``brush.noiseSeed``: p5.brush seeded them from ``Math.random`` at load), wraps every p5 function
   (the gate's allowlist, ``brushrl.gate.policy.ALLOWED_P5_GLOBALS``, become entries, the rest
   guards) and every brush method (counted in ``calls``), locks the language's prototypes and p5's
   classes, and tells Python the harness got this far (``{phase: "sketch"}``): a deadline hit
   before that is the machine's fault, not the sketch's.
5. ``SKETCH_PATH``: the sketch (``//# sourceURL=sketch.js``).

Steps 1-3 run before the sketch is known (``brushrl.render.page.SketchPage`` holds the requests of
4 and 5), which is what lets a renderer keep a spare page loaded while the previous sketch draws.

On the window ``load`` event (after the sketch's top level, before p5 starts) the harness pins
trampolines over the sketch's entry points (``setup`` also starts the clock and sets
``pixelDensity(1)``) and registers a p5 addon after p5.brush's: its ``postsetup`` hook finishes a
sketch without ``draw``, its ``postdraw`` hook stops a looping sketch after its first frame and
finishes.

"Finish" captures the document's only WebGL2 canvas with the ``toDataURL`` taken in step 2 (a
page screenshot loses the WEBGL back buffer) and pushes ``{phase: "done", errors, png, canvas,
capture, frames, calls, forbidden, draw_s, sketch_s}`` to Python once; the first error finishes
too, without a capture. Every refused call is pushed at once as ``{phase: "forbidden", name}``
and listed in ``forbidden`` (name -> calls). Python never evaluates in the page, so a sketch stuck
in ``while (true) {}`` cannot block the renderer: it just never reports and its context is closed
at the deadline.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

#: Fake origin the page is served from; every request is answered by ``page.route``.
ORIGIN = "http://brushrl.render"

#: Vendored browser libraries, relative to the js folder (installed by ``npm ci --prefix js``).
P5_FILE = "node_modules/p5/lib/p5.min.js"
BRUSH_FILE = "node_modules/p5.brush/dist/p5.brush.js"

#: The wrapper factory (its own script, so its frames are recognisable). ``wrap(original, before)``
#: returns a function that calls ``before(arguments, this, wrapper)`` and then ``original`` with
#: what it returned, unless that is ``SKIP`` (the call is refused: it returns undefined);
#: ``vetted(f, self, args)`` is how the harness itself calls p5.
GATE_JS = r"""
(() => {
  'use strict';
  const { apply, construct } = Reflect;
  const SKIP = Object.freeze({});
  const wrap = (original, before) => {
    const wrapper = function () {
      const args = before(arguments, this, wrapper);
      if (args === SKIP) return undefined;
      return new.target ? construct(original, args) : apply(original, this, args);
    };
    return wrapper;
  };
  const vetted = (f, self, args) => apply(f, self, args);
  Object.defineProperty(window, '__brushrl_gate', { configurable: true,
    value: Object.freeze({ file: 'brushrl-gate.js', wrap, vetted, SKIP }) });
})();
//# sourceURL=brushrl-gate.js
"""

#: Seeded ``Math.random`` of both pages (mulberry32, Tommy Ettinger, public domain: the PRNG family
#: p5.brush uses); ``s`` is the state, set from the render's seed by ``__brushrl_start``. One text,
#: put in place of ``/*PRNG*/`` in each page's script, so the record and the replay page draw the
#: same numbers.
PRNG_JS = """let s = 0;
  Math.random = function random() {
    s = (s + 0x6D2B79F5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };"""

#: The harness proper (``harness.js`` next to this file); ``page_html`` prepends its ``CONFIG``.
HARNESS_JS = (Path(__file__).with_name("harness.js")).read_text().replace("/*PRNG*/", PRNG_JS)

#: The replay page's script (``replay.js``): no sketch code runs in that page (``brushrl.render.calllog``).
REPLAY_JS = (Path(__file__).with_name("replay.js")).read_text().replace("/*PRNG*/", PRNG_JS)

#: What a page is for: ``direct`` (the sketch paints and its canvas is captured), ``record`` (the
#: sketch runs and its calls are logged, nothing is captured) or ``replay`` (a validated log paints).
PAGE_KINDS = ("direct", "record", "replay", "bare")
#: ``bare`` (benchmarks only, never scored): the replay page's document running the sketch itself,
#: without the harness: the path before the in-page wrapping.

def find_js_dir() -> Path:
    """The folder holding ``node_modules`` with p5 and p5.brush.

    ``$BRUSHRL_JS_DIR`` wins; otherwise the first ``js/`` folder with ``node_modules`` found walking
    up from this package (the repository checkout).

    Raises:
        FileNotFoundError: if neither has both library files; the message says to run
            ``npm ci --prefix js``.
    """
    env = os.environ.get("BRUSHRL_JS_DIR")
    candidates = [Path(env)] if env else [p / "js" for p in Path(__file__).resolve().parents]
    for cand in candidates:
        if (cand / P5_FILE).is_file() and (cand / BRUSH_FILE).is_file():
            return cand
    where = f"BRUSHRL_JS_DIR={env}" if env else f"any js/ folder above {Path(__file__).parent}"
    raise FileNotFoundError(
        f"p5 / p5.brush not found in {where} (need {P5_FILE} and {BRUSH_FILE}); "
        "run `npm ci --prefix js` in the repository root or set BRUSHRL_JS_DIR"
    )


def load_assets(js_dir: Path | None = None) -> dict[str, bytes]:
    """Read the two library files once: ``{"/p5.min.js": bytes, "/p5.brush.js": bytes}``."""
    js_dir = js_dir or find_js_dir()
    return {
        "/p5.min.js": (js_dir / P5_FILE).read_bytes(),
        "/p5.brush.js": (js_dir / BRUSH_FILE).read_bytes(),
    }


def csp(nonce: str) -> str:
    """Content-Security-Policy of the page: scripts only from the fake origin or with ``nonce``
    (no ``unsafe-eval``), no network connections, images only from the origin/data/blob."""
    return (
        "default-src 'none'; "
        f"script-src 'self' 'nonce-{nonce}'; "
        "connect-src 'none'; "
        "img-src 'self' data: blob:; "
        "style-src 'self' 'unsafe-inline'; "
        "font-src 'self' data:; "
        "worker-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _inline(js: str) -> str:
    # An inline <script> ends at the first "</script"; escape it so the sketch cannot close it.
    return js.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


#: Longest report a page sends, characters (JSON text): the harness replaces a longer one with an
#: error, and the driver refuses one longer unread (``page.SketchPage._report``). A 2048-pixel
#: PNG as a data URL is at most ~22 MB; a record page's log at its value budget a few MB.
MAX_REPORT_CHARS = 48_000_000


def harness_config(binding: str, record: bool = False) -> dict:
    """The ``CONFIG`` object of ``harness.js`` for one page (JSON-serialisable); ``record`` turns
    the page into a record page (``brushrl.render.calllog``)."""
    from brushrl.gate.policy import ALLOWED_JS_GLOBALS, ALLOWED_P5_GLOBALS, P5_ENTRY_POINTS
    from brushrl.gate.names import load_js_names
    from brushrl.render.calllog import (BRUSH_FIELDS, BRUSH_NAMES, RECORDED_P5, RECORDED_RENDERER, REPLAYABLE_BRUSH,
                                        Bounds)

    return {
        "binding": binding,
        "origin": ORIGIN,
        "allowedP5": sorted(ALLOWED_P5_GLOBALS),
        "allowedJs": sorted(ALLOWED_JS_GLOBALS),
        "entryPoints": sorted(P5_ENTRY_POINTS),
        "record": record,
        "recordP5": sorted(RECORDED_P5),
        "recordRenderer": sorted(RECORDED_RENDERER),
        "brushExports": sorted(load_js_names().brush_exports),
        "replayableBrush": sorted(REPLAYABLE_BRUSH),
        # p5.brush's own lists, in its order (the messages of its throws name them)
        "brushNames": list(BRUSH_NAMES),
        "fieldNames": list(BRUSH_FIELDS),
        # one more than the validator admits, so an overfull log is rejected by the validator
        "maxLog": Bounds().max_entries + 1,
        "maxValues": Bounds().max_values,
        "maxReport": MAX_REPORT_CHARS,
    }


def harness_digest() -> str:
    """SHA-256 (first 16 hex digits) of the page scripts, the allowlists they enforce and the call
    log's validator (``calllog.py``, whose tables and bounds decide what a replay holds): part of
    the renderer's ``env``, so a render cache never serves a result the pages would now judge
    differently."""
    import hashlib

    validator = Path(__file__).with_name("calllog.py").read_text()
    config = harness_config("")
    return hashlib.sha256((GATE_JS + HARNESS_JS + REPLAY_JS + json.dumps(config) + validator).encode()).hexdigest()[:16]


#: The two scripts a page waits for (``brushrl.render.page.SketchPage`` holds their requests until
#: the sketch is known): the harness's start with the render's seed, then the sketch.
START_PATH, SKETCH_PATH = "/start.js", "/sketch.js"


def page_html(nonce: str, binding: str, kind: str = "direct") -> str:
    """The HTML document of one page (``kind`` in :data:`PAGE_KINDS`); the page reports its
    outcome through the exposed binding named ``binding``. It holds no sketch: its last two
    scripts are ``START_PATH`` and ``SKETCH_PATH``, served as ``start_js(seed)`` and
    ``sketch_js(code)`` (a replay page: ``calllog.replay_program(log)``)."""
    if kind not in PAGE_KINDS:
        raise ValueError(f"page kind {kind!r} is not one of {PAGE_KINDS}")
    n = html.escape(nonce, quote=True)
    if kind in ("replay", "bare"):
        scripts = (f'<script nonce="{n}">{{ const CONFIG = {_inline(json.dumps({"binding": binding}))};\n'
                   f"{_inline(REPLAY_JS)}}}\n//# sourceURL=brushrl-replay.js\n</script>")
    else:
        config = json.dumps(harness_config(binding, record=kind == "record"))
        scripts = (f'<script nonce="{n}">{GATE_JS}</script>'
                   # a block, so CONFIG is not a global the sketch could collide with
                   f'<script nonce="{n}">{{ const CONFIG = {_inline(config)};\n{HARNESS_JS}}}\n'
                   "//# sourceURL=brushrl-harness.js\n</script>")
    return (
        '<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        '<meta http-equiv="x-dns-prefetch-control" content="off">'
        "<style>html,body{margin:0;background:#fff;overflow:hidden}</style>"
        f"{scripts}"
        '<script src="/p5.min.js"></script>'
        # a record page draws nothing: its `brush` is the harness's recording stubs
        + ("" if kind == "record" else '<script src="/p5.brush.js"></script>')
        + f'<script src="{START_PATH}"></script><script src="{SKETCH_PATH}"></script>'
        "</head><body></body></html>"
    )


def start_js(seed: int) -> str:
    """``START_PATH``'s body: the harness's one-shot start with the render seed (uint32; reduced
    modulo 2**32), which re-seeds ``Math.random`` and p5.brush before the sketch runs."""
    return f"window.__brushrl_start({int(seed) & 0xFFFFFFFF});\n//# sourceURL=brushrl-harness.js\n"


def sketch_js(code: str) -> str:
    """``SKETCH_PATH``'s body: the sketch as written, named ``sketch.js`` in stacks and errors."""
    return f"{code}\n//# sourceURL=sketch.js\n"
