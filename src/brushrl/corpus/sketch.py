"""The one sketch style the corpus (and the system prompt) uses, written line by line.

Every corpus sketch is the mandatory skeleton (``async setup`` that makes a 600 x 600 WEBGL canvas,
``brush.scaleBrushes(3)``, degrees, ``noLoop``; ``draw`` that moves the origin to the top-left corner
and paints a pale background) followed by plain filled shapes:
``brush.fill`` -> ``brush.beginShape`` -> at least three ``brush.vertex`` -> ``brush.endShape(true)``.
Coordinates are integer canvas pixels (0..canvas_size after the translate, y pointing down).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Line that stands for the painting in the skeleton shown to the policy.
PAINTING_PLACEHOLDER = "// painting goes here"

#: The background of the skeleton shown to the policy (a pale cream, as the seeds' composition asks).
DEFAULT_BACKGROUND = "#fdf8ee"

_INDENT = "  "


def sketch_source(body: Sequence[str], canvas_size: int = 600, background: str = DEFAULT_BACKGROUND) -> str:
    """Wrap painting lines in the mandatory skeleton.

    Args:
        body: statements of ``draw`` after the background, without indentation (one per item;
            an item may hold several lines, each is indented).
        canvas_size: square canvas side in pixels, written into ``createCanvas``.
        background: hex colour string of the background.

    Returns:
        The whole sketch source, ending without a trailing newline.
    """
    lines = [
        "async function setup() {",
        f"{_INDENT}createCanvas({canvas_size}, {canvas_size}, WEBGL);",
        f"{_INDENT}brush.scaleBrushes(3);",
        f"{_INDENT}angleMode(DEGREES);",
        f"{_INDENT}noLoop();",
        "}",
        "",
        "function draw() {",
        f"{_INDENT}translate(-width / 2, -height / 2);",
        f'{_INDENT}background("{background}");',
    ]
    for item in body:
        lines.extend(f"{_INDENT}{line}" if line else "" for line in item.split("\n"))
    lines.append("}")
    return "\n".join(lines)


def _num(value: float) -> str:
    """Format a 0..1 amount with at most two decimals (``0.25``, ``0.3``, ``1``)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"


class SketchWriter:
    """Accumulates ``draw`` statements for one sketch; ``source()`` returns the finished sketch.

    All marks are filled shapes (``shape``) or filled discs (``circle``); geometry is given in
    integer canvas pixels. Opacity is p5.brush's 0..255 scale; amounts and curvature are 0..1.
    """

    def __init__(self, background: str = DEFAULT_BACKGROUND, canvas_size: int = 600) -> None:
        self.background = background
        self.canvas_size = canvas_size
        self._body: list[str] = ["brush.noStroke();"]
        self.marks = 0

    def comment(self, text: str) -> None:
        """Add a ``// text`` line (used sparingly: one per part of the painting)."""
        self._body.append(f"// {text}")

    def bleed(self, amount: float) -> None:
        """``brush.fillBleed(amount)``: how far the pigment bleeds past the edge, 0..1."""
        self._body.append(f"brush.fillBleed({_num(amount)});")

    def texture(self, amount: float, border: float) -> None:
        """``brush.fillTexture(amount, border)``: paper texture and edge darkening, each 0..1."""
        self._body.append(f"brush.fillTexture({_num(amount)}, {_num(border)});")

    def shape(self, colour: str, opacity: int, points: Sequence[tuple[int, int]], curvature: float = 0.5) -> None:
        """One filled wash: fill, beginShape(curvature), the vertices, endShape(true).

        Raises:
            ValueError: fewer than three points.
        """
        if len(points) < 3:
            raise ValueError(f"a filled shape needs at least 3 vertices, got {len(points)}")
        lines = [f'brush.fill("{colour}", {int(opacity)});', f"brush.beginShape({_num(curvature)});"]
        lines += [f"brush.vertex({int(x)}, {int(y)});" for x, y in points]
        lines.append("brush.endShape(true);")
        self._body.extend(lines)
        self.marks += 1

    def circle(self, colour: str, opacity: int, x: int, y: int, radius: int) -> None:
        """One filled disc: ``brush.fill`` then ``brush.circle(x, y, radius)`` (radius in pixels)."""
        self._body.append(f'brush.fill("{colour}", {int(opacity)});')
        self._body.append(f"brush.circle({int(x)}, {int(y)}, {int(radius)});")
        self.marks += 1

    def block(self, text: str, marks: int) -> None:
        """Add a multi-line statement (a simple ``for`` loop) that paints ``marks`` shapes."""
        self._body.append(text)
        self.marks += marks

    def source(self) -> str:
        """The finished sketch (skeleton + everything added so far)."""
        return sketch_source(self._body, self.canvas_size, self.background)
