"""Damaged corpus sketches: the "before" of the warm start's revision examples.

Each damage takes a corpus sketch (``brushrl.corpus.sketch`` style: plain runs of ``brush.fill`` ->
``brush.beginShape`` -> literal ``brush.vertex`` -> ``brush.endShape(true)``, or ``brush.fill`` ->
``brush.circle``) and breaks it the way a policy's sketch goes wrong, so that the critique the CPU
critic writes of the result, answered by the original sketch, teaches the policy to repair that
fault (``brushrl.policy.revision``):

* ``drop_petals``: about 60% of the marks under a ``// ... petal ...`` comment removed (of all
  marks when the sketch has no such comment): too little paint, empty regions;
* ``push_off_canvas``: about half of the marks moved ~55% of the canvas side in one direction:
  shapes off the canvas, paint in one corner;
* ``swap_palette``: every colour replaced, by rank of first use, with a colour of another flower
  family's palette (colours of the corpus, so each stays one token of the tiny tokenizer): a palette
  far from the subject's;
* ``break_syntax``: one closing bracket removed from a random painting statement, or the sketch
  cut off part-way: the gate fails (``syntax_error`` / ``truncated``).

Every damage is a pure function of ``(code, rng)``; ``None`` when it cannot apply (no marks).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable

from brushrl.corpus.palettes import PALETTES

#: One mark: its ``brush.fill`` line and shape (or disc) lines, as the corpus writes them.
_MARK = re.compile(
    r"^[ \t]*brush\.fill\([^\n]*\);\n"
    r"(?:[ \t]*brush\.beginShape\([^\n]*\);\n(?:[ \t]*brush\.vertex\([^\n]*\);\n)+[ \t]*brush\.endShape\(true\);\n"
    r"|[ \t]*brush\.circle\([^\n]*\);\n)",
    re.M,
)
_COMMENT = re.compile(r"^[ \t]*//([^\n]*)$", re.M)
_XY = re.compile(r"(brush\.(?:vertex|circle)\()\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)")
_HEX = re.compile(r"#[0-9a-fA-F]{6}")
_CONST = re.compile(r'\b(wash|body|deep) = "(#[0-9a-fA-F]{6})"')
_FILL_ARG = re.compile(r'brush\.fill\(("#[0-9a-fA-F]{6}"|wash|body|deep)\s*,')


def _marks(code: str) -> list[tuple[int, int, str]]:
    """``(start, end, section comment)`` of every mark, the comment being the last one above it."""
    comments = [(m.start(), m.group(1).strip().lower()) for m in _COMMENT.finditer(code)]
    out = []
    for m in _MARK.finditer(code):
        section = next((text for pos, text in reversed(comments) if pos < m.start()), "")
        out.append((m.start(), m.end(), section))
    return out


def _without(code: str, spans: list[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        code = code[:start] + code[end:]
    return code


def drop_petals(code: str, rng: random.Random) -> str | None:
    """Remove ~60% of the petal marks (module docstring)."""
    marks = _marks(code)
    petals = [m for m in marks if "petal" in m[2]] or marks
    if len(petals) < 2:
        return None
    k = max(1, round(0.6 * len(petals)))
    return _without(code, [(s, e) for s, e, _ in rng.sample(petals, k)])


def push_off_canvas(code: str, rng: random.Random, size: int = 600) -> str | None:
    """Move ~half of the marks by ~0.55 x ``size`` in one random direction (module docstring)."""
    marks = _marks(code)
    if not marks:
        return None
    chosen = sorted(rng.sample(marks, max(1, len(marks) // 2)), reverse=True)
    angle = rng.uniform(0, 2 * math.pi)
    dx, dy = round(math.cos(angle) * 0.55 * size), round(math.sin(angle) * 0.55 * size)

    def move(m: re.Match) -> str:
        return f"{m.group(1)}{round(float(m.group(2))) + dx}, {round(float(m.group(3))) + dy}"

    for start, end, _ in chosen:
        code = code[:start] + _XY.sub(move, code[start:end]) + code[end:]
    return code


def swap_palette(code: str, rng: random.Random) -> str | None:
    """Map every colour, by rank of first use as a fill (the header's petal constants resolved to
    the fills that use them, ``corpus.build.with_header``), to another flower family's palette colours."""
    draw = code.split("function draw", 1)[-1]
    consts = {name: colour.lower() for name, colour in _CONST.findall(draw)}
    fills = [consts.get(arg, arg.strip('"').lower()) for arg in _FILL_ARG.findall(draw)]
    used = list(dict.fromkeys([c for c in fills if _HEX.fullmatch(c)] + [c.lower() for c in _HEX.findall(draw)]))
    background = re.search(r'background\("(#[0-9a-fA-F]{6})"\)', code)
    used = [c for c in used if not background or c != background.group(1).lower()]
    if not used:
        return None
    families = [f for f, pals in PALETTES.items() if not {c.lower() for p in pals for c in _colours(p)} & set(used)]
    if not families:
        return None
    palette = _colours(PALETTES[rng.choice(sorted(families))][0])
    mapping = {c: palette[i % len(palette)] for i, c in enumerate(used)}
    return _HEX.sub(lambda m: mapping.get(m.group(0).lower(), m.group(0)), code)


def _colours(palette) -> list[str]:
    return [palette.wash, palette.body, palette.deep, palette.centre, palette.pollen, palette.leaf,
            palette.leaf_dark, palette.wood]


def break_syntax(code: str, rng: random.Random) -> str | None:
    """Drop the ``)`` of one painting statement, or cut the sketch part-way (module docstring)."""
    lines = code.split("\n")
    painting = [i for i, line in enumerate(lines) if line.strip().startswith("brush.") and line.rstrip().endswith(");")]
    if not painting:
        return None
    if rng.random() < 0.5:
        i = rng.choice(painting)
        line = lines[i].rstrip()
        lines[i] = line[:-2] + ";"
        return "\n".join(lines)
    cut = rng.choice(painting[len(painting) // 3 :])
    return "\n".join(lines[: cut + 1])


#: The damages by name, in the order revision examples cycle through them.
DAMAGES: dict[str, Callable[[str, random.Random], str | None]] = {
    "drop_petals": drop_petals,
    "push_off_canvas": push_off_canvas,
    "swap_palette": swap_palette,
    "break_syntax": break_syntax,
}
