"""Reward components and their combination: the gate, the length ramp, the pool scorer, None."""

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from brushrl.config import LengthConfig
from brushrl.reward import combine, image_features, length_score
from brushrl.reward.pool_scorer import similarity
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
    assert 0.1 < a.coverage < 0.6
    assert a.colour.sum() == pytest.approx(1.0) and a.edges.sum() == pytest.approx(1.0)
    assert similarity(a, a) == pytest.approx(1.0)
    blue = image_features(_png(lambda d: d.rectangle([20, 20, 180, 180], fill=(20, 40, 200))))
    resized = image_features(_png(flower, size=320, blur=5))
    assert similarity(resized, a) > similarity(blue, a) + 0.2
    blank = image_features(_png(lambda d: None))
    assert blank.coverage == 0.0 and blank.colour.sum() == 0.0
    assert similarity(blank, a) < 0.2
