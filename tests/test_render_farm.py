"""Render farm scaling with the real parts: a local Ray of its own (custom resource), Chromium.

Run: PYTHONPATH=src .venv/bin/python -m pytest tests/test_render_farm.py -q
"""

from __future__ import annotations

import time

import pytest
import ray

from brushrl.config import ActorPlacement, RenderConfig
from brushrl.render.pool import RenderPool
from brushrl.ray_setup import start_local_ray


def test_actor_with_two_pages_renders_two_at_once_and_custom_resource_is_requested():
    # A separate local Ray whose only node offers the custom resource the config asks for.
    start_local_ray(num_cpus=2, resources={"renderer": 1}, log_to_driver=False)
    try:
        cfg = RenderConfig(num_actors=1, pages_per_actor=2, num_cpus=0.5, deadline_s=120, attempts=1,
                           cache_entries=0)
        placement = ActorPlacement(resources={"renderer": 1})  # resources.renderer of a run config
        p = RenderPool(cfg, placement)
        p.ping()
        assert ray.available_resources().get("renderer", 0) == 0  # the actor holds it
        blank = "function setup() { createCanvas(600, 600, WEBGL); background(9); noLoop(); }"
        assert [r.status for r in p.render_many([(blank, 0), (blank, 1)])] == ["ok", "ok"]  # both pages up
        wait = "async function setup() { createCanvas(600, 600, WEBGL); await new Promise((r) => setTimeout(r, 4000)); noLoop(); }"
        t = time.monotonic()
        results = p.render_many([(wait, 0), (wait, 1)])
        took = time.monotonic() - t
        assert [r.status for r in results] == ["ok", "ok"] and len({r.actor_id for r in results}) == 1
        walls = sum(r.wall_s for r in results)
        print(f"\ntwo 4 s renders on one actor with 2 pages: {took:.1f} s for {walls:.1f} s of renders")
        assert took < walls - 2.0  # they overlapped (serial: took >= walls; the waits alone save ~4 s)
        assert p.ping()[0]["browsers"] >= 2
        # A second actor asking for the same resource cannot be placed: it waits, it does not run.
        extra = RenderPool(cfg, placement)
        with pytest.raises(ray.exceptions.GetTimeoutError):
            extra.ping(timeout_s=5)
        extra.shutdown(timeout_s=1)
        p.shutdown()
    finally:
        ray.shutdown()
