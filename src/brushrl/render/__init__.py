"""Render stage: p5.brush sketch -> PNG in headless Chromium, and the render path over Ray.

``Renderer`` (one browser, ``brushrl.render.browser``), ``paint_fraction`` (``brushrl.render.paint``);
``brushrl.render.pool.RenderPool`` is the one render path of training, pool builds and the benchmark
(renderer actors, retry elsewhere, render cache, telemetry; imported on demand so that this package
does not import Ray).
"""

from brushrl.render.browser import Renderer
from brushrl.render.harness import find_js_dir
from brushrl.render.paint import paint_fraction

__all__ = ["Renderer", "find_js_dir", "paint_fraction"]
