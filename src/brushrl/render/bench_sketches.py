"""The fixed sketch set of the render benchmark (``brushrl bench render``).

``bench_sketches()`` returns, in a fixed order, the canonical variant (variant 0) of the first 15
corpus bases (``brushrl.corpus``; the hibiscus family first) interleaved with 5 heavier sketches:

* ``skeleton``: the taught skeleton, one filled shape (``brushrl.render.bench.SKELETON``);
* ``heavy``: 21 filled layered shapes (``brushrl.render.bench.HEAVY``);
* ``layered_washes``: 48 overlapping fills, 4 glazes over a 12-shape grid, strong bleed + texture;
* ``hatching``: 6 hatched polygons (``brush.hatch`` + ``hatchStyle``) over 3 fills;
* ``pencil_strokes``: 160 pencil/marker lines (``brush.set`` + ``brush.line``) over 2 fills.

The heavy sketches use brush methods outside the policy's whitelist (hatch, strokes): the benchmark
measures the renderer, not the gate. Sketches are 600x600 WEBGL like the corpus.
"""

from __future__ import annotations

from brushrl.render.bench import HEAVY, SKELETON

_HEAD = "async function setup() { createCanvas(600, 600, WEBGL); brush.scaleBrushes(3); angleMode(DEGREES); noLoop(); }\n"

LAYERED_WASHES = _HEAD + """function draw() {
  translate(-width / 2, -height / 2); background("#fbf6ea"); brush.noStroke();
  const cols = ["#3a6ea5", "#e08a72", "#6f9a52", "#d9a441"];
  for (let glaze = 0; glaze < 4; glaze++) {
    for (let i = 0; i < 12; i++) {
      const x = 90 + (i % 4) * 140 + glaze * 12, y = 110 + Math.floor(i / 4) * 170 - glaze * 10;
      brush.fill(cols[(i + glaze) % 4], 120); brush.fillBleed(0.4); brush.fillTexture(0.7, 0.5);
      brush.beginShape(0.5);
      brush.vertex(x - 70, y - 60); brush.vertex(x + 60, y - 75); brush.vertex(x + 75, y + 60); brush.vertex(x - 55, y + 70);
      brush.endShape(true);
    }
  }
}
"""

HATCHING = _HEAD + """function draw() {
  translate(-width / 2, -height / 2); background("#fdfaf2"); brush.noStroke();
  brush.fill("#c9d6e8", 150); brush.fillBleed(0.3); brush.rect(60, 60, 480, 200);
  brush.fill("#e8cfa8", 150); brush.fillBleed(0.3); brush.rect(60, 300, 230, 240);
  brush.fill("#d8a8a0", 150); brush.fillBleed(0.3); brush.rect(310, 300, 230, 240);
  brush.noFill();
  brush.hatchStyle("HB", "#2f3b52", 1);
  for (let i = 0; i < 6; i++) {
    brush.hatch(6 + i, i * 30, { rand: 0.1, continuous: true, gradient: 0.3 });
    const x = 80 + (i % 3) * 160, y = 90 + Math.floor(i / 3) * 250;
    brush.beginShape(0);
    brush.vertex(x, y); brush.vertex(x + 140, y + 10); brush.vertex(x + 130, y + 190); brush.vertex(x + 10, y + 180);
    brush.endShape(true);
  }
  brush.noHatch();
}
"""

PENCIL_STROKES = _HEAD + """function draw() {
  translate(-width / 2, -height / 2); background("#fdfaf2"); brush.noStroke();
  brush.fill("#b7c9a8", 140); brush.fillBleed(0.3); brush.circle(300, 300, 200, 0.5);
  brush.fill("#e3b28c", 140); brush.fillBleed(0.3); brush.circle(220, 380, 120, 0.5);
  const tips = ["2B", "HB", "pen", "marker"];
  for (let i = 0; i < 160; i++) {
    brush.set(tips[i % 4], i % 2 ? "#3b3b58" : "#7a4a3a", 1);
    const a = i * 2.25, r0 = 60 + (i % 7) * 12;
    brush.line(300 + r0 * cos(a), 300 + r0 * sin(a), 300 + (r0 + 160) * cos(a + 8), 300 + (r0 + 160) * sin(a + 8));
  }
}
"""

HEAVY_SKETCHES = {
    "skeleton": SKELETON,
    "heavy": HEAVY,
    "layered_washes": LAYERED_WASHES,
    "hatching": HATCHING,
    "pencil_strokes": PENCIL_STROKES,
}

CORPUS_COUNT = 15
"""Corpus bases in the set (the first 15 of ``brushrl.corpus.BASES``: 6 hibiscus, 4 poppies, ...)."""


def bench_sketches() -> list[tuple[str, str]]:
    """The 20 benchmark sketches as ``(name, code)``: corpus bases with a heavy sketch after every
    third one, so that any prefix (``--sketches N``) mixes both kinds."""
    from brushrl.corpus import BASES, make_variant

    corpus = [(f"corpus/{b}", make_variant(b, 0).code) for b in list(BASES)[:CORPUS_COUNT]]
    heavy = list(HEAVY_SKETCHES.items())
    out: list[tuple[str, str]] = []
    for i, item in enumerate(corpus):
        out.append(item)
        if i % 3 == 0 and heavy:
            out.append(heavy.pop(0))
    return out + heavy
