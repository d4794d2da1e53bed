"""Text written with allowed strokes (issue 36 item 3): the painting is read on the renderer
(``brushrl.render.text``, real RapidOCR) and the runtime gate fails legible words as
``text_in_painting``; no honest painting of the project reads as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from brushrl.config import GateConfig, RenderConfig
from brushrl.corpus.build import make_variant
from brushrl.gate import reasons as R
from brushrl.gate.runtime import InfraRender, check_runtime, legible
from brushrl.render.browser import Renderer
from brushrl.render.text import TextReader

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "tests" / "fixtures" / "text"
GATE = GateConfig()
SIZE = 600


@pytest.fixture(scope="module")
def reader():
    return TextReader(RenderConfig().text_scan_side)


@pytest.fixture(scope="module")
def renderer(reader):
    with Renderer(network_isolation="none", text_reader=reader) as r:
        yield r


def test_legible_counts_words_not_marks():
    found = [("YE5", 0.85), ("025", 0.9), ("ROSE", 0.5), ("A", 0.99), ("足", 0.9), ("POBE", 0.7)]
    assert legible(found, 0.6, 3) == ["YE5", "POBE"]
    assert legible(None, 0.6, 3) == [] and legible([], 0.6, 3) == []


@pytest.mark.parametrize("name", ["rose_named.js", "rose_named_small.js", "rose_named_low_contrast.js",
                                  "rose_named_dot_matrix.js"])
def test_stroke_lettering_is_read_from_the_replayed_painting_and_fails(renderer, name):
    res = renderer.render((TEXT / name).read_text(), 0, SIZE, 60, 1)
    assert res.status == "ok" and res.refused == [] and res.forbidden == {}, (res.status, res.detail)
    assert res.text and "text" in res.phases, res.text
    verdict = check_runtime(res, GATE, SIZE)
    assert verdict.verdict == R.TEXT_IN_PAINTING, (verdict, res.text)
    assert "reads as text" in verdict.detail


def test_the_same_painting_without_its_name_passes_read_and_wordless(renderer):
    honest = renderer.render(make_variant("rose", 0).code, 0, SIZE, 60, 1)
    assert honest.status == "ok" and legible(honest.text, GATE.text_min_confidence, GATE.text_min_chars) == []
    assert check_runtime(honest, GATE, SIZE).passed
    assert "text:" in renderer.env  # a reading is part of the render cache's key


def test_no_starter_pool_painting_reads_as_text(reader):
    pngs = sorted((ROOT / "pools" / "starter").glob("*.png"))
    assert len(pngs) >= 16
    read = {p.stem: reader.read(p.read_bytes()) for p in pngs}
    assert {k: v for k, v in read.items() if legible(v, GATE.text_min_confidence, GATE.text_min_chars)} == {}


def test_a_reader_that_fails_makes_the_render_infra_never_a_pass():
    class Broken(TextReader):
        def __init__(self):  # no engine: every read fails as a broken install would
            self.side = 300

        def read(self, png):
            raise RuntimeError("onnxruntime session is gone")

    with Renderer(network_isolation="none", text_reader=Broken()) as r:
        res = r.render(make_variant("rose", 0).code, 0, SIZE, 60, 1)
    assert res.status == "infra" and "text scan failed" in res.detail and res.text is None
    with pytest.raises(InfraRender):
        check_runtime(res, GATE, SIZE)
