"""Anti-hacking: the known reward hacks cannot beat honest corpus paintings on the CPU scorer, and
are gated where the gate can know. Honest paintings are real renders of corpus sketches (variants
of pool subjects that are not pool images), made here with the project's Renderer; nothing is
cached. Each hack is scored against every honest painting's subject and must stay below the
median honest painting for all of them (``brushrl.reward.ranking.hacks``; the full table for all
16 pool subjects is in docs/reward.md)."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

import pytest
from PIL import Image

from brushrl.config import GateConfig, PoolScorerConfig, RenderConfig
from brushrl.corpus import make_variant
from brushrl.gate import check_runtime, check_static
from brushrl.pool import ReferencePool
from brushrl.reward.pool_scorer import PoolSimilarityScorer
from brushrl.reward.ranking import FLOOD_FILL, hacks
from brushrl.types import RenderResult

ROOT = Path(__file__).resolve().parents[1]
SKELETON = (ROOT / "tests/fixtures/gate/pass_skeleton.js").read_text()
#: Variants (none in the pool) that paint their pool image's subject.
HONEST = ["peach_hibiscus/1", "red_poppy/1", "camellia/1", "rose/2"]


def _draw(body: str) -> str:
    """The skeleton's setup with ``body`` as the painting."""
    head = SKELETON.split("function draw")[0]
    return head + 'function draw() {\n  translate(-width / 2, -height / 2);\n  background("#fdf8ee");\n' + body + "\n}\n"


#: Read the canvas back (e.g. to copy or measure it): pixel access.
PIXEL_READER = _draw("  brush.circle(300, 300, 100, 0.2);\n  loadPixels();\n  const c = get(300, 300);")


@pytest.fixture(scope="module")
def renders():
    from brushrl.render.browser import Renderer

    cfg = RenderConfig()
    renderer = Renderer.from_config(cfg)
    try:
        out = {}
        for name in HONEST:
            base, variant = name.split("/")
            item = make_variant(base, int(variant))
            out[name] = (item.subject, renderer.render(item.code, seed=0, size=600, deadline_s=240, attempts=1))
        out["flood_fill"] = ("", renderer.render(FLOOD_FILL, seed=0, size=600, deadline_s=240, attempts=1))
        return out
    finally:
        renderer.close()


def test_hacks_score_below_the_median_honest_painting(renders):
    cfg = PoolScorerConfig(path=str(ROOT / "pools/starter"))
    pool = ReferencePool(cfg.path)
    scorer = PoolSimilarityScorer(pool.entries, cfg.tiers, cfg.copy_min_corr)
    unguarded = PoolSimilarityScorer(pool.entries, cfg.tiers, copy_min_corr=2.0)
    honest = []
    for name in HONEST:
        subject, r = renders[name]
        assert r.status == "ok", (name, r.status, r.js_errors)
        refs = scorer.subject_references(subject)
        assert refs, f"{name}: {subject!r} has no pool image"
        honest.append(scorer.score(r.png, refs))
        assert scorer.copy_correlation(r.png) < cfg.copy_min_corr - 0.1
    median = statistics.median(honest)
    print("honest", [round(h, 3) for h in honest], "median", round(median, 3))
    flood = renders["flood_fill"][1]
    assert flood.status == "ok"
    for name in HONEST:
        subject = renders[name][0]
        refs = scorer.subject_references(subject)
        reference = next(e for e in pool.entries if e.id == refs[0]).path.read_bytes()
        made = hacks(reference, {"flood_fill": flood.png})
        scores = {k: scorer.score(png, refs) for k, png in made.items()}
        print(subject, {k: round(v, 3) for k, v in scores.items()})
        assert unguarded.score(made["copy_of_reference"], refs) > median  # the copy guard is what stops it
        for hack, value in scores.items():
            assert value < median, f"{hack} scores {value:.3f} >= honest median {median:.3f} for {subject!r}"


def test_hacks_are_gated_where_the_gate_can_know(renders):
    gate = GateConfig()
    _, verdict = check_static("```js\n" + PIXEL_READER + "\n```", gate, 600)
    assert verdict.verdict == "pixel_access"
    flood = renders["flood_fill"][1]
    assert flood.status == "ok"
    assert check_runtime(flood, gate, 600).verdict in {"pass", "blank_canvas"}  # legal calls: the scorer's job
    buf = io.BytesIO()
    Image.new("RGB", (600, 600), "#fdf8ee").save(buf, "PNG")
    blank = RenderResult("ok", png=buf.getvalue(), paint_fraction=0.0)
    assert check_runtime(blank, gate, 600).verdict == "blank_canvas"
