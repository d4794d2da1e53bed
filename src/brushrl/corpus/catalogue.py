"""The base sketches of the corpus: one function per composition.

Every function takes a :class:`~brushrl.corpus.templates.Knobs` (canonical or random) and returns
``(subject, code)``. Layout constants are canvas pixels on the 600 x 600 canvas (centre 300, 300);
angles are degrees with -90 pointing up. Greens are painted first, then the petals in two or three
washes (pale and large, then stronger and smaller), then the centre. Big single blooms reach
200-240 px from their centre, as the seeds' composition guidance asks.
"""

from __future__ import annotations

from collections.abc import Callable

from brushrl.corpus.geometry import outline, polar, spike, star, stem
from brushrl.corpus.palettes import Palette
from brushrl.corpus.sketch import SketchWriter
from brushrl.corpus.templates import (
    Knobs,
    Ring,
    new_writer,
    paint_boss,
    paint_disc,
    paint_eye,
    paint_floret,
    paint_leaf,
    paint_ray_ring,
    paint_rings,
    paint_stamen,
    paint_stem,
    petal_bleed,
)

Sketch = tuple[str, str]


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _stem_and_leaves(w: SketchWriter, k: Knobs, pal: Palette, x: float, top: float, width: float = 12) -> None:
    """A stem from ``top`` down to the bottom edge with a leaf on each side of it."""
    paint_stem(w, k, pal.wood, [(x, top), (x + 10, (top + 600) / 2), (x - 4, 600)], width)
    paint_leaf(w, k, pal.leaf, x + 4, 540, -150, 170, 54)
    paint_leaf(w, k, pal.leaf_dark, x + 2, 565, -32, 150, 48)


def _bloom(
    k: Knobs, family: str, rings: list[Ring], cy: float = 270, reach: float = 205, stemmed: bool = True,
) -> tuple[SketchWriter, Palette, float, float, float, float]:
    """A single face-on flower: stem and leaves (or leaves behind it), then its rings of petals.

    Returns:
        (writer, palette, centre x, centre y, reach, rotation) for the caller to paint the centre.
    """
    pal = k.palette(family)
    cx, cy = 300 + k.shift(18), cy + k.shift(18)
    reach = k.num(reach, reach * 0.92, reach * 1.08)
    rot = -90 + k.shift(180 / rings[0].count)
    if stemmed:
        w = new_writer(k)
        _stem_and_leaves(w, k, pal, cx, cy + reach * 0.7)
    else:
        w = new_writer(k, "leaves behind the flower")
        paint_leaf(w, k, pal.leaf, cx, cy, rot + 110, reach * 0.6, 100, start=reach * 0.58)
        paint_leaf(w, k, pal.leaf_dark, cx, cy, rot + 250, reach * 0.56, 92, start=reach * 0.58)
    petal_bleed(w, k)
    paint_rings(w, k, pal, cx, cy, reach, rot, rings)
    return w, pal, cx, cy, reach, rot


# --- hibiscus ------------------------------------------------------------------------------------

_HIBISCUS = [Ring(5, 1.0, 0.92, "fan", "wash", 170), Ring(5, 0.8, 0.58, "oval", "body", 200, turn=0.04)]


def _hibiscus(k: Knobs, family: str, subject: str, eye: float = 0.3) -> Sketch:
    w, pal, cx, cy, reach, rot = _bloom(k, family, _HIBISCUS, cy=290, reach=215, stemmed=False)
    paint_eye(w, k, pal.deep, cx, cy, reach * eye, 5, rot + 36)
    paint_stamen(w, k, pal, cx, cy, reach * 0.55, rot + 24)
    return subject, w.source()


def peach_hibiscus(k: Knobs) -> Sketch:
    """Five broad peach petals in two washes, a deep red eye, a cream staminal column, two leaves behind."""
    return _hibiscus(k, "peach_hibiscus", "a peach hibiscus")


def magenta_hibiscus(k: Knobs) -> Sketch:
    """The hibiscus composition in magenta with a wine-dark eye."""
    return _hibiscus(k, "magenta_hibiscus", "a magenta hibiscus")


def yellow_hibiscus(k: Knobs) -> Sketch:
    """The hibiscus composition in yellow with a red eye."""
    return _hibiscus(k, "yellow_hibiscus", "a yellow hibiscus")


def coral_hibiscus(k: Knobs) -> Sketch:
    """The hibiscus composition in coral with a crimson eye."""
    return _hibiscus(k, "coral_hibiscus", "a coral hibiscus")


def white_hibiscus(k: Knobs) -> Sketch:
    """The hibiscus composition painted with grey-lilac shadow washes and a large red eye."""
    return _hibiscus(k, "white_hibiscus", "a white hibiscus with a red eye", eye=0.38)


def hibiscus_with_bud(k: Knobs) -> Sketch:
    """A hibiscus up and to the right, a closed bud on a stem at the lower left."""
    pal = k.palette(k.pick(["peach_hibiscus", "coral_hibiscus", "magenta_hibiscus"]))
    cx, cy, reach = 330 + k.shift(12), 250 + k.shift(12), k.num(185, 170, 200)
    w = new_writer(k, "bud and leaves")
    paint_stem(w, k, pal.leaf_dark, [(cx - 60, cy + 120), (150, 450), (120, 600)], 10)
    paint_leaf(w, k, pal.leaf, cx, cy, 140, 200, 90, start=reach * 0.6)
    w.shape(pal.body, k.opacity(200), outline("oval", 150, 455, -110, 95, 44), 0.6)
    petal_bleed(w, k)
    rot = -90 + k.shift(36)
    paint_rings(w, k, pal, cx, cy, reach, rot, _HIBISCUS)
    paint_eye(w, k, pal.deep, cx, cy, reach * 0.3, 5, rot + 36)
    paint_stamen(w, k, pal, cx, cy, reach * 0.55, rot + 24)
    return f"{_article(pal.name)} {pal.name} hibiscus with a bud", w.source()


# --- poppies and anemones ------------------------------------------------------------------------


def _poppy_rings(n: int) -> list[Ring]:
    return [Ring(n, 1.0, 0.95, "fan", "wash", 175), Ring(n, 0.82, 0.7, "oval", "body", 200, turn=0.5)]


def coral_poppy(k: Knobs) -> Sketch:
    """Four cupped coral petals in two washes on a stem, a dark boss ringed by stamens."""
    w, pal, cx, cy, reach, _ = _bloom(k, "poppy", _poppy_rings(4))
    paint_boss(w, k, pal, cx, cy, reach * 0.1, 6)
    return "a coral poppy", w.source()


def red_poppy(k: Knobs) -> Sketch:
    """The poppy composition in red, four or five petals."""
    w, pal, cx, cy, reach, _ = _bloom(k, "red_poppy", _poppy_rings(k.integer(4, 4, 5)), cy=260)
    paint_boss(w, k, pal, cx, cy, reach * 0.1, 6)
    return "a red poppy", w.source()


def orange_poppy(k: Knobs) -> Sketch:
    """Four broad orange petals with a small yellow centre."""
    rings = [Ring(4, 1.0, 1.0, "fan", "wash", 180), Ring(4, 0.75, 0.7, "fan", "body", 205, turn=0.02)]
    w, pal, cx, cy, reach, _ = _bloom(k, "orange_poppy", rings)
    paint_disc(w, k, pal, cx, cy, reach * 0.12)
    return "an orange poppy", w.source()


def poppy_field(k: Knobs) -> Sketch:
    """Three small poppies on thin stems at different heights."""
    pal = k.palette(k.pick(["red_poppy", "poppy"]))
    spots = [(170, 260, 105), (400, 200, 120), (330, 420, 90)]
    spots = [(x + k.shift(20), y + k.shift(20), r * (1 + k.shift(0.1))) for x, y, r in spots]
    w = new_writer(k)
    for x, y, r in spots:
        paint_stem(w, k, pal.wood, [(x, y + r * 0.7), (x + 8, 600)], 8)
    paint_leaf(w, k, pal.leaf, 250, 600, -120, 160, 40)
    petal_bleed(w, k)
    w.comment("petals")
    for x, y, r in spots:
        rot = -90 + k.shift(45)
        for i in range(4):
            col = pal.wash if i % 2 else pal.body
            w.shape(col, k.opacity(195), outline("oval", x, y, rot + 90 * i, r, r * 0.9), 0.6)
    w.comment("centres")
    for x, y, r in spots:
        w.circle(pal.deep, k.opacity(215), round(x), round(y), round(r * 0.16))
    return f"three {pal.name} poppies", w.source()


def white_anemone(k: Knobs) -> Sketch:
    """Six oval petals in cool shadow washes around a dark navy boss."""
    rings = [Ring(6, 1.0, 0.8, "oval", "wash", 185), Ring(6, 0.8, 0.5, "oval", "body", 200, turn=0.5)]
    w, pal, cx, cy, reach, _ = _bloom(k, "white_anemone", rings)
    paint_boss(w, k, pal, cx, cy, reach * 0.12, 5)
    return "a white anemone", w.source()


def anemone(k: Knobs) -> Sketch:
    """Six oval petals (purple, red or pink) around a dark boss."""
    rings = [Ring(6, 1.0, 0.8, "oval", "wash", 180), Ring(6, 0.85, 0.55, "oval", "body", 205, turn=0.05)]
    w, pal, cx, cy, reach, _ = _bloom(k, "anemone", rings)
    paint_boss(w, k, pal, cx, cy, reach * 0.12, 5)
    return f"a {pal.name} anemone", w.source()


# --- roses, peonies, camellias ---------------------------------------------------------------------


def rose(k: Knobs) -> Sketch:
    """Three rings of rounded petals, pale outside and deep at the heart."""
    rings = [
        Ring(5, 1.0, 0.85, "oval", "wash", 180),
        Ring(5, 0.68, 0.6, "oval", "body", 200, turn=0.5),
        Ring(3, 0.4, 0.5, "oval", "deep", 205, turn=0.2),
    ]
    w, pal, cx, cy, reach, _ = _bloom(k, "rose", rings)
    w.comment("the heart")
    w.circle(pal.centre, k.opacity(220), round(cx), round(cy), round(reach * 0.1))
    return f"a {pal.name} rose", w.source()


def wild_rose(k: Knobs) -> Sketch:
    """Five broad pink petals, an inner wash, a yellow centre."""
    rings = [Ring(5, 1.0, 0.95, "fan", "wash", 180), Ring(5, 0.55, 0.5, "oval", "body", 200)]
    w, pal, cx, cy, reach, _ = _bloom(k, "cosmos", rings)
    paint_disc(w, k, pal, cx, cy, reach * 0.13)
    return "a wild rose", w.source()


def peony(k: Knobs) -> Sketch:
    """A big stemless bloom in three rings of ruffled petals."""
    rings = [
        Ring(6, 1.0, 0.85, "oval", "wash", 175),
        Ring(6, 0.72, 0.6, "oval", "body", 195, turn=0.5),
        Ring(3, 0.42, 0.5, "oval", "deep", 200, turn=0.25),
    ]
    w, pal, *_ = _bloom(k, "peony", rings, cy=285, reach=220, stemmed=False)
    return f"{_article(pal.name)} {pal.name} peony", w.source()


def camellia(k: Knobs) -> Sketch:
    """Two rings of six oval petals with a golden centre, leaves behind."""
    rings = [Ring(6, 1.0, 0.8, "oval", "wash", 185), Ring(6, 0.7, 0.55, "oval", "body", 205, turn=0.5)]
    w, pal, cx, cy, reach, _ = _bloom(k, "camellia", rings, cy=285, reach=200, stemmed=False)
    paint_disc(w, k, pal, cx, cy, reach * 0.15)
    return f"a {pal.name} camellia", w.source()


# --- flowers with pointed petals --------------------------------------------------------------------


def lotus(k: Knobs) -> Sketch:
    """Pointed pink petals in two rings above a long lily pad."""
    pal = k.palette("lotus")
    cx, cy, reach = 300 + k.shift(15), 290 + k.shift(15), k.num(205, 190, 220)
    w = new_writer(k, "lily pad")
    w.shape(pal.leaf, k.opacity(180), outline("oval", cx - 250, cy + 170, 0, 500, 150), 0.6)
    w.shape(pal.leaf_dark, k.opacity(190), outline("oval", cx - 200, cy + 180, 0, 400, 90), 0.6)
    petal_bleed(w, k)
    rings = [
        Ring(7, 1.0, 0.45, "lance", "wash", 180, curvature=0.45),
        Ring(5, 0.7, 0.4, "lance", "body", 200, turn=0.5, curvature=0.45),
    ]
    paint_rings(w, k, pal, cx, cy, reach, -90 + k.shift(20), rings)
    w.comment("seed pod")
    w.circle(pal.centre, k.opacity(220), round(cx), round(cy), round(reach * 0.12))
    return "a pink lotus", w.source()


def water_lily(k: Knobs) -> Sketch:
    """A star of pointed petals and two floating pads."""
    pal = k.palette("water_lily")
    cx, cy, reach = 300 + k.shift(15), 280 + k.shift(15), k.num(190, 175, 205)
    w = new_writer(k, "lily pads")
    w.shape(pal.leaf, k.opacity(185), outline("oval", 40, 420 + k.shift(20), -5, 300, 170), 0.6)
    w.shape(pal.leaf_dark, k.opacity(185), outline("oval", 320, 470 + k.shift(20), 5, 260, 140), 0.6)
    petal_bleed(w, k)
    rings = [
        Ring(8, 1.0, 0.38, "lance", "wash", 190, curvature=0.45),
        Ring(6, 0.65, 0.32, "lance", "body", 200, turn=0.5, curvature=0.45),
    ]
    paint_rings(w, k, pal, cx, cy, reach, -90 + k.shift(22), rings)
    paint_disc(w, k, pal, cx, cy, reach * 0.12)
    return f"a {pal.name} water lily", w.source()


def lily(k: Knobs) -> Sketch:
    """Six pointed petals with narrow stripes, three stamens and spots."""
    rings = [
        Ring(6, 1.0, 0.36, "lance", "wash", 185, curvature=0.45),
        Ring(6, 0.8, 0.2, "sliver", "body", 205, curvature=0.45),
    ]
    w, pal, cx, cy, reach, rot = _bloom(k, "lily", rings, cy=285, reach=210, stemmed=False)
    w.comment("stamens")
    for i in range(3):
        a = rot + 30 + i * 120 + k.shift(8)
        w.shape(pal.pollen, k.opacity(210), outline("sliver", cx, cy, a, reach * 0.55, 8), 0.2)
    w.comment("spots")
    for i in range(3):
        x, y = polar(cx, cy, reach * k.num(0.3, 0.25, 0.4), rot + i * 120)
        w.circle(pal.centre, k.opacity(215), round(x), round(y), 10)
    return f"{_article(pal.name)} {pal.name} lily", w.source()


def clematis(k: Knobs) -> Sketch:
    """Six pointed petals with a pale centre."""
    rings = [
        Ring(6, 1.0, 0.5, "lance", "wash", 185, curvature=0.5),
        Ring(6, 0.85, 0.25, "lance", "body", 205, curvature=0.5),
    ]
    w, pal, cx, cy, reach, _ = _bloom(k, "clematis", rings, cy=285, reach=210, stemmed=False)
    w.comment("centre")
    w.circle(pal.centre, k.opacity(215), round(cx), round(cy), round(reach * 0.14))
    w.circle(pal.pollen, k.opacity(215), round(cx), round(cy), round(reach * 0.07))
    return f"a {pal.name} clematis", w.source()


def magnolia(k: Knobs) -> Sketch:
    """Two tulip-shaped magnolia flowers on a bare diagonal branch."""
    pal = k.palette("magnolia")
    dy = k.shift(25)
    w = new_writer(k, "branch", bleed=0.12)
    w.shape(pal.wood, k.opacity(220), stem([(-20, 600 + dy), (250, 420 + dy), (540, 330 + dy)], 13), 0.4)
    petal_bleed(w, k)
    for x, y, h in ((250, 420 + dy, 230), (470, 350 + dy, 170)):
        h *= 1 + k.shift(0.08)
        lean = k.shift(10)
        w.comment("petals, first wash")
        for a in (-125, -90, -55):
            w.shape(pal.wash, k.opacity(195), outline("lance", x, y, a + lean, h, h * 0.45), 0.5)
        w.comment("petals, second wash")
        for a in (-108, -72):
            w.shape(pal.body, k.opacity(200), outline("lance", x, y, a + lean, h * 0.8, h * 0.32), 0.5)
    return f"a {pal.name} magnolia branch", w.source()


def plumeria(k: Knobs) -> Sketch:
    """Five overlapping oval petals with a warm yellow heart."""
    rings = [
        Ring(5, 1.0, 0.55, "oval", "wash", 195, turn=0.12),
        Ring(5, 0.6, 0.38, "oval", "body", 200, turn=0.04),
        Ring(5, 0.38, 0.3, "oval", "deep", 205),
    ]
    w, pal, *_ = _bloom(k, "plumeria", rings, cy=285, reach=205, stemmed=False)
    return f"{_article(pal.name)} {pal.name} plumeria", w.source()


def hellebore(k: Knobs) -> Sketch:
    """Five nodding round petals on a stem, a green-gold centre and stamen dots."""
    rings = [Ring(5, 1.0, 0.9, "oval", "wash", 185), Ring(5, 0.8, 0.6, "oval", "body", 200, turn=0.05)]
    w, pal, cx, cy, reach, rot = _bloom(k, "hellebore", rings, cy=275, reach=200)
    w.comment("centre")
    w.circle(pal.centre, k.opacity(215), round(cx), round(cy), round(reach * 0.2))
    for i in range(6):
        x, y = polar(cx, cy, reach * 0.22, rot + i * 60)
        w.circle(pal.pollen, k.opacity(215), round(x), round(y), 10)
    return f"a {pal.name} hellebore", w.source()


# --- iris, tulip, calla, crocus: profile views --------------------------------------------------------


def _iris(k: Knobs, family: str) -> Sketch:
    pal = k.palette(family)
    cx, cy = 300 + k.shift(15), 250 + k.shift(15)
    w = new_writer(k)
    paint_stem(w, k, pal.wood, [(cx, cy + 120), (cx + 4, 440), (cx - 4, 600)], 14)
    paint_leaf(w, k, pal.leaf, cx - 10, 600, -104, 330, 46)
    paint_leaf(w, k, pal.leaf_dark, cx + 10, 600, -74, 280, 40)
    petal_bleed(w, k)
    up, down = k.num(160, 145, 180), k.num(195, 180, 215)
    w.comment("standards, first wash")
    for a in (-90, -128, -52):
        w.shape(pal.wash, k.opacity(180), outline("oval", cx, cy, a + k.shift(6), up, up * 0.55), 0.6)
    w.comment("falls, first wash")
    for a in (150, 30, 90):
        w.shape(pal.wash, k.opacity(185), outline("fan", cx, cy, a + k.shift(6), down, down * 0.62), 0.6)
    w.comment("falls, second wash")
    for a in (150, 30, 90):
        w.shape(pal.body, k.opacity(205), outline("oval", cx, cy, a + k.shift(6), down * 0.8, down * 0.42), 0.6)
    w.comment("yellow beards")
    for a in (150, 30, 90):
        w.shape(pal.centre, k.opacity(215), outline("sliver", cx, cy, a, down * 0.45, 16), 0.3)
    return f"a {pal.name} iris", w.source()


def violet_iris(k: Knobs) -> Sketch:
    """Three upright standards and three drooping falls with yellow beards, sword leaves."""
    return _iris(k, "violet_iris")


def blue_iris(k: Knobs) -> Sketch:
    """The iris composition in blue."""
    return _iris(k, "blue_iris")


def _tulip_head(w: SketchWriter, k: Knobs, pal: Palette, x: float, base: float, h: float) -> None:
    lean = k.shift(8)
    w.shape(pal.wash, k.opacity(190), outline("oval", x, base, -90 + lean, h, h * 0.8), 0.6)
    w.shape(pal.body, k.opacity(200), outline("oval", x - h * 0.12, base, -102 + lean, h * 0.9, h * 0.42), 0.6)
    w.shape(pal.body, k.opacity(200), outline("oval", x + h * 0.12, base, -78 + lean, h * 0.9, h * 0.42), 0.6)
    w.shape(pal.deep, k.opacity(185), outline("oval", x, base, -90 + lean, h * 0.55, h * 0.3), 0.6)


def tulip(k: Knobs) -> Sketch:
    """One tulip cup of overlapping petals on a stem with two long leaves."""
    pal = k.palette("tulip")
    x, base = 300 + k.shift(20), 370 + k.shift(20)
    h = k.num(240, 220, 260)
    w = new_writer(k)
    paint_stem(w, k, pal.leaf_dark, [(x, base - 10), (x + 8, 480), (x + 4, 600)], 14)
    paint_leaf(w, k, pal.leaf, x, 595, -118, 270, 74)
    paint_leaf(w, k, pal.leaf_dark, x + 6, 595, -62, 230, 62)
    petal_bleed(w, k)
    w.comment("petals")
    _tulip_head(w, k, pal, x, base, h)
    return f"a {pal.name} tulip", w.source()


def two_tulips(k: Knobs) -> Sketch:
    """Two tulip cups on stems that meet at the bottom."""
    pal = k.palette("tulip")
    heads = [(210 + k.shift(15), 300 + k.shift(20), 180), (400 + k.shift(15), 250 + k.shift(20), 190)]
    w = new_writer(k)
    for x, base, _ in heads:
        paint_stem(w, k, pal.leaf_dark, [(x, base - 10), (x + 10, 450), (300, 600)], 12)
    paint_leaf(w, k, pal.leaf, 300, 600, -125, 240, 64)
    paint_leaf(w, k, pal.leaf_dark, 305, 600, -58, 220, 58)
    petal_bleed(w, k)
    w.comment("petals")
    for x, base, h in heads:
        _tulip_head(w, k, pal, x, base, h * (1 + k.shift(0.08)))
    return f"two {pal.name} tulips", w.source()


def calla_lily(k: Knobs) -> Sketch:
    """One tall spathe with a yellow spadix on a thick stem."""
    pal = k.palette("calla")
    x, base = 290 + k.shift(15), 400 + k.shift(15)
    tilt = k.shift(10)
    w = new_writer(k)
    paint_stem(w, k, pal.leaf_dark, [(x, base), (x - 6, 500), (x + 4, 600)], 16)
    paint_leaf(w, k, pal.leaf, x, 600, -135, 260, 90)
    petal_bleed(w, k)
    w.comment("spathe, first wash")
    w.shape(pal.wash, k.opacity(200), outline("fan", x, base, -70 + tilt, 300, 230), 0.55)
    w.comment("spathe, second wash")
    w.shape(pal.body, k.opacity(205), outline("lance", x, base, -75 + tilt, 250, 120), 0.5)
    w.shape(pal.deep, k.opacity(200), outline("lance", x, base, -80 + tilt, 150, 60), 0.5)
    w.comment("spadix")
    w.shape(pal.centre, k.opacity(220), outline("lance", x, base, -68 + tilt, 170, 30), 0.4)
    return f"a {pal.name} calla lily", w.source()


def crocuses(k: Knobs) -> Sketch:
    """Three small crocus cups on short stems with grass-like leaves."""
    pal = k.palette("crocus")
    heads = [(190 + k.shift(15), 330 + k.shift(20)), (310 + k.shift(15), 270 + k.shift(20)), (430 + k.shift(15), 340 + k.shift(20))]
    w = new_writer(k)
    for x, y in heads:
        paint_stem(w, k, pal.leaf, [(x, y), (x + 4, 600)], 10)
    for x, a in ((220, -110), (400, -70)):
        paint_leaf(w, k, pal.leaf_dark, x, 600, a, 230, 22)
    petal_bleed(w, k)
    w.comment("petals")
    for x, y in heads:
        h = k.num(150, 135, 165)
        for a, col in ((-90, pal.wash), (-108, pal.body), (-72, pal.body)):
            w.shape(col, k.opacity(195), outline("oval", x, y, a + k.shift(5), h, h * 0.4), 0.6)
    w.comment("stamens")
    for x, y in heads:
        w.shape(pal.centre, k.opacity(215), outline("sliver", x, y, -90, 90, 14), 0.3)
    return f"{pal.name} crocuses", w.source()


def bluebells(k: Knobs) -> Sketch:
    """An arching stem with six hanging bells."""
    pal = k.palette("bluebell")
    sway = k.shift(25)
    w = new_writer(k)
    paint_stem(w, k, pal.wood, [(250, 600), (262, 380), (300, 220), (380 + sway, 110)], 10)
    paint_leaf(w, k, pal.leaf, 245, 600, -112, 290, 42)
    paint_leaf(w, k, pal.leaf_dark, 258, 600, -76, 250, 38)
    petal_bleed(w, k)
    w.comment("bells, first wash")
    bells = []
    for i in range(6):
        t = 0.42 + 0.11 * i
        x = (1 - t) ** 2 * 250 + 2 * (1 - t) * t * 250 + t * t * (380 + sway)
        y = (1 - t) ** 2 * 600 + 2 * (1 - t) * t * 260 + t * t * 110
        size = k.num(105, 95, 115) * (1.25 - 0.5 * t)
        bells.append((x + 40, y + 18, size, 95 + k.shift(12)))
    for i, (x, y, size, a) in enumerate(bells):
        w.shape(pal.wash if i % 2 else pal.body, k.opacity(200), outline("fan", x, y, a, size, size * 0.8), 0.6)
    w.comment("bells, second wash")
    for x, y, size, a in bells[::2]:
        w.shape(pal.deep, k.opacity(195), outline("oval", x, y, a, size * 0.7, size * 0.4), 0.6)
    return "bluebells", w.source()


def foxglove(k: Knobs) -> Sketch:
    """A tall spike of alternating bell-shaped flowers with speckles."""
    pal = k.palette("foxglove")
    x = 300 + k.shift(20)
    w = new_writer(k)
    paint_stem(w, k, pal.wood, [(x, 600), (x + 6, 300), (x - 4, 70)], 12)
    paint_leaf(w, k, pal.leaf, x, 600, -140, 200, 70)
    paint_leaf(w, k, pal.leaf_dark, x, 600, -40, 190, 64)
    petal_bleed(w, k)
    w.comment("bells")
    for i in range(7):
        y = 100 + i * 55
        side = -1 if i % 2 else 1
        size = k.num(80, 72, 88) + i * 12
        w.shape(pal.wash if i % 2 else pal.body, k.opacity(200), outline("fan", x, y, 90 - side * 50 + k.shift(8), size, size * 0.8), 0.6)
    w.comment("speckles")
    for i in (2, 4, 6):
        y = 100 + i * 55
        w.circle(pal.centre, k.opacity(215), round(x + 45), round(y + 40), 10)
    return f"a {pal.name} foxglove", w.source()


# --- many thin petals: one star shape per wash, written as a short loop --------------------------------


def _ray_flower(
    k: Knobs, family: str, reach: float, rays: int, inner: float, disc: float, washes: int = 2,
) -> tuple[SketchWriter, Palette]:
    pal = k.palette(family)
    cx, cy = 300 + k.shift(18), 260 + k.shift(18)
    reach = k.num(reach, reach * 0.92, reach * 1.08)
    rays = k.integer(rays, rays - 2, rays + 2)
    rot = round(k.num(0, 0, 20))
    w = new_writer(k)
    _stem_and_leaves(w, k, pal, cx, cy + reach * 0.6, 14)
    petal_bleed(w, k)
    for i, (role, scale) in enumerate((("wash", 1.0), ("body", 0.8), ("deep", 0.6))[:washes]):
        w.comment(f"petals, {('first', 'second', 'third')[i]} wash")
        paint_ray_ring(w, k, getattr(pal, role), cx, cy, reach * scale, reach * inner, rays, rot + i * 90 / rays, 195 + 5 * i)
    paint_disc(w, k, pal, cx, cy, reach * disc)
    return w, pal


def daisy(k: Knobs) -> Sketch:
    """Many thin white rays (one star shape per wash) around a yellow disc."""
    w, _ = _ray_flower(k, "daisy", 200, 16, 0.3, 0.2)
    return "a daisy", w.source()


def sunflower(k: Knobs) -> Sketch:
    """Two washes of yellow rays around a large brown disc."""
    w, _ = _ray_flower(k, "sunflower", 215, 18, 0.42, 0.34)
    return "a sunflower", w.source()


def dahlia(k: Knobs) -> Sketch:
    """Three washes of pointed rays, each smaller and deeper."""
    w, pal = _ray_flower(k, "dahlia", 210, 14, 0.4, 0.12, washes=3)
    return f"{_article(pal.name)} {pal.name} dahlia", w.source()


def zinnia(k: Knobs) -> Sketch:
    """Three washes of short rays around a small centre."""
    w, pal = _ray_flower(k, "zinnia", 190, 12, 0.55, 0.14, washes=3)
    return f"{_article(pal.name)} {pal.name} zinnia", w.source()


def marigold(k: Knobs) -> Sketch:
    """A ruffled ball of many short rays in three washes."""
    w, pal = _ray_flower(k, "marigold", 170, 14, 0.75, 0.1, washes=3)
    return f"{_article(pal.name)} {pal.name} marigold", w.source()


def gerbera(k: Knobs) -> Sketch:
    """Many long thin rays in two washes around a small disc."""
    w, pal = _ray_flower(k, k.pick(["zinnia", "dahlia"]), 210, 22, 0.3, 0.18)
    return f"{_article(pal.name)} {pal.name} gerbera daisy", w.source()


def cosmos(k: Knobs) -> Sketch:
    """Eight notched petals and an inner wash around a yellow centre."""
    rings = [Ring(8, 1.0, 0.45, "fan", "wash", 185)]
    w, pal, cx, cy, reach, rot = _bloom(k, "cosmos", rings, cy=265, reach=200)
    w.comment("petals, second wash")
    paint_floret(w, k, pal.body, cx, cy, reach * 0.6, 8, rot, 205)
    paint_disc(w, k, pal, cx, cy, reach * 0.14)
    return f"a {pal.name} cosmos", w.source()


# --- faces with distinct petals ------------------------------------------------------------------------


def pansy(k: Knobs) -> Sketch:
    """Five overlapping petals with a dark face and a yellow eye."""
    pal = k.palette("pansy")
    cx, cy, r = 300 + k.shift(15), 280 + k.shift(15), k.num(190, 175, 205)
    w = new_writer(k, "leaves behind the flower")
    paint_leaf(w, k, pal.leaf, cx, cy, 150, 120, 90, start=r * 0.6)
    paint_leaf(w, k, pal.leaf_dark, cx, cy, 30, 110, 84, start=r * 0.6)
    petal_bleed(w, k)
    w.comment("petals, first wash")
    for a, s in ((-125, 1.0), (-55, 1.0), (-185, 0.85), (5, 0.85), (90, 0.9)):
        w.shape(pal.wash, k.opacity(190), outline("fan", cx, cy, a + k.shift(6), r * s, r * s), 0.6)
    w.comment("petals, second wash")
    for a in (-185, 5, 90):
        w.shape(pal.body, k.opacity(205), outline("oval", cx, cy, a + k.shift(6), r * 0.7, r * 0.6), 0.6)
    w.comment("the face")
    w.shape(pal.deep, k.opacity(210), star(cx, cy + 10, r * 0.4, r * 0.15, 3, 90 + k.shift(10)), 0.4)
    w.circle(pal.centre, k.opacity(220), round(cx), round(cy), round(r * 0.08))
    return f"a {pal.name} pansy", w.source()


def morning_glory(k: Knobs) -> Sketch:
    """A wide pentagonal trumpet with a pale throat on a vine."""
    pal = k.palette("morning_glory")
    cx, cy, r = 310 + k.shift(15), 260 + k.shift(15), k.num(190, 175, 205)
    w = new_writer(k, "vine and leaves")
    paint_stem(w, k, pal.leaf_dark, [(cx - 60, cy + 150), (160, 420), (80, 600)], 9)
    paint_leaf(w, k, pal.leaf, 150, 430, 160, 150, 110)
    paint_leaf(w, k, pal.leaf_dark, 120, 500, 40, 130, 100)
    petal_bleed(w, k)
    w.comment("trumpet, first wash")
    w.shape(pal.wash, k.opacity(190), star(cx, cy, r, r * 0.85, 5, k.num(-90, -110, -70)), 0.6)
    w.comment("trumpet, second wash")
    w.shape(pal.body, k.opacity(205), star(cx, cy, r * 0.82, r * 0.4, 5, k.num(-90, -110, -70)), 0.5)
    w.comment("throat")
    w.circle(pal.centre, k.opacity(220), round(cx), round(cy), round(r * 0.24))
    w.circle(pal.pollen, k.opacity(215), round(cx), round(cy), round(r * 0.1))
    return f"a {pal.name} morning glory", w.source()


def orchid(k: Knobs) -> Sketch:
    """Three sepals, two broad petals and a deep lip on an arching stem."""
    pal = k.palette("orchid")
    cx, cy, r = 300 + k.shift(15), 270 + k.shift(15), k.num(180, 165, 195)
    w = new_writer(k, "stem and leaves")
    paint_stem(w, k, pal.wood, [(cx + 20, cy + 40), (470, 400), (520, 600)], 8)
    paint_leaf(w, k, pal.leaf, 520, 600, -160, 260, 110)
    paint_leaf(w, k, pal.leaf_dark, 520, 600, -20, 150, 90)
    petal_bleed(w, k)
    w.comment("sepals")
    for a in (-90, 145, 35):
        w.shape(pal.wash, k.opacity(195), outline("oval", cx, cy, a + k.shift(6), r, r * 0.45), 0.6)
    w.comment("petals")
    for a in (-160, -20):
        w.shape(pal.body, k.opacity(200), outline("fan", cx, cy, a + k.shift(6), r * 0.95, r * 0.85), 0.6)
    w.comment("the lip")
    w.shape(pal.deep, k.opacity(210), outline("fan", cx, cy + 10, 90, r * 0.55, r * 0.5), 0.5)
    w.circle(pal.centre, k.opacity(220), round(cx), round(cy), round(r * 0.09))
    return f"{_article(pal.name)} {pal.name} orchid", w.source()


# --- clusters, branches and spikes ------------------------------------------------------------------------


def cherry_blossom(k: Knobs) -> Sketch:
    """Six five-lobed blossoms along a diagonal branch and a twig."""
    pal = k.palette("blossom")
    dy = k.shift(25)
    w = new_writer(k, "branch", bleed=0.12)
    w.shape(pal.wood, k.opacity(215), stem([(-20, 530 + dy), (180, 410 + dy), (330, 345 + dy)], 18), 0.4)
    w.shape(pal.wood, k.opacity(215), stem([(320, 350 + dy), (450, 290 + dy), (580, 190 + dy)], 14), 0.4)
    w.shape(pal.wood, k.opacity(210), stem([(220, 390 + dy), (250, 270 + dy), (300, 170 + dy)], 11), 0.4)
    petal_bleed(w, k)
    w.comment("blossoms")
    spots = [(140, 440), (330, 350), (480, 270), (270, 220), (200, 330), (420, 200)]
    for i, (x, y) in enumerate(spots):
        paint_floret(w, k, pal.body if i % 2 else pal.wash, x + k.shift(12), y + dy + k.shift(12), k.num(62, 52, 70), 5, k.num(0, 0, 72), 210)
    w.comment("centres")
    for x, y in spots[:4]:
        w.circle(pal.deep, k.opacity(215), x, round(y + dy), 13)
    return f"a {pal.name} cherry blossom branch", w.source()


def forget_me_nots(k: Knobs) -> Sketch:
    """A loose cluster of small blue five-lobed flowers with yellow eyes."""
    pal = k.palette("forget_me_not")
    w = new_writer(k)
    paint_stem(w, k, pal.wood, [(300, 600), (290 + k.shift(15), 300)], 9)
    paint_leaf(w, k, pal.leaf, 295, 470, -150, 150, 50)
    paint_leaf(w, k, pal.leaf_dark, 295, 520, -30, 140, 46)
    petal_bleed(w, k)
    w.comment("flowers")
    spots = [(300, 240), (180, 290), (420, 280), (240, 140), (370, 130), (300, 360)]
    spots = [(x + k.shift(15), y + k.shift(15)) for x, y in spots]
    for i, (x, y) in enumerate(spots):
        paint_floret(w, k, pal.body if i % 3 else pal.wash, x, y, k.num(62, 54, 70), 5, k.num(0, 0, 72), 205)
    w.comment("yellow eyes")
    for x, y in spots:
        w.circle(pal.centre, k.opacity(225), round(x), round(y), 11)
    return "forget-me-nots", w.source()


def buttercups(k: Knobs) -> Sketch:
    """Three glossy yellow cups on thin stems."""
    pal = k.palette("buttercup")
    heads = [(200 + k.shift(15), 260 + k.shift(20)), (400 + k.shift(15), 220 + k.shift(20)), (320 + k.shift(15), 400 + k.shift(15))]
    w = new_writer(k)
    for x, y in heads:
        paint_stem(w, k, pal.wood, [(x, y + 40), (300, 600)], 8)
    paint_leaf(w, k, pal.leaf, 300, 600, -140, 160, 60)
    petal_bleed(w, k)
    w.comment("flowers")
    for x, y in heads:
        r = k.num(85, 75, 95)
        paint_floret(w, k, pal.wash, x, y, r, 5, k.num(0, 0, 72), 200)
        paint_floret(w, k, pal.body, x, y, r * 0.6, 5, k.num(36, 0, 72), 210)
    w.comment("centres")
    for x, y in heads:
        w.circle(pal.centre, k.opacity(220), round(x), round(y), 16)
    return "buttercups", w.source()


def hydrangea(k: Knobs) -> Sketch:
    """A rounded head of pale wash dabbed with florets of two tones."""
    pal = k.palette("hydrangea")
    cx, cy = 300 + k.shift(15), 260 + k.shift(15)
    w = new_writer(k, "leaves")
    paint_leaf(w, k, pal.leaf, cx, cy, 140, 180, 120, start=150)
    paint_leaf(w, k, pal.leaf_dark, cx, cy, 40, 170, 110, start=150)
    petal_bleed(w, k)
    w.comment("the flower head, first wash")
    w.shape(pal.wash, k.opacity(175), star(cx, cy, 210, 175, 7, k.num(0, 0, 50)), 0.7)
    w.comment("florets")
    spots = [(0, 0), (-95, -60), (90, -70), (-120, 50), (110, 45), (0, -130), (-20, 110), (-60, -5), (55, 5), (45, -120)]
    for i, (dx, dy) in enumerate(spots):
        col = pal.body if i % 2 else pal.deep
        w.circle(col, k.opacity(195), round(cx + dx + k.shift(12)), round(cy + dy + k.shift(12)), round(k.num(40, 34, 46)))
    return f"a {pal.name} hydrangea", w.source()


def geranium(k: Knobs) -> Sketch:
    """A round head of five-lobed florets on a stem with broad leaves."""
    pal = k.palette("geranium")
    cx, cy = 300 + k.shift(15), 230 + k.shift(15)
    w = new_writer(k)
    paint_stem(w, k, pal.wood, [(cx, cy + 60), (cx + 10, 420), (cx, 600)], 12)
    paint_leaf(w, k, pal.leaf, cx + 4, 470, -165, 200, 150)
    paint_leaf(w, k, pal.leaf_dark, cx, 520, -15, 190, 140)
    petal_bleed(w, k)
    spots = [(0, 0), (-85, -40), (85, -45), (-65, 70), (75, 65), (0, -100)]
    spots = [(cx + dx + k.shift(10), cy + dy + k.shift(10)) for dx, dy in spots]
    w.comment("florets")
    for i, (x, y) in enumerate(spots):
        paint_floret(w, k, pal.body if i % 2 else pal.wash, x, y, k.num(68, 60, 76), 5, k.num(0, 0, 72), 200)
    w.comment("floret hearts")
    for x, y in spots[::2]:
        w.circle(pal.deep, k.opacity(205), round(x), round(y), 20)
    return f"a {pal.name} geranium", w.source()


def lilac(k: Knobs) -> Sketch:
    """A cone of pale wash dabbed with florets, on a woody stem."""
    pal = k.palette("lilac")
    x, y = 300 + k.shift(15), 540
    a = -90 + k.shift(10)
    w = new_writer(k)
    paint_stem(w, k, pal.wood, [(x, 600), polar(x, y, 150, a)], 12)
    paint_leaf(w, k, pal.leaf, x, 480, -150, 190, 100)
    paint_leaf(w, k, pal.leaf_dark, x, 500, -30, 180, 96)
    petal_bleed(w, k)
    w.comment("the flower cone, first wash")
    w.shape(pal.wash, k.opacity(185), spike(*polar(x, y, 90, a), a, 420, 260, 4), 0.6)
    w.comment("florets")
    for t, dx in ((0.1, -60), (0.12, 55), (0.25, -35), (0.28, 40), (0.42, -25), (0.45, 20), (0.6, -5), (0.75, 5)):
        px, py = polar(x, y, 90 + 420 * t, a)
        size = 40 * (1.1 - t * 0.6)
        w.circle(pal.body if t < 0.4 else pal.deep, k.opacity(200), round(px + dx * (1 - t) + k.shift(8)), round(py), round(size))
    return "a sprig of lilac", w.source()


def grape_hyacinths(k: Knobs) -> Sketch:
    """Three short spikes of tiny bells on green stems."""
    pal = k.palette("grape_hyacinth")
    bases = [(210 + k.shift(15), -96), (310 + k.shift(15), -88), (410 + k.shift(15), -80)]
    w = new_writer(k)
    for x, a in bases:
        paint_stem(w, k, pal.leaf, [(x, 600), polar(x, 600, 300, a)], 9)
    paint_leaf(w, k, pal.leaf_dark, 260, 600, -120, 220, 24)
    paint_leaf(w, k, pal.leaf_dark, 360, 600, -62, 220, 24)
    petal_bleed(w, k)
    w.comment("flower spikes, first wash")
    for x, a in bases:
        w.shape(pal.wash, k.opacity(190), spike(*polar(x, 600, 240, a), a, k.num(190, 170, 210), 80, 5), 0.6)
    w.comment("flower spikes, second wash")
    for x, a in bases:
        w.shape(pal.body, k.opacity(205), spike(*polar(x, 600, 250, a), a, 150, 60, 4), 0.6)
    return "grape hyacinths", w.source()


def lavender(k: Knobs) -> Sketch:
    """Three slim stems with tapering flower spikes in two washes."""
    pal = k.palette("lavender")
    x0, y0 = 300 + k.shift(20), 590
    angles = [-104, -91, -78] if k.canonical else sorted(-90 + k.shift(8) + d for d in (-14, 0, 14))
    w = new_writer(k)
    for a in angles:
        paint_stem(w, k, pal.wood, [(x0, y0), polar(x0, y0, 330, a)], 7)
    paint_leaf(w, k, pal.leaf, x0, y0, -128, 170, 22)
    paint_leaf(w, k, pal.leaf_dark, x0, y0, -55, 150, 20)
    petal_bleed(w, k)
    w.comment("flower spikes, first wash")
    for a in angles:
        w.shape(pal.wash, k.opacity(185), spike(*polar(x0, y0, 300, a), a, k.num(200, 180, 230), 46, 4), 0.5)
    w.comment("flower spikes, second wash")
    for a in angles:
        w.shape(pal.body, k.opacity(205), spike(*polar(x0, y0, 320, a), a, k.num(160, 140, 180), 30, 3), 0.5)
    return "a bunch of lavender", w.source()


#: name -> base sketch, in a fixed order (the corpus order).
BASES: dict[str, Callable[[Knobs], Sketch]] = {
    fn.__name__: fn
    for fn in (
        peach_hibiscus, magenta_hibiscus, yellow_hibiscus, coral_hibiscus, white_hibiscus, hibiscus_with_bud,
        coral_poppy, red_poppy, orange_poppy, poppy_field, white_anemone, anemone,
        rose, wild_rose, peony, camellia,
        lotus, water_lily, lily, clematis, magnolia, plumeria, hellebore,
        violet_iris, blue_iris, tulip, two_tulips, calla_lily, crocuses, bluebells, foxglove,
        daisy, sunflower, dahlia, zinnia, marigold, gerbera, cosmos,
        pansy, morning_glory, orchid,
        cherry_blossom, forget_me_nots, buttercups, hydrangea, geranium, lilac, grape_hyacinths, lavender,
    )
}
