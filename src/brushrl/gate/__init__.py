"""The gate: judge a policy reply before (static) and after (runtime) it is rendered.

A failing gate scores 0; a passing one lets the sample be scored. The policy writes arbitrary
JavaScript, so the gate is a security and anti-reward-hacking boundary: it parses the sketch with
tree-sitter and judges what the code does (scope-resolved names, member accesses, call shapes),
never words in comments or strings. The renderer's sandbox is the second layer, independent of
the first. With ``render.mode: replay`` (the default) the renderer is the boundary: the sketch's
page only records its brush and canvas calls, Python validates that log, and a page without sketch
code re-draws it; only that replay is judged and scored (brushrl.render.calllog). The record page
still refuses and reports calls outside the allowlist (brushrl.render.harness), and Chromium runs
in an empty network namespace.

API::

    extract_code(reply) -> str | None
    check_static(reply, cfg: GateConfig, canvas_size, *, replay=False) -> (code | None, GateVerdict(stage="static"))
    check_code(code, cfg, canvas_size, *, replay=False) -> GateVerdict(stage="static")  # already-extracted code
    check_runtime(render: RenderResult, cfg: GateConfig, canvas_size)
        -> GateVerdict(stage="runtime")
        # raises InfraRender (a ValueError) for status "infra": not a verdict, the reward is None

Static reason codes, in priority order (the first one that applies is reported):

======================  ==========================================================================
code                    meaning
======================  ==========================================================================
no_sketch_in_response   no ```js / ```javascript / bare fenced block and no ``setup`` in the reply
truncated               the code stops mid-construct: parse error or unclosed bracket/literal at EOF
syntax_error            tree-sitter ERROR/MISSING nodes elsewhere, JSX, or module ``export``
external_access         network/DOM/storage/eval/Function/global object/p5 loaders and DOM makers,
                        any other browser API (``requestAnimationFrame``), ``.constructor`` /
                        ``__proto__`` tricks, member names computed at run time (unless a
                        number, or on an object the sketch built), URL or data: strings,
                        ``with``, ``import``, ``this`` that can be window used bare or as
                        ``this.fetch``, p5 entry points that are not plain functions
text_label              text, textFont, textSize, textAlign, ..., FontFace
pixel_access            pixels, loadPixels/updatePixels, get/set, image, copy, blend, filter,
                        shaders, drawingContext, saveCanvas, keeping createCanvas's renderer,
                        a p5 object (``translate()`` returns the renderer) escaping into a
                        place the gate cannot follow (an element, a return, an argument)
bare_primitives         p5's own shapes: rect, ellipse, circle, line, beginShape, vertex, box, ...
unknown_brush_method    brush.X not exported by p5.brush 2.2.2; ``brush`` aliased or indexed
not_whitelisted         a real brush method outside ``gate.whitelist`` (if ``enforce_whitelist``)
disallowed_global       any other global: p5 functions off the allowlist (p5's own ``fill``,
                        ``millis``), ECMAScript globals off it (``ArrayBuffer``), undeclared
                        names; the same for members of p5 objects and of window-``this``
missing_setup           no top-level ``function setup`` / ``var setup = function`` (let/const
                        setup is not on window, so p5 never calls it)
name_collision          a top-level declaration or assignment named like a p5 global (``log``,
                        ``hue``), ``brush``, ``p5``, window/document/location/top; a top-level
                        var/function named like a browser global (``var name``); a local ``brush``
not_webgl               no createCanvas, or one without WEBGL as its third argument
wrong_canvas_size       createCanvas size other than the literals (canvas_size, canvas_size);
                        resizeCanvas, pixelDensity other than ``pixelDensity(1)``, noCanvas,
                        fullscreen
no_painting_calls       no brush painting call (endShape, circle, rect, arc, line, spline, ...)
======================  ==========================================================================

Runtime reason codes, checked in this order: ``sandbox_violation`` (the page refused a surface,
DOM or window call, a navigation or a smuggled native function the sketch made, or the sandbox
refused a request/dialog/popup/download: ``RenderResult.forbidden`` / ``refused``), the static
code of a p5 function the page refused (``text_label`` for ``p5.text``), ``not_whitelisted``
(brush methods the page counted), ``invalid_call`` / ``work_budget`` (the call log the sketch's
page recorded cannot be replayed or is over its budget: ``brushrl.render.calllog``; with
``render.mode: replay`` the replayed PNG is what the rest judges), ``render_error`` (the sketch
threw), ``render_timeout``
(deadline on every attempt), ``wrong_canvas_size`` (PNG IHDR size), ``blank_canvas``
(``paint_fraction < gate.min_paint_fraction``), ``text_in_painting`` (the renderer read words in
the PNG: letters built from allowed strokes; ``render.text_scan``, ``runtime.legible``).

The allowlists and deny lists are in :mod:`brushrl.gate.policy`; p5's global names and
p5.brush's exports come from the installed libraries via :mod:`brushrl.gate.names`.
"""

from brushrl.gate.extract import extract_code
from brushrl.gate.reasons import ALL_VERDICTS, RUNTIME_ORDER, STATIC_PRIORITY
from brushrl.gate.runtime import InfraRender, check_runtime, png_size
from brushrl.gate.static import Finding, check_code, check_static, findings_for

__all__ = [
    "ALL_VERDICTS",
    "RUNTIME_ORDER",
    "STATIC_PRIORITY",
    "Finding",
    "InfraRender",
    "check_code",
    "check_runtime",
    "check_static",
    "extract_code",
    "findings_for",
    "png_size",
]
