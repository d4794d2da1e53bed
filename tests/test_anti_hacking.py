"""Anti-hacking: the known reward hacks cannot beat honest corpus paintings on the CPU scorer, and
are gated where the gate can know. Honest paintings are real renders of corpus sketches (variants
that are not in the starter pool), made here with the project's Renderer; nothing is cached."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from brushrl.config import GateConfig, PoolScorerConfig, RenderConfig
from brushrl.corpus import build_corpus
from brushrl.gate import check_runtime, check_static
from brushrl.pool import ReferencePool
from brushrl.reward.pool_scorer import PoolSimilarityScorer

ROOT = Path(__file__).resolve().parents[1]
SKELETON = (ROOT / "tests/fixtures/gate/pass_skeleton.js").read_text()
HONEST = ["peach_hibiscus/1", "red_poppy/1", "rose/1", "camellia/1"]  # variants, none in the pool
SEED = 11  # group seed: the references every painting below faces


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def _draw(body: str) -> str:
    """The skeleton's setup with ``body`` as the painting."""
    head = SKELETON.split("function draw")[0]
    return head + 'function draw() {\n  translate(-width / 2, -height / 2);\n  background("#fdf8ee");\n' + body + "\n}\n"


#: Paint the whole canvas with one opaque shape of a palette colour.
FLOOD_FILL = _draw(
    '  brush.noStroke();\n  brush.fill("#e08a72", 255);\n  brush.beginShape(0);\n'
    "  brush.vertex(-10, -10);\n  brush.vertex(610, -10);\n  brush.vertex(610, 610);\n  brush.vertex(-10, 610);\n"
    "  brush.endShape(true);"
)
#: Read the canvas back (e.g. to copy or measure it): pixel access.
PIXEL_READER = _draw("  brush.circle(300, 300, 100, 0.2);\n  loadPixels();\n  const c = get(300, 300);")


@pytest.fixture(scope="module")
def renders():
    from brushrl.render.browser import Renderer

    cfg = RenderConfig()
    corpus = {c.name: c for c in build_corpus(2, seed=0)}
    renderer = Renderer.from_config(cfg)
    try:
        out = {}
        for name in HONEST:
            out[name] = renderer.render(corpus[name].code, seed=0, size=600, deadline_s=240, attempts=1)
        out["flood_fill"] = renderer.render(FLOOD_FILL, seed=0, size=600, deadline_s=240, attempts=1)
        return out
    finally:
        renderer.close()


def _moved(img: Image.Image, dx: int, dy: int) -> Image.Image:
    """``img`` translated by (dx, dy) pixels on paper-coloured ground."""
    out = Image.new("RGB", img.size, "#fdf8ee")
    out.paste(img, (dx, dy))
    return out


def test_hacks_score_below_the_median_honest_painting(renders):
    cfg = PoolScorerConfig(path=str(ROOT / "pools/starter"))
    pool = ReferencePool(cfg.path)
    scorer = PoolSimilarityScorer(pool.entries, cfg.tiers, cfg.copy_min_corr)
    refs = [e.id for e in pool.sample(list(cfg.tiers), cfg.refs_per_tier, SEED)]
    honest = []
    for name in HONEST:
        r = renders[name]
        assert r.status == "ok", (name, r.status, r.js_errors)
        honest.append(scorer.score(r.png, refs))
    median = statistics.median(honest)

    ref_img = Image.open(pool.entries[[e.id for e in pool.entries].index(refs[0])].path).convert("RGB")
    rng = np.random.default_rng(0)
    hacks = {
        # the best reference of the draw, upscaled to the canvas: a copy
        "copy_of_reference": _png(ref_img.resize((600, 600), Image.LANCZOS)),
        "copy_slightly_shifted": _png(ref_img.resize((600, 600)).rotate(1.5, fillcolor="#fdf8ee")),
        "copy_moved_30px": _png(_moved(ref_img.resize((600, 600)), 30, -20)),
        "copy_mirrored": _png(ref_img.resize((600, 600)).transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
        "flat_colour": _png(Image.new("RGB", (600, 600), "#e08a72")),
        "flood_fill": renders["flood_fill"].png,
        "noise_canvas": _png(Image.fromarray(rng.integers(0, 256, (600, 600, 3), dtype=np.uint8))),
        "pastel_noise": _png(Image.fromarray(rng.integers(150, 256, (600, 600, 3), dtype=np.uint8))),
    }
    scores = {name: scorer.score(png, refs) for name, png in hacks.items()}
    print("copy correlations: honest", [round(scorer.copy_correlation(renders[n].png), 3) for n in HONEST],
          "hacks", {k: round(scorer.copy_correlation(v), 3) for k, v in hacks.items()})
    unguarded = PoolSimilarityScorer(pool.entries, cfg.tiers, copy_min_corr=2.0)
    print("without the copy guard", {k: round(unguarded.score(v, refs), 3) for k, v in hacks.items()})
    assert unguarded.score(hacks["copy_of_reference"], refs) > median  # the guard is what stops it
    assert max(scorer.copy_correlation(renders[n].png) for n in HONEST) < cfg.copy_min_corr - 0.1
    print("honest", [round(h, 3) for h in honest], "median", round(median, 3))
    print({k: round(v, 3) for k, v in scores.items()})
    for name, value in scores.items():
        assert value < median, f"{name} scores {value:.3f} >= honest median {median:.3f}"


def test_hacks_are_gated_where_the_gate_can_know(renders):
    gate = GateConfig()
    _, verdict = check_static("```js\n" + PIXEL_READER + "\n```", gate, 600)
    assert verdict.verdict == "pixel_access"
    flood = renders["flood_fill"]
    assert flood.status == "ok"
    assert check_runtime(flood, gate, 600).verdict in {"pass", "blank_canvas"}  # legal calls: the scorer's job
    flat = Image.new("RGB", (600, 600), "#fdf8ee")
    from brushrl.types import RenderResult

    blank = RenderResult("ok", png=_png(flat), paint_fraction=0.0)
    assert check_runtime(blank, gate, 600).verdict == "blank_canvas"
