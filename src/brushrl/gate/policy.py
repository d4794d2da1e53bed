"""What a sketch may name: the gate's allowlists and deny lists.

A name that a sketch does not declare itself resolves to a global. :func:`classify_global` maps
such a name to ``None`` (allowed) or to the reason code it breaks, checking in this order:

1. ``EXTERNAL_GLOBALS`` and p5's loaders/savers/DOM makers -> ``external_access``;
2. p5's text functions (``text*`` except ``texture*``, ``font*``, ``loadFont``) -> ``text_label``;
3. ``PIXEL_GLOBALS`` and anything with ``shader`` in its name -> ``pixel_access``;
4. ``SHAPE_GLOBALS`` (p5's own 2D/3D shapes and vertices) -> ``bare_primitives``;
5. ``CANVAS_SIZE_GLOBALS`` (resizeCanvas, pixelDensity, ...) -> ``wrong_canvas_size``;
6. ``ALLOWED_P5_GLOBALS``, p5's upper-case constants and ``ALLOWED_JS_GLOBALS`` -> allowed;
7. any other browser global (a name on Chromium's ``window`` that is not an ECMAScript global,
   e.g. ``requestAnimationFrame``, ``performance``, ``name``) -> ``external_access``;
8. anything else (p5 globals off the allowlist such as p5's own ``fill``, ECMAScript globals off
   the allowlist such as ``ArrayBuffer``, names nobody defines) -> ``disallowed_global``.

Member names are judged by the kind of value they are read from (:mod:`brushrl.gate.values`,
:func:`classify_member`): on every value ``EXTERNAL_PROPS`` (``constructor``, ``__proto__``, ...)
reach the global object or the DOM; on a p5 object a member is judged exactly like the global of
that name (so ``translate().text`` is ``text_label``), with ``PIXEL_PROPS`` (``drawingContext``,
``elt``, ``_renderer``, ...) reaching the canvas behind p5; on ``this`` that can be the global
object, ``this.name`` is the global ``name``.
"""

from __future__ import annotations

import re

from brushrl.gate import reasons as R
from brushrl.gate.kinds import Kind
from brushrl.gate.names import JsNames

#: p5 globals a sketch may use: set-up, transforms, randomness, maths, colour and conversions.
#: ``createCanvas`` is further checked for WEBGL and size; upper-case p5 constants are also allowed.
ALLOWED_P5_GLOBALS: frozenset[str] = frozenset(
    """
    createCanvas background push pop translate rotate rotateX rotateY rotateZ scale shearX shearY
    applyMatrix resetMatrix angleMode noLoop loop isLooping redraw width height frameCount
    windowWidth windowHeight
    random randomSeed randomGaussian noise noiseSeed noiseDetail shuffle
    abs ceil floor round min max sqrt sq pow exp log mag dist map lerp constrain norm fract
    sin cos tan asin acos atan atan2 degrees radians
    createVector color lerpColor paletteLerp red green blue alpha hue saturation brightness
    lightness colorMode
    int float str boolean byte char unchar hex unhex nf nfc nfp nfs print
    """.split()
)

#: ECMAScript built-ins a sketch may use. ``setTimeout``/``setInterval`` are further restricted to
#: a function argument (a string argument is an eval). Memory-raw types (ArrayBuffer, typed
#: arrays), ``Reflect``/``Proxy`` and ``eval``/``Function`` are not here.
ALLOWED_JS_GLOBALS: frozenset[str] = frozenset(
    """
    Math Number String Boolean Array Object JSON Map Set WeakMap WeakSet Symbol Date Promise
    Error TypeError RangeError parseInt parseFloat isNaN isFinite NaN Infinity console
    setTimeout setInterval clearTimeout clearInterval
    """.split()
)

#: Globals that reach outside the sketch (network, DOM, storage, code evaluation, the global
#: object, the p5 constructor with its ``p5.instance``) -> ``external_access``.
EXTERNAL_GLOBALS: frozenset[str] = frozenset(
    """
    fetch XMLHttpRequest WebSocket WebSocketStream WebTransport EventSource importScripts Worker
    SharedWorker ServiceWorker Worklet navigator RTCPeerConnection webkitRTCPeerConnection
    RTCDataChannel RTCSessionDescription document window globalThis self top parent frames opener
    frameElement location history localStorage sessionStorage indexedDB caches cookieStore
    eval Function Reflect Proxy WebAssembly Image Audio Option Blob File FileReader URL
    URLSearchParams createImageBitmap OffscreenCanvas open close postMessage alert confirm prompt
    Request Response Headers BroadcastChannel MessageChannel MessagePort customElements DOMParser
    XMLSerializer Document HTMLElement HTMLCanvasElement HTMLImageElement MutationObserver
    p5 select selectAll removeElements remove getItem storeItem removeItem clearStorage
    downloadFile writeFile encodeAndDownloadGif getURL getURLParams getURLPath cursor noCursor
    requestPointerLock exitPointerLock describe describeElement textOutput gridOutput
    createGraphics createFramebuffer createWriter createElement createImg createVideo createAudio
    createCapture createA createButton createCheckbox createColorPicker createDiv createFileInput
    createInput createP createRadio createSelect createSlider createSpan
    """.split()
)

#: Non-p5 text globals -> ``text_label`` (p5's are matched by prefix, see :func:`classify_global`).
TEXT_GLOBALS: frozenset[str] = frozenset({"FontFace", "loadFont", "parseFontData"})

#: Globals that read or write pixels, or draw something other than brush marks -> ``pixel_access``.
PIXEL_GLOBALS: frozenset[str] = frozenset(
    """
    loadPixels pixels updatePixels set get drawingContext filter image copy blend saveCanvas
    createImage tint noTint imageMode texture textureMode textureWrap getTexture
    getFilterGraphicsLayer imageLight panorama ImageData
    """.split()
)

#: p5's own shape calls -> ``bare_primitives`` (the 1.x names ``curve``, ``curveVertex`` and
#: ``quadraticVertex`` are kept: a model trained on 1.x code still writes them).
SHAPE_GLOBALS: frozenset[str] = frozenset(
    """
    arc ellipse circle line point quad rect square triangle bezier curve spline beginShape
    endShape vertex bezierVertex curveVertex quadraticVertex splineVertex beginContour
    endContour normal vertexProperty bezierOrder splineProperty splineProperties curveDetail
    plane box sphere cylinder cone ellipsoid torus model createModel buildGeometry freeGeometry
    """.split()
)

#: Allowed p5 functions that return p5 itself (measured on p5 2.3.4 in Chromium, checked by
#: tests/test_sandbox.py): the transforms return the renderer, the shears and matrix calls the
#: instance, createCanvas the renderer. Every other allowed p5 function returns a number, string,
#: boolean, array, vector, colour, undefined or a promise of undefined.
P5_OBJECT_RETURNS: frozenset[str] = frozenset(
    """
    createCanvas translate rotate rotateX rotateY rotateZ scale shearX shearY applyMatrix
    resetMatrix
    """.split()
)

#: Allowed p5 and ECMAScript functions whose result is always a number (NaN included) or a
#: boolean, whatever their arguments: usable as a computed key on any value (``pts[floor(t)]``).
#: ``random`` is not one (``random(array)`` returns an element).
NUMERIC_GLOBALS: frozenset[str] = frozenset(
    """
    abs ceil floor round min max sqrt sq pow exp log mag dist map lerp constrain norm fract sin
    cos tan asin acos atan atan2 degrees radians randomGaussian noise red green blue alpha hue
    saturation brightness lightness int float byte unchar unhex Number parseInt parseFloat isNaN
    isFinite
    """.split()
)

#: Allowed ECMAScript globals that are objects or constructors: their members are the language's
#: (the prototype-chain names of ``EXTERNAL_PROPS`` aside), and ``new`` of one builds a plain
#: object the sketch owns.
NAMESPACE_GLOBALS: frozenset[str] = frozenset(
    """
    Math Number String Boolean Array Object JSON Map Set WeakMap WeakSet Symbol Date Promise Error
    TypeError RangeError console
    """.split()
)

#: Globals the gate checks at their call (WEBGL and size, a function callback): reached as a
#: member of ``this`` or of a p5 object they would skip that check.
CHECKED_CALLS: dict[str, str] = {
    "createCanvas": R.WRONG_CANVAS_SIZE,
    "pixelDensity": R.WRONG_CANVAS_SIZE,
    "setTimeout": R.EXTERNAL_ACCESS,
    "setInterval": R.EXTERNAL_ACCESS,
}

#: Globals that change the canvas size after createCanvas -> ``wrong_canvas_size``.
CANVAS_SIZE_GLOBALS: frozenset[str] = frozenset(
    {"resizeCanvas", "pixelDensity", "noCanvas", "fullscreen"}
)

#: Member names that lead to the global object, code evaluation or the DOM -> ``external_access``.
EXTERNAL_PROPS: frozenset[str] = frozenset(
    """
    constructor __proto__ prototype __defineGetter__ __defineSetter__ __lookupGetter__
    __lookupSetter__ caller callee getPrototypeOf setPrototypeOf getOwnPropertyDescriptor
    getOwnPropertyDescriptors getOwnPropertyNames defineProperty defineProperties fromCharCode
    fromCodePoint prepareStackTrace captureStackTrace getThis getFunction innerHTML outerHTML
    insertAdjacentHTML srcdoc ownerDocument defaultView contentWindow contentDocument
    sendBeacon
    """.split()
)

#: Member names that lead to the canvas or renderer behind p5 -> ``pixel_access``.
PIXEL_PROPS: frozenset[str] = frozenset(
    {
        "drawingContext",
        "pixels",
        "loadPixels",
        "updatePixels",
        "elt",
        "canvas",
        "_renderer",
        "_pInst",
        "GL",
    }
)

#: brush methods that put marks on the canvas (p5.brush 2.2.2 ``src/index.shared.js``: primitives,
#: strokes and the hatch/mass array makers). ``hatch``, ``wash`` and ``mass`` only set state.
BRUSH_PAINTING_METHODS: frozenset[str] = frozenset(
    {
        "rect",
        "circle",
        "arc",
        "endShape",
        "endStroke",
        "spline",
        "polygon",
        "line",
        "flowLine",
        "hatchArray",
        "massArray",
    }
)

#: User-defined functions p5 calls (p5 2.3.4 ``entryPoints``); a sketch may declare these.
P5_ENTRY_POINTS: frozenset[str] = frozenset(
    """
    setup draw preload deviceMoved deviceTurned deviceShaken doubleClicked mousePressed
    mouseReleased mouseMoved mouseDragged mouseClicked mouseWheel touchStarted touchMoved
    touchEnded keyPressed keyReleased keyTyped windowResized
    """.split()
)

#: Browser globals a top-level declaration cannot (or must not) replace: ``window``, ``document``,
#: ``location`` and ``top`` are unforgeable; ``brush`` and ``p5`` are the libraries themselves.
RESERVED_TOP_LEVEL: frozenset[str] = frozenset(
    {"window", "document", "location", "top", "brush", "p5"}
)

#: Schemes and URLs inside string literals -> ``external_access`` (data: URIs smuggle images in).
_URL_SCHEMES = r"blob:|javascript:|filesystem:|(https?|wss?|ftp)://"
URL_IN_STRING = re.compile(r"(?i)(?<![\w-])(data:[\w.+-]*[/,;]|" + _URL_SCHEMES + ")")

#: :data:`URL_IN_STRING` without ``data:`` (``render.mode: replay``): a ``data:`` URI reaches no
#: network, and it only kept image data out of the sketch's own captured canvas, which the replay
#: never captures (docs/gate.md, row 31).
URL_IN_STRING_REPLAY = re.compile(r"(?i)(?<![\w-])(" + _URL_SCHEMES + ")")

#: Capitalised ECMAScript built-ins outside :data:`ALLOWED_JS_GLOBALS` that the static gate lets
#: through with ``render.mode: replay`` (docs/gate.md, row 21). They were refused as raw memory
#: for smuggling pixels into the sketch's own canvas; under replay that canvas is never captured,
#: the harness leaves them alone on the record page (they only compute there), a typed array handed
#: to brush is logged as unsupported and refused (``invalid_call``) and the memory cap bounds
#: their size. Not here: shared memory (``SharedArrayBuffer``, ``Atomics``) and
#: ``FinalizationRegistry`` (its callbacks run when the collector decides, with no library frame
#: on the stack); ``eval``, ``Function``, ``Reflect``, ``Proxy``, ``WebAssembly`` stay in
#: :data:`EXTERNAL_GLOBALS`.
REPLAY_ECMASCRIPT_GLOBALS: frozenset[str] = frozenset(
    """
    ArrayBuffer DataView Int8Array Uint8Array Uint8ClampedArray Int16Array Uint16Array Int32Array
    Uint32Array Float32Array Float64Array BigInt64Array BigUint64Array RegExp BigInt Intl WeakRef
    AggregateError EvalError ReferenceError SyntaxError URIError
    """.split()
)

_P5_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")
_EXTERNAL_P5_PREFIXES = ("load", "save", "http")


def classify_global(name: str, names: JsNames) -> str | None:
    """Reason code for a sketch's reference to the global ``name``, or None when it is allowed.

    ``brush`` is not judged here (see the static gate), nor are the call-shape rules for
    ``createCanvas`` and ``setTimeout``/``setInterval``.
    """
    is_p5 = name in names.p5_globals
    if name in EXTERNAL_GLOBALS:
        return R.EXTERNAL_ACCESS
    if (
        is_p5
        and name.startswith(_EXTERNAL_P5_PREFIXES)
        and name not in ("loadPixels", "saveCanvas")
    ):
        return R.EXTERNAL_ACCESS
    if name in TEXT_GLOBALS or (
        is_p5 and name.startswith(("text", "font")) and not name.startswith("texture")
    ):
        return R.TEXT_LABEL
    if name in PIXEL_GLOBALS or (is_p5 and "shader" in name.lower()):
        return R.PIXEL_ACCESS
    if name in SHAPE_GLOBALS:
        return R.BARE_PRIMITIVES
    if name in CANVAS_SIZE_GLOBALS:
        return R.WRONG_CANVAS_SIZE
    if name in ALLOWED_P5_GLOBALS or name in ALLOWED_JS_GLOBALS:
        return None
    if is_p5 and _P5_CONSTANT.match(name):
        return None
    if name in names.browser_globals and not is_p5:
        return R.EXTERNAL_ACCESS
    return R.DISALLOWED_GLOBAL


def classify_member(name: str, kind, names: JsNames) -> str | None:
    """Reason code for reading member ``name`` of a value of :class:`brushrl.gate.values.Kind`
    ``kind``, or None when it is allowed (``brush`` members are judged by the static gate).

    * every kind: ``EXTERNAL_PROPS`` -> ``external_access`` (``prototype`` is allowed on the
      sketch's own functions: ES5 constructors);
    * ``P5``: ``PIXEL_PROPS`` -> ``pixel_access``; ``CHECKED_CALLS`` -> their code; else the
      global of that name's code (:func:`classify_global`), so only allowed p5 names pass;
    * ``WINDOW`` (``this`` that can be window): a name on window (a p5, browser or ECMAScript
      global, ``brush``) is judged like that global; any other name is a fresh window property;
    * others: allowed (their values are the sketch's own or the language's, see ``values``).
    """
    if name in EXTERNAL_PROPS and not (kind is Kind.FUNCTION and name == "prototype"):
        return R.EXTERNAL_ACCESS
    if kind is Kind.P5 or kind is Kind.WINDOW:
        if name in CHECKED_CALLS:
            return CHECKED_CALLS[name]
        if kind is Kind.P5 and name in PIXEL_PROPS:
            return R.PIXEL_ACCESS
        if kind is Kind.WINDOW:
            if name in ("brush", *RESERVED_TOP_LEVEL):
                return R.EXTERNAL_ACCESS
            known = name in names.p5_globals or name in names.browser_globals \
                or name in names.ecmascript_globals
            if not known:
                return None
        return classify_global(name, names)
    return None
