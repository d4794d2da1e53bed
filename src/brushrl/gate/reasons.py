"""Gate reason codes, their meaning and their priority.

A gate verdict is ``"pass"`` or exactly one reason code. When a sketch breaks several rules the
static gate reports the one that comes first in :data:`STATIC_PRIORITY`: security breaches first,
then reward hacks (text, pixels, p5 shapes), then API validity, then sketch structure, then
"did it paint at all". Every failure scores 0, so the order only decides which problem the logs
name; it is fixed so that counts of reason codes are comparable across runs.
"""

from __future__ import annotations

from brushrl.types import PASS

NO_SKETCH = "no_sketch_in_response"
TRUNCATED = "truncated"
SYNTAX_ERROR = "syntax_error"
EXTERNAL_ACCESS = "external_access"
TEXT_LABEL = "text_label"
PIXEL_ACCESS = "pixel_access"
BARE_PRIMITIVES = "bare_primitives"
UNKNOWN_BRUSH_METHOD = "unknown_brush_method"
NOT_WHITELISTED = "not_whitelisted"
DISALLOWED_GLOBAL = "disallowed_global"
MISSING_SETUP = "missing_setup"
NAME_COLLISION = "name_collision"
NOT_WEBGL = "not_webgl"
WRONG_CANVAS_SIZE = "wrong_canvas_size"
NO_PAINTING_CALLS = "no_painting_calls"

SANDBOX_VIOLATION = "sandbox_violation"
INVALID_CALL = "invalid_call"
WORK_BUDGET = "work_budget"
RENDER_ERROR = "render_error"
RENDER_TIMEOUT = "render_timeout"
BLANK_CANVAS = "blank_canvas"
TEXT_IN_PAINTING = "text_in_painting"

#: Static reason codes, highest priority first, with what each one means.
STATIC_REASONS: dict[str, str] = {
    NO_SKETCH: "no ```js/```javascript/``` block and the reply itself defines no setup",
    TRUNCATED: "the code stops mid-construct: a parse error or unclosed bracket/string at its end",
    SYNTAX_ERROR: "tree-sitter found ERROR/MISSING nodes (or JSX/module syntax) elsewhere",
    EXTERNAL_ACCESS: (
        "reaches outside the sketch: network, DOM, storage, eval/Function, global object (also "
        "through `this` that can be window), p5 loaders and DOM makers, prototype/constructor "
        "tricks, member names computed at run time on values the sketch did not build, URL/data: "
        "strings, `with`, `import`, entry points that are not plain functions"
    ),
    TEXT_LABEL: "draws or styles text (text, textFont, textSize, ..., FontFace)",
    PIXEL_ACCESS: (
        "reads/writes pixels or bypasses brush rendering (pixels, get/set, image, shaders, filter, "
        "the renderer behind a p5 object), or lets a p5 object escape where the gate cannot "
        "follow it"
    ),
    BARE_PRIMITIVES: "draws with p5's own shapes (rect, ellipse, beginShape, box, ...)",
    UNKNOWN_BRUSH_METHOD: (
        "brush.X where X is not a p5.brush export, or `brush` used as a value / by computed key"
    ),
    NOT_WHITELISTED: "a real brush method outside gate.whitelist (if gate.enforce_whitelist)",
    DISALLOWED_GLOBAL: (
        "a global (or a member of a p5 object or of `this` that can be window) that is neither "
        "declared by the sketch, brush, an allowlisted p5 global nor an allowed ECMAScript "
        "built-in (e.g. p5's own fill, millis, ArrayBuffer, an undefined name)"
    ),
    MISSING_SETUP: "no top-level `function setup` (or `var setup = function`) for p5 to find",
    NAME_COLLISION: (
        "a top-level name (or an assignment) that clashes with a p5 global, a browser global, "
        "brush or p5"
    ),
    NOT_WEBGL: "no createCanvas call, or one without WEBGL as its third argument",
    WRONG_CANVAS_SIZE: (
        "createCanvas size is not the number literals (canvas_size, canvas_size); resizeCanvas, "
        "pixelDensity, noCanvas, fullscreen"
    ),
    NO_PAINTING_CALLS: "no brush painting call (endShape, circle, rect, arc, line, spline, ...)",
}

#: Runtime reason codes, in the order they are checked, with what each one means. A p5 function the
#: page refused is reported with its static code (``text_label`` for ``p5.text``, ...), a brush
#: method off the whitelist as ``not_whitelisted``; both rank after ``sandbox_violation``.
RUNTIME_REASONS: dict[str, str] = {
    SANDBOX_VIOLATION: (
        "the page refused something the sketch did: a drawing/read-back surface (WebGL, 2D, the "
        "canvas element), the DOM, a window function, a navigation, a smuggled native function "
        "(RenderResult.forbidden), or the sandbox refused a request, dialog, popup, download "
        "(RenderResult.refused)"
    ),
    INVALID_CALL: (
        "the sketch's call log cannot be replayed (brushrl.render.calllog): a brush method that "
        "returns a value or takes objects, a p5 call the log may not hold, or an argument that is "
        "not plain, bounded data (a function, a DOM object, an odd string)"
    ),
    WORK_BUDGET: "the sketch's call log is over its budget: calls, argument values, or a number's size",
    RENDER_ERROR: "the render status was `error`: the sketch threw",
    RENDER_TIMEOUT: "the render hit its deadline on every attempt",
    WRONG_CANVAS_SIZE: "the captured PNG is not canvas_size x canvas_size (PNG IHDR header)",
    BLANK_CANVAS: "paint_fraction below gate.min_paint_fraction",
    TEXT_IN_PAINTING: (
        "the painting reads as text: letters built from allowed strokes, read from the PNG "
        "(RenderResult.text, render.text_scan; legible per gate.text_min_confidence/_chars)"
    ),
}

STATIC_PRIORITY: tuple[str, ...] = tuple(STATIC_REASONS)
RUNTIME_ORDER: tuple[str, ...] = tuple(RUNTIME_REASONS)

#: Every verdict the gate can return.
ALL_VERDICTS: tuple[str, ...] = (
    PASS, *STATIC_PRIORITY, SANDBOX_VIOLATION, INVALID_CALL, WORK_BUDGET, RENDER_ERROR, RENDER_TIMEOUT,
    BLANK_CANVAS
)


def priority(code: str) -> int:
    """Rank of a static reason code in :data:`STATIC_PRIORITY` (0 = reported first).

    Raises:
        KeyError: ``code`` is not a static reason code.
    """
    try:
        return STATIC_PRIORITY.index(code)
    except ValueError:
        raise KeyError(code) from None
