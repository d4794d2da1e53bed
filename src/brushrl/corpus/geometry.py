"""Plain trigonometry that turns petal, leaf and stem outlines into integer canvas vertices.

Angles are degrees measured like p5's ``angleMode(DEGREES)`` on a y-down canvas: 0 points right,
90 points down, -90 (or 270) points up. Outlines are given in a local frame where the shape grows
along +u from its base and +-v is its half-width, as fractions of its length and width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[int, int]

#: Petal/leaf outlines as (u, v) fractions: u of the length from the base, v of the full width.
#: A spline through them (beginShape curvature 0.4-0.7) rounds the corners.
OUTLINES: dict[str, tuple[tuple[float, float], ...]] = {
    # wide at the outer end, like a hibiscus or poppy petal
    "fan": ((0.06, 0.0), (0.55, 0.5), (1.0, 0.22), (1.0, -0.22), (0.55, -0.5)),
    # an egg shape, widest past the middle (anemone, rose, cherry blossom)
    "oval": ((0.05, 0.0), (0.6, 0.5), (1.0, 0.0), (0.6, -0.5)),
    # a lance: widest before the middle, sharp tip (lily, lotus, leaves)
    "lance": ((0.0, 0.0), (0.4, 0.5), (1.0, 0.0), (0.4, -0.5)),
    # a long strap with a blunt tip (daisy, sunflower ray florets)
    "strap": ((0.05, 0.0), (0.3, 0.5), (1.0, 0.3), (1.0, -0.3), (0.3, -0.5)),
    # three points only: a thin sliver (eye streaks, sepals, grass)
    "sliver": ((0.0, 0.5), (1.0, 0.0), (0.0, -0.5)),
}


def polar(cx: float, cy: float, radius: float, angle: float) -> tuple[float, float]:
    """The point ``radius`` pixels from (cx, cy) in direction ``angle`` (degrees)."""
    rad = math.radians(angle)
    return cx + radius * math.cos(rad), cy + radius * math.sin(rad)


def outline(
    kind: str, x: float, y: float, angle: float, length: float, width: float, start: float = 0.0
) -> list[Point]:
    """Vertices of one petal or leaf.

    Args:
        kind: a key of ``OUTLINES``.
        x, y: where the shape's base axis starts (e.g. the flower centre), pixels.
        angle: direction the shape points, degrees.
        length: base-to-tip length, pixels (measured from ``start``).
        width: full width, pixels.
        start: distance from (x, y) to the shape's base along ``angle``, pixels.

    Returns:
        Integer canvas points in drawing order.

    Raises:
        KeyError: unknown ``kind``.
    """
    rad = math.radians(angle)
    ux, uy = math.cos(rad), math.sin(rad)
    vx, vy = -uy, ux
    pts = []
    for u, v in OUTLINES[kind]:
        along = start + u * length
        across = v * width
        pts.append((round(x + ux * along + vx * across), round(y + uy * along + vy * across)))
    return pts


def stem(points: Sequence[tuple[float, float]], width: float) -> list[Point]:
    """A long narrow closed outline that follows a centre line (a stem, stalk or twig).

    The outline goes up the left side and back down the right side; the far end narrows to 60%.

    Args:
        points: the centre line, at least two (x, y) points, pixels.
        width: full width at the first point, pixels.

    Returns:
        ``2 * len(points)`` integer points.

    Raises:
        ValueError: fewer than two points.
    """
    if len(points) < 2:
        raise ValueError("a stem needs at least two centre-line points")
    left, right = [], []
    n = len(points)
    for i, (px, py) in enumerate(points):
        a = points[max(i - 1, 0)]
        b = points[min(i + 1, n - 1)]
        dx, dy = b[0] - a[0], b[1] - a[1]
        norm = math.hypot(dx, dy) or 1.0
        half = width * (1.0 - 0.4 * i / (n - 1)) / 2
        nx, ny = -dy / norm * half, dx / norm * half
        left.append((round(px + nx), round(py + ny)))
        right.append((round(px - nx), round(py - ny)))
    return left + right[::-1]


def star(cx: float, cy: float, outer: float, inner: float, points: int, rotation: float) -> list[Point]:
    """A star outline of ``points`` rays alternating between ``outer`` and ``inner`` radius (pixels)."""
    pts = []
    for i in range(2 * points):
        radius = outer if i % 2 == 0 else inner
        px, py = polar(cx, cy, radius, rotation + i * 180.0 / points)
        pts.append((round(px), round(py)))
    return pts


def ring(cx: float, cy: float, radius: float, count: int, rotation: float = 0.0) -> list[Point]:
    """``count`` integer points evenly spaced on a circle (stamen dots, small florets)."""
    return [tuple(round(c) for c in polar(cx, cy, radius, rotation + i * 360.0 / count)) for i in range(count)]


def spike(x: float, y: float, angle: float, length: float, width: float, lobes: int) -> list[Point]:
    """A tapering spike of florets (lavender, grape hyacinth) from its base (x, y) towards ``angle``.

    The sides alternate between full and 70% width ``lobes`` times, narrowing towards the tip.

    Returns:
        ``2 * lobes + 2`` integer points: base, one side up, tip, other side down.
    """
    rad = math.radians(angle)
    ux, uy = math.cos(rad), math.sin(rad)
    vx, vy = -uy, ux
    side = []
    for j in range(1, lobes + 1):
        u = j / (lobes + 1)
        half = width / 2 * (1.0 - 0.5 * u) * (1.0 if j % 2 else 0.7)
        side.append((u, half))

    def at(u: float, v: float) -> Point:
        return round(x + ux * u * length + vx * v), round(y + uy * u * length + vy * v)

    return [at(0, 0)] + [at(u, h) for u, h in side] + [at(1, 0)] + [at(u, -h) for u, h in reversed(side)]
