"""Render stage: p5.brush sketch -> PNG in headless Chromium, and the render path over Ray.

``Renderer`` (one browser, ``brushrl.render.browser``), ``paint_fraction`` (``brushrl.render.paint``);
``brushrl.render.pool.RenderPool`` is the one render path of training, pool builds and the benchmark
(renderer actors, retry elsewhere, render cache, telemetry; imported on demand so that this package
does not import Ray).
"""

__all__ = ["Renderer", "find_js_dir", "paint_fraction"]

_WHERE = {"Renderer": "brushrl.render.browser", "find_js_dir": "brushrl.render.harness",
          "paint_fraction": "brushrl.render.paint"}


def __getattr__(name: str):
    # Imported on first use, so that ``brushrl.render.calllog`` (which the config's validation
    # reads) does not import Playwright: the one-process GPU smoke runs without it.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'brushrl.render' has no attribute {name!r}")
