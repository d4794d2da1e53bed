"""Reward components and their combination: the gate, the length ramp, the pool scorer, None."""

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from brushrl.config import LengthConfig
from brushrl.reward import combine, image_features, length_score
from brushrl.reward.pool_scorer import TERMS, own_terms, palette_distance, score_terms, similarity
from brushrl.types import GateVerdict

WEIGHTS = {"gate": 0.05, "length": 0.05, "pool_similarity": 0.9}


def _png(draw_fn, size=200, blur=0.0) -> bytes:
    img = Image.new("RGB", (size, size), "#fdf8ee")
    draw_fn(ImageDraw.Draw(img))
    if blur:
        img = img.filter(ImageFilter.GaussianBlur(blur))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def flower(d):
    for i in range(5):
        a = i * 2 * np.pi / 5
        x, y = 100 + 45 * np.cos(a), 100 + 45 * np.sin(a)
        d.ellipse([x - 35, y - 35, x + 35, y + 35], fill=(230, 130, 110))
    d.ellipse([85, 85, 115, 115], fill=(240, 200, 80))


def test_length_ramp_matches_reproduction():
    cfg = LengthConfig()
    assert length_score("x" * 4 * 100, cfg) == 0.0  # 100 tokens < 150
    assert length_score("x" * 4 * 3000, cfg) == 1.0
    assert length_score("x" * 4 * 6001, cfg) == 0.0
    mid = length_score("x" * 4 * 1575, cfg)
    assert mid == pytest.approx((1575 - 150) / (3000 - 150))


def test_gate_failure_scores_zero_even_with_good_components():
    out = combine(GateVerdict("text_label"), {"length": 1.0, "pool_similarity": 1.0}, WEIGHTS)
    assert out.total == 0.0 and out.none_cause is None


def test_passed_sample_is_weighted_sum():
    out = combine(GateVerdict("pass"), {"length": 0.5, "pool_similarity": 0.4}, WEIGHTS)
    assert out.total == pytest.approx(0.05 + 0.05 * 0.5 + 0.9 * 0.4)
    assert out.components["gate"] == 1.0


def test_scorer_failure_is_none_not_zero():
    out = combine(GateVerdict("pass"), {"length": 0.5, "pool_similarity": None}, WEIGHTS, none_cause="scorer_timeout")
    assert out.total is None and out.none_cause == "scorer_timeout"
    out = combine(GateVerdict("pass"), {"length": 0.5, "pool_similarity": None}, WEIGHTS)
    assert out.total is None and "pool_similarity" in out.none_cause


def test_render_infrastructure_failure_is_none():
    out = combine(None, {}, WEIGHTS)
    assert out.total is None and out.none_cause == "render_infra"


def test_unweighted_scorer_failure_does_not_void_the_sample():
    out = combine(GateVerdict("pass"), {"length": 0.5, "pool_similarity": None}, {"gate": 0.5, "length": 0.5})
    assert out.total == pytest.approx(0.75)


def test_features_and_similarity_behave():
    a = image_features(_png(flower, blur=3))
    assert 0.1 < a.coverage < 0.6 and a.palette_mass.sum() == pytest.approx(1.0)
    assert a.off_centre < 0.05 and a.border == 0.0 and 0 < a.levels <= 1
    assert similarity(a, a) == pytest.approx(1.0, abs=0.02)  # palette 1, shape 1, centred, covered, layered
    resized = image_features(_png(flower, size=320, blur=5))
    blue = image_features(_png(lambda d: d.rectangle([20, 20, 180, 180], fill=(20, 40, 200))))
    assert similarity(resized, a) > similarity(blue, a) + 0.3
    assert palette_distance(blue, a) > 3 * palette_distance(resized, a)
    blank = image_features(_png(lambda d: None))
    assert blank.coverage == 0.0 and len(blank.palette) == 0
    assert similarity(blank, a) == 0.0


def test_each_term_punishes_its_own_fault():
    """Composition (paint in a corner), coverage (too little, or a flood) and layering (one flat
    fill) each lower the score of an otherwise matching painting."""
    ref = image_features(_png(flower, blur=3))
    corner = image_features(_png(lambda d: d.ellipse([0, 0, 50, 50], fill=(230, 130, 110)), blur=3))
    assert own_terms(corner)["composition"] == 0.0 and similarity(corner, ref) == 0.0
    flood = image_features(_png(lambda d: d.rectangle([0, 0, 200, 200], fill=(230, 130, 110))))
    assert own_terms(flood)["coverage"] == 0.0
    flat = image_features(_png(lambda d: d.ellipse([40, 40, 160, 160], fill=(230, 130, 110))))
    assert own_terms(flat)["layering"] == 0.0 and own_terms(ref)["layering"] > 0.8  # blurred edges: several levels
    terms = score_terms(ref, [(1.0, ref)])[1]
    assert set(terms) == set(TERMS) and all(0.0 <= v <= 1.0 for v in terms.values())


def test_subject_references_pick_the_prompts_subject():
    from pathlib import Path

    from brushrl.pool import ReferencePool
    from brushrl.reward.pool_scorer import PoolSimilarityScorer

    pool = ReferencePool(Path(__file__).resolve().parents[1] / "pools/starter")
    scorer = PoolSimilarityScorer(pool.entries, {"love": 1.0, "good": 0.8})
    assert scorer.subject_references("Paint a coral poppy in loose watercolour.") == ["coral_poppy-0"]
    assert scorer.subject_references("Paint A Red Poppy.") == ["red_poppy-0"]
    assert scorer.subject_references("Paint three red poppies in loose watercolour.") == []  # not "a red poppy"


def test_ranking_set_breaks_shapes_and_tau_orders_tiers():
    import random

    from brushrl.corpus import make_variant
    from brushrl.reward.ranking import BREAKERS, kendall_tau, ranking_set

    code = make_variant("red_poppy", 1).code
    for name, breaker in BREAKERS.items():
        broken = breaker(code, random.Random(0))
        assert broken != code and broken.count("brush.vertex(") == code.count("brush.vertex("), name
    assert "brush.vertex(" in BREAKERS["cornered"]("brush.vertex(300, 600);", random.Random(0))
    assert BREAKERS["cornered"]("brush.vertex(300, 600);", random.Random(0)) == "brush.vertex(99, 198);"
    items = ranking_set({"red_poppy": ("love", "a red poppy"), "tulip": ("good", "a red tulip")})
    assert [i.tier for i in items].count("broken") == 4 and all(i.subject in ("a red poppy", "a red tulip") for i in items)
    assert kendall_tau([3, 2, 1], ["love", "good", "broken"]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3], ["love", "good", "broken"]) == pytest.approx(-1.0)
