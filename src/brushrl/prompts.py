"""The policy's prompts: the system prompt (skeleton + brush whitelist) and the user prompts.

The system prompt follows the lesson of the seed systems: a short, strict whitelist of brush
methods and a fixed sketch skeleton work better than a long API reference (a long reference made
policies invent method names). It is written for p5.js 2.x with p5.brush 2.x loaded as the global
``brush``.
"""

from __future__ import annotations

import random
import re

from brushrl.config import DEFAULT_WHITELIST, PromptsConfig
from brushrl.corpus.sketch import PAINTING_PLACEHOLDER, sketch_source

#: How each known brush method is shown to the policy: call signature and, if needed, a range note.
#: Ranges are p5.brush 2.x's own (fill opacity 0..255; bleed, texture, border and curvature 0..1).
METHOD_DOCS: dict[str, str] = {
    "scaleBrushes": "brush.scaleBrushes(factor)  (only the call in the skeleton)",
    "noStroke": "brush.noStroke()",
    "fill": "brush.fill(colorHex, opacity)",
    "noFill": "brush.noFill()",
    "fillBleed": "brush.fillBleed(amount)  amount 0 to 1",
    "fillTexture": "brush.fillTexture(amount, borderIntensity)  both 0 to 1",
    "beginShape": "brush.beginShape(curvature)  curvature 0 to 1",
    "vertex": "brush.vertex(x, y)",
    "endShape": "brush.endShape(true)",
    "circle": "brush.circle(x, y, radius)  a filled disc",
}


def build_system_prompt(whitelist: list[str], canvas_size: int = 600) -> str:
    """Render the system prompt for a brush-method whitelist and canvas size.

    Args:
        whitelist: brush method names the policy may call (e.g. ``list(DEFAULT_WHITELIST)``); names
            without an entry in ``METHOD_DOCS`` are listed as ``brush.name(...)``.
        canvas_size: square canvas side in pixels; the skeleton's ``createCanvas`` uses it.

    Returns:
        The prompt text (plain text with one fenced skeleton).

    Raises:
        ValueError: empty whitelist.
    """
    if not whitelist:
        raise ValueError("the brush whitelist is empty")
    skeleton = sketch_source([PAINTING_PLACEHOLDER], canvas_size)
    methods = "\n".join(f"- {METHOD_DOCS.get(name, f'brush.{name}(...)')}" for name in whitelist)
    half = canvas_size // 2
    return (
        "You paint watercolours by writing a p5.js 2.x sketch that uses the p5.brush library, "
        "available as the global `brush`.\n"
        "Reply with exactly one ```js code block and nothing else.\n\n"
        "Keep this skeleton as it is and put the painting where the comment is:\n"
        f"```js\n{skeleton}\n```\n\n"
        f"After the translate, x and y run from 0 to {canvas_size}, origin at the top left, "
        f"centre at ({half}, {half}). Angles are in degrees. Colours are hex strings such as "
        '"#e08a72"; opacity runs from 0 to 255.\n\n'
        f"Use only these brush methods:\n{methods}\n\n"
        "Every mark is a filled shape: brush.fill, then brush.beginShape, at least three "
        "brush.vertex calls, then brush.endShape(true). Stems and leaves are long narrow filled "
        "shapes. Paint each petal two or three times over in translucent washes, about 10 to 25 "
        "filled shapes in all, on a pale cream background.\n"
        "Never call any other brush method, and never call bare p5 drawing functions such as "
        "ellipse, rect, line, vertex or beginShape. No text, no images, no network."
    )


#: The built-in system prompt for the default whitelist and a 600 x 600 canvas.
SYSTEM_PROMPT: str = build_system_prompt(list(DEFAULT_WHITELIST))


def resolve_system_prompt(cfg: PromptsConfig, whitelist: list[str], canvas_size: int = 600) -> str:
    """``cfg.system_prompt`` when set, else the built-in prompt for ``whitelist`` and ``canvas_size``."""
    if cfg.system_prompt is not None:
        return cfg.system_prompt
    return build_system_prompt(whitelist, canvas_size)


def user_prompt(subject: str, template: str) -> str:
    """The user prompt: ``template`` with ``{subject}`` replaced (other braces are left alone).

    Raises:
        ValueError: ``template`` has no ``{subject}`` placeholder.
    """
    if "{subject}" not in template:
        raise ValueError(f"prompt template has no {{subject}} placeholder: {template!r}")
    return template.replace("{subject}", subject)


def sample_prompts(cfg: PromptsConfig, n: int, rng: random.Random) -> list[str]:
    """``n`` user prompts, each for a subject drawn uniformly (with replacement) from ``cfg.subjects``.

    Raises:
        ValueError: ``cfg.subjects`` is empty or the template lacks ``{subject}``.
    """
    if not cfg.subjects:
        raise ValueError("prompts.subjects is empty")
    return [user_prompt(rng.choice(cfg.subjects), cfg.template) for _ in range(n)]


def chat_messages(system: str, user: str) -> list[dict[str, str]]:
    """A system + user conversation in the OpenAI / Hugging Face chat format."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


#: The user turn that shows the policy a critique of its painting and asks for a revision (multi-turn
#: revision and ``brushrl pool build``'s refinement rounds).
REVISION_TEMPLATE = (
    "Here is a critique of the painting your sketch produced:\n\n{critique}\n\n"
    "Revise the sketch to address it. Reply with the whole revised sketch in one ```js block."
)


def revision_prompt(critique: str) -> str:
    """The user turn asking for a revision after ``critique`` (``REVISION_TEMPLATE``)."""
    return REVISION_TEMPLATE.format(critique=critique.strip())


def subject_of(prompt: str, template: str) -> str | None:
    """The subject a user prompt was made from with ``template`` (inverse of :func:`user_prompt`),
    or None when ``prompt`` does not match it."""
    head, _, tail = template.partition("{subject}")
    m = re.fullmatch(re.escape(head) + "(.+?)" + re.escape(tail), prompt, flags=re.S)
    return m.group(1) if m else None
