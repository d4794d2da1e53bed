"""Render stage: p5.brush sketch -> PNG in headless Chromium, and a Ray pool of renderer actors.

``Renderer`` (one browser, ``brushrl.render.browser``), ``paint_fraction`` (``brushrl.render.paint``);
the Ray pool lives in ``brushrl.render.pool`` (imported on demand so that this package does not
import Ray).
"""

from brushrl.render.browser import Renderer
from brushrl.render.harness import find_js_dir
from brushrl.render.paint import paint_fraction

__all__ = ["Renderer", "find_js_dir", "paint_fraction"]
