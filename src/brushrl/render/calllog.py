"""Record and replay: the call log a sketch's page records, validated here, and the program that
re-draws it in a page without sketch code.

The security boundary of a render (docs/reward.md, "the render boundary"). The sketch runs in its
own page (``brushrl.render.harness`` in record mode): p5.brush's methods only *record* their calls,
and p5's calls that the replay needs (:data:`RECORDED_P5`) record and run. Whatever that page
paints is never looked at. Its done report carries the log: a list of entries

* ``["brush", name, args]``: a p5.brush method call;
* ``["p5", name, args]``: one of :data:`RECORDED_P5` (canvas, background, transforms, modes, seeds);
* ``["renderer", name, args]``: one of :data:`RECORDED_RENDERER` on the renderer a transform returned;
* ``["frame"]``: setup() ended; what follows was called in the first draw().

with ``args`` plain data: numbers, strings, booleans, null, lists, and tagged objects
``{"$": tag, "v": ...}`` (:data:`TAGS`). Code in the sketch's page can forge any log, so
:func:`validate_log` treats it as hostile input: only :data:`REPLAYABLE_BRUSH` methods and
:data:`RECORDED_P5` calls, every value typed and bounded, at most ``max_entries`` entries and
``max_values`` values. A valid log then holds nothing a sketch could not have called through the
whitelist, and the replay page (``replay.js``: p5 + p5.brush + this log, nothing else) paints it
with the render's seed. That PNG alone goes to the runtime gate and the scorers.

A rejected log is the sketch's fault and gets a reason code: ``invalid_call`` (a value or method
that cannot be replayed), ``work_budget`` (too many calls, values, vertices or too large a number).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace

from brushrl.config import REPLAYABLE_BRUSH  # in config: its whitelist check reads it too
from brushrl.gate import reasons as R

#: p5 calls the record page logs and the replay runs again: the canvas, the background, the
#: transform stack and the modes and seeds that change what later calls mean (``colorMode`` for
#: colours, ``angleMode`` for rotations, ``randomSeed``/``noiseSeed``, which p5.brush hooks to seed
#: its own generators). Every other allowed p5 function (maths, random, noise, colour makers) only
#: computes values the sketch passes on, which the log holds as numbers.
RECORDED_P5: frozenset[str] = frozenset(
    """
    createCanvas background push pop translate rotate rotateX rotateY rotateZ scale shearX shearY
    applyMatrix resetMatrix angleMode colorMode randomSeed noiseSeed
    """.split()
)

#: Methods of the renderer p5's transforms return (``translate(x, y).rotate(a)``), logged with
#: target ``"renderer"`` and replayed on the replay's renderer: the renderer's own transforms, which
#: take radians whatever ``angleMode`` says.
RECORDED_RENDERER: frozenset[str] = frozenset(
    "push pop translate rotate rotateX rotateY rotateZ scale applyMatrix resetMatrix".split()
)

#: p5.brush 2.2.2's standard brushes and vector fields, in its order (``src/stroke/stroke.js``
#: ``_standard_brushes``, ``src/core/flowfield.js`` ``addStandard``): the record page's stubs throw
#: for any other name, as ``brush.pick``/``brush.set``/``brush.field`` do.
BRUSH_NAMES: tuple[str, ...] = ("pen", "rotring", "2B", "HB", "2H", "cpencil", "pastel", "crayon", "charcoal",
                                "spray", "marker")
BRUSH_FIELDS: tuple[str, ...] = ("hand", "curved", "zigzag", "waves", "seabed", "spiral", "columns")

#: Calls whose numbers are seeds, not coordinates: only finite and exact as a double (a date-like
#: ``randomSeed(Date.now())`` is honest), not bounded by ``Bounds.max_abs``.
SEED_CALLS: frozenset[tuple[str, str]] = frozenset(
    {("p5", "randomSeed"), ("p5", "noiseSeed"), ("brush", "seed"), ("brush", "noiseSeed")})
MAX_SEED = float(2**53)

#: How far outside [0, 1] a colour's sRGB components may be: p5's ``lerpColor`` extrapolates an
#: amount outside [0, 1] (a gradient loop's off-by-one step) and the out-of-gamut colour it makes
#: is what p5.brush paints with on the direct path; the replay rebuilds it as ``color(srgb ...)``,
#: which keeps such components. Beyond this a colour is no colour a sketch means.
COLOR_SLACK = 0.5

#: Value tags of the log (``harness.js`` ``enc``); ``nonfinite`` and ``unsupported`` are logged so
#: that the rejection can say what the sketch passed.
TAGS = ("undefined", "color", "vector", "object")

#: Strings the replay passes on: colour names and hex, CSS colour functions, p5 and p5.brush
#: mode names and brush names. No quotes, backslashes or angle brackets.
_STRING = re.compile(r"^[A-Za-z0-9#%(),.\s/_+-]{0,64}$")
_KEY = re.compile(r"^(?!__)[A-Za-z_][A-Za-z0-9_]{0,31}$")  # no __proto__ and kin

#: Largest |number| in an argument: coordinates of a canvas up to 4096 px, ten canvases out.
MAX_ABS = 40960.0


class CallLogRejected(ValueError):
    """The log cannot be replayed; ``code`` is the gate's reason code, ``detail`` says why."""

    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


@dataclass
class CallLog:
    """A validated log: ``entries`` as recorded (JSON-ready) and ``brush_calls`` (method -> calls)."""

    entries: list
    brush_calls: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Bounds:
    """Budgets of one log. ``max_entries``: calls (a huge sketch of the corpus makes ~2,000);
    ``max_values``: numbers and strings in all arguments; ``max_abs``: largest |number|."""

    max_entries: int = 20000
    max_values: int = 200000
    max_abs: float = MAX_ABS


def _value(v, where: str, bounds: Bounds, count: list[int], depth: int = 0) -> None:
    count[0] += 1
    if count[0] > bounds.max_values:
        raise CallLogRejected(R.WORK_BUDGET, f"more than {bounds.max_values} argument values")
    if v is None or isinstance(v, bool):
        return
    if isinstance(v, (int, float)):
        if not math.isfinite(v) or abs(v) > bounds.max_abs:
            raise CallLogRejected(R.WORK_BUDGET if math.isfinite(v) else R.INVALID_CALL,
                                  f"{where}: number {v!r} outside +-{bounds.max_abs:g}")
        return
    if isinstance(v, str):
        if not _STRING.match(v):
            raise CallLogRejected(R.INVALID_CALL, f"{where}: string {v[:40]!r} is not a colour or mode name")
        return
    if depth > 3:
        raise CallLogRejected(R.INVALID_CALL, f"{where}: nested deeper than 3")
    if isinstance(v, list):
        for x in v:
            _value(x, where, bounds, count, depth + 1)
        return
    if isinstance(v, dict):
        tag = v.get("$")
        if tag == "undefined" and len(v) == 1:
            return
        inner = v.get("v")
        if set(v) == {"$", "v"}:
            if tag == "color" and isinstance(inner, list) and len(inner) == 4 and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                    and -COLOR_SLACK <= x <= 1 + COLOR_SLACK for x in inner):
                count[0] += 4
                return
            if tag == "vector" and isinstance(inner, list) and len(inner) == 3:
                for x in inner:
                    if not isinstance(x, (int, float)) or isinstance(x, bool):
                        raise CallLogRejected(R.INVALID_CALL, f"{where}: vector component {x!r}")
                    _value(x, where, bounds, count, depth + 1)
                return
            if tag == "object" and isinstance(inner, dict) and len(inner) <= 32:
                for k, x in inner.items():
                    if not _KEY.match(k):
                        raise CallLogRejected(R.INVALID_CALL, f"{where}: object key {k[:40]!r}")
                    _value(x, where, bounds, count, depth + 1)
                return
        what = f"a {tag}" if tag in TAGS else f"{str(inner)[:40] or 'a value'}"
        raise CallLogRejected(R.INVALID_CALL, f"{where}: {what} cannot be replayed")
    raise CallLogRejected(R.INVALID_CALL, f"{where}: a {type(v).__name__} cannot be replayed")


def validate_log(raw, bounds: Bounds = Bounds()) -> CallLog:
    """Check a record page's log (hostile data) and count its brush calls.

    Args:
        raw: the done report's ``log`` (decoded JSON: anything).
        bounds: the budgets.

    Returns:
        the :class:`CallLog` (its entries are ``raw``'s, unchanged).

    Raises:
        CallLogRejected: ``invalid_call`` for a malformed entry, a method outside
            :data:`REPLAYABLE_BRUSH` / :data:`RECORDED_P5`, or a value the replay cannot pass on;
            ``work_budget`` for more than ``max_entries`` calls, ``max_values`` values, or a
            number beyond ``max_abs``.
    """
    if not isinstance(raw, list):
        raise CallLogRejected(R.INVALID_CALL, "the page sent no call log")
    if len(raw) > bounds.max_entries:
        raise CallLogRejected(R.WORK_BUDGET, f"{len(raw)} calls > {bounds.max_entries}")
    calls: Counter[str] = Counter()
    count = [0]
    frames = 0
    for i, e in enumerate(raw):
        if e == ["frame"]:
            frames += 1
            if frames > 1:
                raise CallLogRejected(R.INVALID_CALL, f"entry {i}: a second frame marker")
            continue
        if not (isinstance(e, list) and len(e) == 3 and isinstance(e[1], str) and isinstance(e[2], list)):
            raise CallLogRejected(R.INVALID_CALL, f"entry {i} is not [target, name, args]")
        target, name, args = e
        if target == "brush" and name in REPLAYABLE_BRUSH:
            calls[name] += 1
        elif not ((target == "p5" and name in RECORDED_P5) or (target == "renderer" and name in RECORDED_RENDERER)):
            raise CallLogRejected(R.INVALID_CALL, f"entry {i}: {str(target)[:10]}.{name[:40]} cannot be replayed")
        if len(args) > 16:
            raise CallLogRejected(R.INVALID_CALL, f"entry {i}: {target}.{name} with {len(args)} arguments")
        limits = replace(bounds, max_abs=MAX_SEED) if (target, name) in SEED_CALLS else bounds
        for j, a in enumerate(args):
            _value(a, f"{target}.{name} argument {j + 1}", limits, count)
    return CallLog(list(raw), dict(calls))


def replay_program(log: CallLog) -> str:
    """The replay page's ``/sketch.js``: ``__brushrl_replay(entries)`` with the entries as a JSON
    string parsed in the page (a JSON string is a JS string literal; ``ensure_ascii`` escapes
    U+2028/9), so no part of the log is ever JavaScript source."""
    text = json.dumps(log.entries, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return f"window.__brushrl_replay(JSON.parse({json.dumps(text)}));\n"
