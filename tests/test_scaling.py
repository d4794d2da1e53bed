"""Renderer scaling without a restart: ``control.yaml`` / ``brushrl scale`` and ``RenderPool.resize``
on a real local Ray with real Chromium renderers."""

from __future__ import annotations

import io
import time

import pytest
import ray

from brushrl.cli import main
from brushrl.config import ActorPlacement, RenderConfig
from brushrl.orchestrator.control import ControlError, ControlFile, write_control
from brushrl.render.bench import SKELETON
from brushrl.ray_setup import start_local_ray


def test_control_file_round_trip(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        write_control(run, 3)
    (run / "config.yaml").write_text("run: {}\n")
    watch = ControlFile(run / "control.yaml")
    assert watch.poll() is None  # no file yet
    write_control(run, 3)
    assert watch.poll().render.num_actors == 3
    assert watch.poll() is None  # unchanged
    with pytest.raises(ControlError, match="render.num_actors"):
        write_control(run, 0)
    (run / "control.yaml").write_text("render: {num_actors: -2}\n")
    with pytest.raises(ControlError, match="render.num_actors"):
        watch.poll()
    assert watch.poll() is None  # a bad file is reported once
    (run / "control.yaml").write_text("render: {num_actor: 2}\n")
    with pytest.raises(ControlError, match="num_actor"):
        watch.poll()


def test_scale_cli(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("run: {}\n")
    assert main(["scale", str(run), "--renderers", "4"]) == 0
    assert ControlFile(run / "control.yaml").poll().render.num_actors == 4
    assert main(["scale", str(tmp_path / "nope"), "--renderers", "4"]) == 2
    assert main(["scale", str(run), "--renderers", "0"]) == 2
    assert "render.num_actors" in capsys.readouterr().out


@pytest.fixture
def local_ray():
    # Two renderer slots, as a renderer node advertising {"renderer": 2} would.
    start_local_ray(num_cpus=4, resources={"renderer": 2}, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_pool_grows_and_shrinks_without_waiting_on_pending_renderers(local_ray, tmp_path):
    from brushrl.orchestrator.control import apply_control
    from brushrl.render.pool import RenderPool

    cfg = RenderConfig(num_actors=1, num_cpus=0.5, deadline_s=120, attempts=1)
    pool = RenderPool(cfg, ActorPlacement(resources={"renderer": 1}))
    try:
        first = pool.ping()
        pool.resize(3)  # one more starts; the third waits for a renderer slot no node has
        assert pool.size == 3
        results = pool.render_many([(SKELETON, seed) for seed in range(6)])
        assert [r.status for r in results] == ["ok"] * 6  # the pending renderer blocked nothing
        # The second browser may still be starting on a loaded box; a starting actor joins while the
        # pool waits on renders (fresh seeds: the render cache would answer repeats at once).
        deadline, seed = time.monotonic() + 180, 100
        while len(pool.actors) < 2 and time.monotonic() < deadline:
            pool.render_many([(SKELETON, seed)])
            seed += 1
        assert len(pool.actors) == 2
        pids = {p["pid"] for p in pool.ping()}
        assert len(pids) == 2 and first[0]["pid"] in pids
        pool.resize(1)  # drops the pending one, then the newest started one
        assert pool.size == 1 and len(pool.actors) == 1
        assert pool.ping()[0]["pid"] == first[0]["pid"]
        assert [r.status for r in pool.render_many([(SKELETON, 1)])] == ["ok"]
        with pytest.raises(ValueError):
            pool.resize(0)
        # The trainer applies control.yaml between steps; a bad file is reported, not fatal.
        log = io.StringIO()
        run = tmp_path / "s"
        run.mkdir()
        (run / "config.yaml").write_text("run: {}\n")
        control = ControlFile(run / "control.yaml")
        say = lambda line: print(line, file=log)  # noqa: E731
        assert main(["scale", str(run), "--renderers", "2"]) == 0
        assert apply_control(control, pool, say)
        assert pool.size == 2 and "renderers: 1 -> 2" in log.getvalue()
        (run / "control.yaml").write_text("render: {num_actors: many}\n")
        assert not apply_control(control, pool, say)
        assert pool.size == 2 and "ignoring control.yaml" in log.getvalue()
    finally:
        pool.shutdown()
