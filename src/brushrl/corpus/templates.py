"""Painting parts shared by the corpus sketches: leaves, stems, rings of petals, centres, florets.

Each painter appends filled shapes to a :class:`~brushrl.corpus.sketch.SketchWriter`. Geometry is
computed here in Python (canvas pixels, degrees, y down) so the emitted JavaScript stays a plain run
of ``brush.vertex(x, y)`` calls. A :class:`Knobs` object decides every free parameter: for the
canonical sketch it returns the given default, for a variation a random draw.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from brushrl.corpus.colours import recolour
from brushrl.corpus.geometry import outline, polar, star, stem
from brushrl.corpus.palettes import BACKGROUNDS, PALETTES, Palette, vary_palette
from brushrl.corpus.sketch import SketchWriter

T = TypeVar("T")

#: Opacity bounds of the corpus (p5.brush 0..255 scale): the seeds' composition guidance keeps
#: washes at 150 or more; above ~235 the watercolour layering disappears.
MIN_OPACITY, MAX_OPACITY = 150, 235

_ORDINALS = ("first", "second", "third", "fourth")


class Knobs:
    """The free parameters of one sketch variant.

    ``Knobs(None)`` is the canonical variant: every call returns its default. ``Knobs(rng)`` draws
    each value from ``rng`` (a ``random.Random``), so a variant is fully determined by the rng's seed.
    """

    def __init__(self, rng: random.Random | None, recolour: str | None = None) -> None:
        self.rng = rng
        self.recolour = recolour
        #: Every palette handed out, in order (the first is the sketch's own, ``brushrl.corpus.build``).
        self.palettes: list[Palette] = []
        #: The colour word each palette had before ``recolour`` renamed it (same order).
        self.original_names: list[str] = []

    @property
    def canonical(self) -> bool:
        return self.rng is None

    def pick(self, options: Sequence[T]) -> T:
        """The first option (canonical) or a uniformly drawn one."""
        return options[0] if self.rng is None else self.rng.choice(list(options))

    def num(self, default: float, lo: float, hi: float) -> float:
        """``default`` (canonical) or a uniform draw in [lo, hi]."""
        return default if self.rng is None else self.rng.uniform(lo, hi)

    def integer(self, default: int, lo: int, hi: int) -> int:
        """``default`` (canonical) or a uniform integer draw in [lo, hi] (inclusive)."""
        return default if self.rng is None else self.rng.randint(lo, hi)

    def shift(self, spread: float) -> float:
        """0 (canonical) or a uniform draw in [-spread, spread]."""
        return 0.0 if self.rng is None else self.rng.uniform(-spread, spread)

    def opacity(self, default: int, spread: int = 12) -> int:
        """An opacity near ``default``, clamped to [MIN_OPACITY, MAX_OPACITY]."""
        return max(MIN_OPACITY, min(MAX_OPACITY, default + round(self.shift(spread))))

    def palette(self, family: str) -> Palette:
        """The family's first palette (canonical) or a drawn one, made paler or stronger (``vary_palette``);
        with ``recolour`` set, its petal roles repainted in that colour word first (``corpus.colours.recolour``).

        Raises:
            KeyError: unknown family (see ``PALETTES``).
        """
        options = PALETTES[family]
        pal = options[0] if self.rng is None else self.rng.choice(options)
        self.original_names.append(pal.name)
        if self.rng is not None:
            if self.recolour is not None:
                pal = recolour(pal, self.recolour, self.rng)
            pal = vary_palette(pal, self.rng)
        self.palettes.append(pal)
        return pal

    def background(self) -> str:
        """A pale cream ground (canonical: the skeleton's ``#fdf8ee``)."""
        return self.pick(BACKGROUNDS)


def new_writer(k: Knobs, label: str = "stem and leaves", bleed: float = 0.2) -> SketchWriter:
    """A writer with the corpus' opening settings: no outline, paper texture, a soft bleed for the
    first part (``bleed`` 0..1, varied by +-0.03), introduced by the comment ``label``."""
    w = SketchWriter(background=k.background())
    w.texture(round(k.num(0.5, 0.35, 0.6), 2), round(k.num(0.4, 0.3, 0.5), 2))
    w.comment(label)
    w.bleed(round(k.num(bleed, bleed - 0.03, bleed + 0.03), 2))
    return w


def petal_bleed(w: SketchWriter, k: Knobs) -> None:
    """Switch to the wetter bleed of the petals (seeds: 0.2-0.3)."""
    w.bleed(round(k.num(0.28, 0.24, 0.32), 2))


def paint_stem(w: SketchWriter, k: Knobs, colour: str, line: Sequence[tuple[float, float]], width: float) -> None:
    """A stem as a long narrow filled shape along ``line`` (pixels), ``width`` pixels wide at its base."""
    pts = [(x + k.shift(6), y) for x, y in line]
    w.shape(colour, k.opacity(200), stem(pts, width * (1 + k.shift(0.15))), 0.4)


def paint_leaf(
    w: SketchWriter, k: Knobs, colour: str, x: float, y: float, angle: float, length: float, width: float,
    start: float = 0.0, opacity: int = 190,
) -> None:
    """A pointed leaf (lance outline) from (x, y) towards ``angle`` degrees; sizes in pixels."""
    w.shape(
        colour,
        k.opacity(opacity),
        outline("lance", x, y, angle + k.shift(10), length * (1 + k.shift(0.1)), width * (1 + k.shift(0.12)), start),
        0.5,
    )


@dataclass(frozen=True)
class Ring:
    """One wash over a ring of petals.

    Attributes:
        count: petals in the ring.
        reach: petal tip distance from the centre, as a fraction of the flower's reach.
        width: petal width as a fraction of the flower's reach.
        shape: outline name (see ``brushrl.corpus.geometry.OUTLINES``).
        role: palette role of the colour (``wash``, ``body`` or ``deep``).
        opacity: p5.brush opacity 0..255.
        turn: extra rotation in petal steps (0.5 puts petals between the previous ring's).
        curvature: beginShape curvature 0..1.
        start: petal base distance from the centre, fraction of the reach.
    """

    count: int
    reach: float
    width: float
    shape: str
    role: str
    opacity: int
    turn: float = 0.0
    curvature: float = 0.6
    start: float = 0.0


def paint_rings(
    w: SketchWriter, k: Knobs, pal: Palette, cx: float, cy: float, reach: float, rotation: float,
    rings: Sequence[Ring], label: str = "petals",
) -> None:
    """Paint each ring as one wash of ``count`` petals around (cx, cy); ``reach`` in pixels, angles in degrees."""
    for idx, ring in enumerate(rings):
        w.comment(f"{label}, {_ORDINALS[idx]} wash")
        step = 360.0 / ring.count
        colour = getattr(pal, ring.role)
        for i in range(ring.count):
            angle = rotation + (i + ring.turn) * step + k.shift(step * 0.08)
            length = reach * (ring.reach - ring.start) * (1 + k.shift(0.07))
            pts = outline(ring.shape, cx, cy, angle, length, reach * ring.width * (1 + k.shift(0.08)), reach * ring.start)
            w.shape(colour, k.opacity(ring.opacity), pts, ring.curvature)


def paint_eye(w: SketchWriter, k: Knobs, colour: str, cx: float, cy: float, radius: float, rays: int, rotation: float) -> None:
    """A deep star-shaped blotch at the heart of the flower (hibiscus eye, poppy blotch)."""
    w.comment("the eye")
    w.shape(colour, k.opacity(210), star(cx, cy, radius * (1 + k.shift(0.12)), radius * 0.38, rays, rotation), 0.35)


def paint_stamen(w: SketchWriter, k: Knobs, pal: Palette, cx: float, cy: float, length: float, angle: float) -> None:
    """A hibiscus staminal column: a narrow cream shape from the centre and pollen dots at its tip."""
    w.comment("stamen")
    angle += k.shift(20)
    w.shape(pal.centre, k.opacity(220), outline("sliver", cx, cy, angle, length, 24), 0.3)
    tip_x, tip_y = polar(cx, cy, length, angle)
    for dx, dy in ((0, 0), (-18, 10), (14, 16)):
        w.circle(pal.pollen, k.opacity(225), round(tip_x + dx), round(tip_y + dy), 11)


def paint_boss(w: SketchWriter, k: Knobs, pal: Palette, cx: float, cy: float, radius: float, dots: int) -> None:
    """A dark seed boss ringed by stamen dots (poppy, anemone): a deep disc, the boss, the dots."""
    w.comment("centre")
    radius *= 1 + k.shift(0.12)
    w.circle(pal.deep, k.opacity(200), round(cx), round(cy), round(radius * 1.8))
    w.circle(pal.centre, k.opacity(225), round(cx), round(cy), round(radius))
    rot = round(k.num(0, 0, 360))
    for i in range(dots):
        x, y = polar(cx, cy, radius * 1.55, rot + i * 360.0 / dots)
        w.circle(pal.pollen, k.opacity(220), round(x), round(y), max(9, round(radius * 0.3)))


def paint_disc(w: SketchWriter, k: Knobs, pal: Palette, cx: float, cy: float, radius: float) -> None:
    """A round flower centre in two washes (daisy, sunflower, cosmos)."""
    w.comment("centre")
    radius *= 1 + k.shift(0.1)
    w.circle(pal.centre, k.opacity(215), round(cx), round(cy), round(radius))
    w.circle(pal.pollen, k.opacity(200), round(cx + radius * 0.15), round(cy + radius * 0.2), round(radius * 0.55))


def paint_floret(
    w: SketchWriter, k: Knobs, colour: str, cx: float, cy: float, radius: float, lobes: int, rotation: float,
    opacity: int = 195, inner: float = 0.6,
) -> None:
    """A small whole flower as one lobed shape (blossom, forget-me-not): a star with round rays
    whose notches sit at ``inner`` times the ``radius`` (pixels)."""
    pts = star(cx, cy, radius * (1 + k.shift(0.1)), radius * inner, lobes, rotation + k.shift(20))
    w.shape(colour, k.opacity(opacity), pts, 0.75)


def paint_ray_ring(
    w: SketchWriter, k: Knobs, colour: str, cx: float, cy: float, outer: float, inner: float, rays: int,
    rotation: float, opacity: int = 200,
) -> None:
    """Many thin petals (daisy, sunflower) as ONE star shape alternating ``outer`` and ``inner``
    radius (pixels) over ``2 * rays`` vertices, starting at ``rotation`` degrees.

    Written out vertex by vertex: a ``for`` loop with ``cos``/``sin`` expressions was shorter, but
    the tiny policy copied those expressions into plain ``brush.vertex`` and ``brush.circle`` lines.
    """
    w.shape(colour, k.opacity(opacity), star(cx, cy, outer, inner, rays, rotation), 0.4)
