"""The runtime gate: judge what a render produced.

Checks, in order:

1. what the sandbox refused, independent of the static gate: ``sandbox_violation`` for any entry
   of ``RenderResult.refused`` (a blocked request, dialog, popup, download, navigation, memory
   kill) and for every ``RenderResult.forbidden`` entry that is not a p5 function (a drawing or
   read-back surface, the DOM, a window function, a navigation, a smuggled native function); a p5
   function the page refused (``p5.text``) is failed with its static code (``text_label``), the
   first by static priority;
2. ``not_whitelisted``: the sketch called a brush method off ``cfg.whitelist`` (counted in the
   page, ``RenderResult.brush_calls``), when ``cfg.enforce_whitelist``;
3. ``invalid_call`` / ``work_budget``: the call log recorded in the sketch's page could not be
   replayed (``RenderResult.rejected``, ``brushrl.render.calllog``);
4. ``render_error`` (status ``error``), ``render_timeout`` (status ``timeout``);
5. ``wrong_canvas_size`` (the PNG's IHDR width/height differ from ``canvas_size``), then
   ``blank_canvas`` (``paint_fraction < cfg.min_paint_fraction``), then ``text_in_painting``
   (:func:`legible` text in ``RenderResult.text``, read on the renderer), else pass. The size comes
   before blankness because the paint fraction of a wrongly sized canvas says nothing about the
   requested picture.

An ``infra`` render is NOT judged: the sketch did not cause it, so it must not score 0.
:func:`check_runtime` raises :class:`InfraRender` (a ``ValueError``) for it, and for an ``ok``
render without valid PNG bytes (a renderer bug, not a sketch fault); the reward layer turns
that into a None reward.
"""

from __future__ import annotations

import re
import struct

from brushrl.config import GateConfig
from brushrl.gate import reasons as R
from brushrl.gate.names import load_js_names
from brushrl.gate.policy import classify_global
from brushrl.types import PASS, GateVerdict, RenderResult

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


#: What makes a reading text rather than a mark: Latin letters and digits.
_ALNUM = re.compile(r"[A-Za-z0-9]")
_LETTER = re.compile(r"[A-Za-z]")


def legible(found: list[tuple[str, float]] | None, min_confidence: float, min_chars: int) -> list[str]:
    """The readings of ``RenderResult.text`` that count as text: confidence ``>= min_confidence``
    and at least ``min_chars`` Latin letters or digits, two of them letters (``"YE5"`` is text,
    ``"025"`` a stray mark). ``found`` None (not read) gives ``[]``."""
    return [text for text, conf in found or []
            if conf >= min_confidence and len(_ALNUM.findall(text)) >= min_chars and len(_LETTER.findall(text)) >= 2]


class InfraRender(ValueError):
    """The render failed for infrastructure reasons; it has no gate verdict (reward is None)."""


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` in pixels from a PNG's IHDR chunk (PNG spec, section 11.2.2).

    Raises:
        ValueError: not a PNG or IHDR is not the first chunk.
    """
    if len(png) < 24 or png[:8] != PNG_SIGNATURE or png[12:16] != b"IHDR":
        raise ValueError("not a PNG (bad signature or no IHDR chunk first)")
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def forbidden_code(name: str) -> str:
    """Reason code of one ``RenderResult.forbidden`` entry: a p5 function's static code
    (``p5.text`` -> ``text_label``; a p5 function on the allowlist cannot be refused, so
    ``disallowed_global`` stands in), else ``sandbox_violation``."""
    if name.startswith("p5."):
        member = name[3:].rstrip("=")
        return classify_global(member, load_js_names()) or R.DISALLOWED_GLOBAL
    return R.SANDBOX_VIOLATION


def sandbox_verdict(render: RenderResult, cfg: GateConfig) -> GateVerdict | None:
    """The failing verdict for what the sandbox refused or counted (module docstring, steps 1-2),
    or None when it refused nothing."""
    refused = [f"refused {r}" for r in render.refused]
    coded = [(forbidden_code(name), f"{name} x{n}") for name, n in render.forbidden.items()]
    sandbox = refused + [what for code, what in coded if code == R.SANDBOX_VIOLATION]
    if sandbox:
        return GateVerdict(R.SANDBOX_VIOLATION, "; ".join(sandbox)[:500], "runtime")
    if coded:
        code = min((c for c, _ in coded), key=R.priority)
        return GateVerdict(code, "the page refused " + "; ".join(w for c, w in coded if c == code)[:480], "runtime")
    if cfg.enforce_whitelist:
        off = sorted(set(render.brush_calls) - set(cfg.whitelist))
        if off:
            return GateVerdict(R.NOT_WHITELISTED, f"the sketch called brush.{', brush.'.join(off)}", "runtime")
    return None


def check_runtime(render: RenderResult, cfg: GateConfig, canvas_size: int) -> GateVerdict:
    """Judge one render.

    Args:
        render: what the renderer returned for the sketch.
        cfg: gate settings (``min_paint_fraction``).
        canvas_size: the expected square side in pixels.

    Returns:
        ``GateVerdict(stage="runtime")``: ``pass`` or ``sandbox_violation`` / a static code for a
        refused p5 function or brush method / ``render_error`` / ``render_timeout`` /
        ``wrong_canvas_size`` / ``blank_canvas`` / ``text_in_painting``.

    Raises:
        InfraRender: ``render.status == "infra"``, or an ``ok`` render whose ``png`` is missing or
            not a PNG. Infra failures are not gate verdicts; the caller makes the reward None.
    """
    if render.status == "infra":
        raise InfraRender(f"infra render failure is not a gate verdict: {render.detail}")
    sandbox = sandbox_verdict(render, cfg)
    if sandbox is not None:
        return sandbox
    if render.rejected:
        return GateVerdict(render.rejected, f"the call log was rejected: {render.detail}"[:500], "runtime")
    if render.status == "error":
        first = render.js_errors[0] if render.js_errors else render.detail
        return GateVerdict(R.RENDER_ERROR, f"the sketch threw: {first}"[:500], "runtime")
    if render.status == "timeout":
        return GateVerdict(
            R.RENDER_TIMEOUT,
            f"deadline hit on all {render.attempts} attempt(s) {render.detail}".strip(),
            "runtime",
        )
    if render.status != "ok":
        raise InfraRender(f"unknown render status {render.status!r}")
    if not render.png:
        raise InfraRender("render status ok but no PNG bytes")
    try:
        width, height = png_size(render.png)
    except ValueError as exc:
        raise InfraRender(f"render status ok but {exc}") from None
    if (width, height) != (canvas_size, canvas_size):
        return GateVerdict(
            R.WRONG_CANVAS_SIZE,
            f"canvas is {width}x{height}, expected {canvas_size}x{canvas_size}",
            "runtime",
        )
    if render.paint_fraction < cfg.min_paint_fraction:
        return GateVerdict(
            R.BLANK_CANVAS,
            f"paint_fraction {render.paint_fraction:.4f} < {cfg.min_paint_fraction} (minimum)",
            "runtime",
        )
    words = legible(render.text, cfg.text_min_confidence, cfg.text_min_chars)
    if words:
        return GateVerdict(R.TEXT_IN_PAINTING, f"the painting reads as text: {words[:3]}"[:500], "runtime")
    return GateVerdict(PASS, f"paint_fraction {render.paint_fraction:.4f}", "runtime")
