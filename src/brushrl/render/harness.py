"""The page a sketch runs in: HTML, in-page harness scripts, Content-Security-Policy and the
vendored p5 / p5.brush files.

The page is served from a fake origin (``ORIGIN``) by ``page.route``; nothing else exists on it.
Script order inside ``<head>``:

1. ``PRELUDE_JS`` (inline, nonce): seeds ``Math.random`` with mulberry32(seed), deletes the WebRTC
   constructors, takes the per-render report binding off ``window`` (Playwright
   ``expose_binding``), records errors and unhandled rejections in a closure, and
   defines the frozen ``window.__brushrl`` hooks used by step 4.
2. ``/p5.min.js`` and ``/p5.brush.js`` from the fake origin (``'self'``). p5.brush seeds its own
   PRNG from ``Math.random`` when it is evaluated, so step 1 must come first.
3. The sketch (inline, nonce), preceded by a one-line script that tells Python the harness got
   this far (``{phase: "sketch"}``): a deadline hit before that is the machine's fault, not the
   sketch's.
4. ``ARM_JS`` (inline, nonce): wraps ``setup`` (start clock, ``pixelDensity(1)``) and registers a
   p5 addon after p5.brush's: its ``postsetup`` hook finishes a sketch without ``draw``; its
   ``postdraw`` hook stops a looping sketch after its first frame and finishes. p5's global mode
   starts on the window ``load`` event, after every inline script, so all of this is in place
   before p5 calls ``setup``.

"Finish" captures the canvas with ``toDataURL`` inside the page (a page screenshot loses the WEBGL
back buffer) and pushes ``{phase: "done", errors, png, frames, draw_s}`` to Python once; the first error
finishes too, without a capture. ``calls`` counts the sketch's ``brush.*`` calls by method (every
function of the ``brush`` object is wrapped just before the sketch runs). Python never evaluates in the page, so a sketch stuck in
``while (true) {}`` cannot block the renderer: it just never reports and its context is closed at
the deadline.
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

PRELUDE_JS = r"""
(() => {
  let s = (%(seed)d) >>> 0;  // mulberry32 (Tommy Ettinger, public domain), the PRNG family p5.brush uses
  Math.random = function random() {
    s = (s + 0x6D2B79F5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (const k of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel']) delete window[k];
  // The page pushes to Python through a binding with a per-render name that is taken off window
  // here, out of the sketch's reach. Python never evaluates in the page.
  const report = window[%(binding)s];
  delete window[%(binding)s];
  const errors = [];
  let frames = 0, t0 = performance.now(), tSketch = performance.now(), sent = false;
  const calls = {};  // brush method -> calls made by the sketch (wrappers installed in sketchStarting)
  const say = (x) => { try { return String(x && x.stack ? x.stack : x).slice(0, 300); } catch (e) { return '?'; } };
  const canvas = () => (window.p5 && p5.instance && p5.instance._renderer && p5.instance._renderer.canvas)
    || document.querySelector('canvas');
  const finish = () => {
    if (sent) return;
    sent = true;
    let png = null;
    try { const c = errors.length ? null : canvas(); png = c ? c.toDataURL('image/png') : null; }
    catch (e) { errors.push('capture failed: ' + say(e)); }
    const now = performance.now();
    report({ phase: 'done', errors: errors.slice(0, 20), png, frames, calls,
             draw_s: (now - t0) / 1000, sketch_s: (now - tSketch) / 1000 });
  };
  addEventListener('error', (e) => {
    let msg = say(e.error || e.message);
    // A syntax error carries the document's line: map it to the sketch's own (the number below is
    // the document line just before the sketch's first). Runtime errors say sketch.js (sourceURL).
    const inDoc = e.filename === location.href && e.lineno > %(sketch_line0)d;
    const where = inDoc ? 'sketch.js:' + (e.lineno - %(sketch_line0)d) + ':' + e.colno
      : e.filename ? e.filename.split('/').pop() + ':' + e.lineno + ':' + e.colno : '';
    if (where && !msg.includes(where)) msg = (msg + ' at ' + where).slice(0, 300);
    errors.push(msg); finish();
  });
  addEventListener('unhandledrejection', (e) => { errors.push('unhandled rejection: ' + say(e.reason)); finish(); });
  Object.defineProperty(window, '__brushrl', { value: Object.freeze({
    sketchStarting() {
      // Count the sketch's brush.* calls by wrapping every function of the library object; p5.brush
      // calls its own internals directly, so only the sketch's calls are counted.
      const b = window.brush;
      if (b && typeof b === 'object') {
        for (const k of Object.keys(b)) {
          const f = b[k];
          if (typeof f !== 'function' || /^[A-Z]/.test(k)) continue;  // skip classes (Plot, Polygon...)
          b[k] = function () { calls[k] = (calls[k] || 0) + 1; return f.apply(this, arguments); };
        }
      }
      tSketch = performance.now();
      report({ phase: 'sketch' });
    },
    setupStarted() { t0 = performance.now(); },
    setupFinished() { if (typeof window.draw !== 'function') finish(); },
    frameFinished() { frames += 1; finish(); },
  }) });
})();
"""

ARM_JS = r"""
(() => {
  const H = window.__brushrl, user = window.setup;
  window.setup = async function () {
    H.setupStarted();
    if (typeof window.pixelDensity === 'function') window.pixelDensity(1);
    if (typeof user === 'function') return await user.apply(this, arguments);
  };
  if (window.p5 && typeof p5.registerAddon === 'function') {
    // Registered after p5.brush's addon, so these hooks run after brush has flushed its layers
    // (p5.brush composites at postsetup / postdraw).
    p5.registerAddon((p5, fn, lifecycles) => {
      lifecycles.postsetup = function () { H.setupFinished(); };
      lifecycles.postdraw = function () { if (this.isLooping()) this.noLoop(); H.frameFinished(); };
    });
  }
})();
"""


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


def page_html(code: str, seed: int, nonce: str, binding: str) -> str:
    """The HTML document for one render of ``code`` with ``Math.random`` seeded by ``seed``; the
    page reports its outcome through the exposed binding named ``binding``."""
    n = html.escape(nonce, quote=True)

    def head(sketch_line0: int) -> str:
        values = {"seed": int(seed) & 0xFFFFFFFF, "binding": json.dumps(binding), "sketch_line0": sketch_line0}
        return (
            '<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">'
            "<style>html,body{margin:0;background:#fff;overflow:hidden}</style>"
            f'<script nonce="{n}">{PRELUDE_JS % values}</script>'
            '<script src="/p5.min.js"></script><script src="/p5.brush.js"></script>'
            f'<script nonce="{n}">window.__brushrl.sketchStarting();</script><script nonce="{n}">'
        )

    before = head(head(0).count("\n"))  # the number's digits add no line, so one pass suffices
    return (
        f"{before}{_inline(code)}\n//# sourceURL=sketch.js\n</script>"
        f'<script nonce="{n}">{ARM_JS}</script></head><body></body></html>'
    )
